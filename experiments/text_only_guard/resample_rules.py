"""Which guard rule keeps `ramen`'s served encoder from falling below `dual_encoder`'s? (issue #62)

On the validation rows only (the trainer's rows of the training window, its label space and exact ranking, as
``Trainer.against_encoder`` ranks them; the test split is not read): both encoders of a home rank the rows once, and
their per-row difference over all rows is the population's own (ramen − dual_encoder P@1 and R@10). Then each rule
decides on bootstrap resamples of the rows (``against_fallback``, the test `ramen` runs, with the rule's metric and
guard margin). A rule's serving rate times the population's difference is what it serves on average: a rule that
serves a P@1 loss shows a negative expected P@1; one too strict to pass a real gain serves it less often than a
looser one. Rules:

- ``significance``: R@10's interval above 0, no guard's interval below 0 (every stage's rule; `ramen`'s before ecb98d9);
- ``point estimate``: the same, and no guard below 0 in the point estimate (``guard_margin`` 0; `ramen`'s since);
- ``margin -1`` / ``margin +1``: a guard's gain at least −1 / +1 standard error;
- ``P@1 metric``: P@1 as the test's metric (interval above 0), guards as ``significance``.

`ramen`'s own trained encoder is read from its model folder (``encoder`` when it was served; else the epoch its
training selected, ``best_encoder`` or ``start_encoder``: the ``encoder`` folder then holds `dual_encoder`'s copy).

    .venv/bin/python experiments/text_only_guard/resample_rules.py --home HOME --dataset aol-1000 [--profile demo] \\
        [--resamples 200] [--out experiments/text_only_guard/results/NAME.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.evaluation.fallback import FallbackPolicy
from xc_core.provenance import code_stamp, write_result

POINTS = 100
#: rule name → (the test's metric, the guard margin in standard errors; None: the significance rule)
RULES: dict[str, tuple[str, float | None]] = {
    "significance": ("R@10", None),
    "point estimate": ("R@10", 0.0),
    "margin -1": ("R@10", -1.0),
    "margin +1": ("R@10", 1.0),
    "P@1 metric": ("P@1", None),
}


def ramen_encoder_dir(model: Path, summary: dict[str, Any]) -> Path:
    """The folder of the encoder `ramen`'s own training served, whatever its test against `dual_encoder` decided."""
    if summary.get("served_encoder") == "ramen":
        return model / "encoder"
    own = model / ("start_encoder" if int(summary.get("selected_epoch") or 0) == 0 else "best_encoder")
    if not own.exists():
        raise FileNotFoundError(f"{own}: ramen's own trained encoder is not kept in {model} (its `encoder` folder is "
                                "dual_encoder's copy); retrain ramen in this home")
    return own


def validation_rankings(home: Path, dataset: str, profile_name: str) -> dict[str, Any]:
    """Both encoders' top ranks of the validation rows ramen's test read, with the rows' truth and propensities."""
    from xc_core.datasets.container import XCDataset
    from xc_core.encoders.text import encoder_for
    from xc_core.evaluation.metrics import propensity
    from xc_core.methods import get_method
    from xc_core.methods.encoder import EncoderMethod
    from xc_core.methods.encoder.training import train_config
    from xc_core.paths import dataset_dir, model_dir, vectors_dir
    from xc_core.profiles import get_profile
    from xc_core.training.attributes import AttributeIndex
    from xc_core.training.ranker import ValidationRanker
    from xc_core.training.validation import validation_split

    data = XCDataset.load(dataset_dir(home, dataset))
    models = {name: model_dir(home, dataset, name, profile_name) for name in ("dual_encoder", "ramen")}
    summaries = {name: json.loads((m / "train_summary.json").read_text()) for name, m in models.items()}
    profile = get_profile(profile_name).model_copy(update={"seed": int(summaries["ramen"]["seed"])})
    ramen = get_method("ramen")
    assert isinstance(ramen, EncoderMethod)
    cfg = train_config(ramen, profile, dataset=data)  # as Trainer builds its validation rows
    split = validation_split(data, cfg).trained_before(cfg.train_before_day, data)
    view = split.fit_view(data)
    truth_source = split.y_val if split.kind == "temporal" else data.y_train
    ranker = ValidationRanker(view, split.val_rows, truth_source,
                              cfg, AttributeIndex.build(data.label_attributes, data.label_texts))
    depth = max(cfg.val_k, 5)
    folders = {"dual_encoder": models["dual_encoder"] / "encoder",
               "ramen": ramen_encoder_dir(models["ramen"], summaries["ramen"])}
    max_length = int(summaries["ramen"].get("max_length", 32))
    tops = {name: ranker.top(encoder_for(folder, max_length, vectors_dir(home)), depth)
            for name, folder in folders.items()}
    # a validation row whose query clicked before the validation days: the validation days' "repeated" queries
    repeated = np.asarray(sp.csr_matrix(split.y_fit)[split.val_rows].getnnz(axis=1) > 0)
    return {"truth": ranker.truth, "inv_propensity": propensity(view)[ranker.label_space], "tops": tops,
            "repeated": repeated,
            "folders": {k: str(v) for k, v in folders.items()}, "seed": int(summaries["ramen"]["seed"]),
            "recorded_test": summaries["ramen"].get("text_only_fallback_test"),
            "trained_at": {k: s.get("code_commit") or s.get("git_commit") for k, s in summaries.items()}}


def rule_decides(rule: str, rows: np.ndarray, found: dict[str, Any], seed: int) -> bool:
    """Whether ``rule`` serves ramen on ``rows`` (the test `ramen` runs, with the rule's metric and guard margin)."""
    from xc_core.evaluation.fallback import against_fallback

    metric, margin = RULES[rule]
    tops = found["tops"]
    decision = against_fallback("ramen against dual_encoder", tops["ramen"][rows], tops["dual_encoder"][rows],
                                found["truth"][rows], found["inv_propensity"], metric,
                                FallbackPolicy(guard_margin=margin, seed=seed))
    return decision.kept


def per_row_hits(found: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """encoder → metric → per-row value (P@1, R@10) on every validation row."""
    from xc_core.evaluation.fallback import per_row

    return {name: {m: per_row(m, found["truth"], top, None)[m] for m in ("P@1", "R@10")}
            for name, top in found["tops"].items()}


def resampled(found: dict[str, Any], resamples: int, seed: int) -> dict[str, Any]:
    """Each rule on ``resamples`` bootstrap resamples of the validation rows (n rows drawn with replacement: each a
    validation set the same population could have given): the share of resamples on which it serves ramen, and the
    expected served − dual_encoder effect, that share × the population's own difference (all rows). A rule is scored
    against the population, never against rows it decided on. Halves of one sample would not do: the two halves sum
    to the sample, so a rule that reads half A's P@1 picks halves whose other half is low by construction."""
    n = found["truth"].shape[0]
    hits = per_row_hits(found)
    population = {m: POINTS * float((hits["ramen"][m] - hits["dual_encoder"][m]).mean()) for m in ("P@1", "R@10")}
    rng = np.random.default_rng(seed)
    served: dict[str, list[float]] = {r: [] for r in RULES}
    for i in range(resamples):
        rows = rng.integers(0, n, n)
        for rule in RULES:
            served[rule].append(float(rule_decides(rule, rows, found, seed=i)))
    out = {}
    for rule, kept in served.items():
        share = float(np.mean(kept))
        low, high = binomial_interval(int(np.sum(kept)), resamples)
        out[rule] = {"serves_ramen": share, "serves_ramen_95": [low, high],
                     **{f"expected_{m}": share * population[m] for m in ("P@1", "R@10")}}
    return out


def by_row_kind(found: dict[str, Any], seed: int) -> dict[str, Any]:
    """ramen − dual_encoder (P@1, R@10; paired 95% bootstrap) on the validation rows whose query clicked before the
    validation days (``repeated``) and on the others (``new``): where on these rows the graph gains or costs."""
    from xc_core.evaluation.fallback import paired_metric

    tops = found["tops"]
    out: dict[str, dict[str, Any]] = {}
    for kind, rows in (("repeated", np.flatnonzero(found["repeated"])), ("new", np.flatnonzero(~found["repeated"]))):
        out[kind] = {"rows": int(len(rows))}
        for m in ("P@1", "R@10"):
            gain, low, high = paired_metric(m, found["truth"][rows], tops["ramen"][rows], tops["dual_encoder"][rows],
                                            None, FallbackPolicy(seed=seed))
            out[kind][m] = [POINTS * gain, POINTS * low, POINTS * high]
    return out


def binomial_interval(successes: int, trials: int) -> tuple[float, float]:
    """Wilson 95% interval of a share (how precisely ``resamples`` pin a rule's serving rate)."""
    from scipy.stats import binomtest

    found = binomtest(successes, trials).proportion_ci(confidence_level=0.95, method="wilson")
    return float(found.low), float(found.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="seed of the resamples and their bootstraps")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    found = validation_rankings(args.home, args.dataset, args.profile)
    every_row = np.arange(found["truth"].shape[0])
    hits = per_row_hits(found)
    result = {
        "question": "which guard rule keeps ramen's served encoder from falling below dual_encoder's out of sample",
        "dataset": args.dataset, "profile": args.profile, "training_seed": found["seed"],
        "validation_rows": int(found["truth"].shape[0]), "encoders": found["folders"],
        "trained_at": found["trained_at"], "resamples": args.resamples, "resample_seed": args.seed,
        "all_rows": {"ramen_minus_dual_encoder": {m: POINTS * float((hits["ramen"][m] - hits["dual_encoder"][m]).mean())
                                                  for m in ("P@1", "R@10")},
                     "serves_ramen": {rule: rule_decides(rule, every_row, found, args.seed) for rule in RULES}},
        "recorded_test": found["recorded_test"],
        "by_row_kind": by_row_kind(found, args.seed),
        "rules": resampled(found, args.resamples, args.seed),
        "code": code_stamp(),
        "test_split_read": False,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        write_result(args.out, text + "\n")


if __name__ == "__main__":
    main()
