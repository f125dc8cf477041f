"""Issue #32: brand- / location-safe training candidates, trained on the demo synthetic data set and measured.

    .venv/bin/python experiments/brand_match/brand_grid.py --base /work/brand_home/base --root /work/brand_home/grid \
        --runs dual_encoder+neg:0 ramen+filter:0 ... [--json experiments/brand_match/results/issue32_brand_grid.json]

``--base`` is a home where ``xc run --dataset synthetic --profile demo`` ran (its data set, anchor sets, world and
trained methods). Each run ``VARIANT:SEED`` trains one method with the variant's ``TrainConfig`` fields in its own
home under ``--root`` (the base home's ``datasets/ anchor_sets/ simulate/ graphs/ events/`` linked in, nothing
written into the base), or — for ``base:<method>`` — reads the base home's own trained method. Every served encoder
is then scored against the base home's ``pretrained`` encoder with exact search:

* **selection evidence** (never the test split): the validation history of the run (P@1, recall@10 and the brand /
  place mismatch of the held-out 5% of training queries, per epoch) and a paired A/B test on *training-period*
  traffic (the world's days before the test window; 10,000 query events, traffic seed 0) — what a team can measure
  before it ships;
* **reported numbers**, read once, for the one candidate chosen on that evidence (``--test SPEC``; issue #39): the
  test split (P@1 with a paired bootstrap interval against ``pretrained``, mismatch@k) and the gate's A/B test
  (10,000 paired test-period query events, traffic seed 0, as ``xc run``). Without ``--test`` nothing reads the
  test split.

Runs already in the JSON are skipped (resumable); the JSON is rewritten after each run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.abtest.arms import EncoderArm
from xc_core.abtest.stats import AB_METRICS
from xc_core.provenance import write_result

RESULTS_DIR = Path(__file__).resolve().parent / "results"

#: the issue #32 switches off: main's recipe (the profiles now turn them on)
OFF: dict[str, Any] = {"attribute_negatives": 0, "attribute_anchor_filter": False}
#: variant → (method, TrainConfig fields)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "dual_encoder": ("dual_encoder", {**OFF}),
    "dual_encoder+neg": ("dual_encoder", {**OFF, "attribute_negatives": 10}),
    "dual_encoder+neg3": ("dual_encoder", {**OFF, "attribute_negatives": 3}),
    "dual_encoder+neg30": ("dual_encoder", {**OFF, "attribute_negatives": 30}),
    "ramen": ("ramen", {**OFF}),
    "ramen+filter": ("ramen", {**OFF, "attribute_anchor_filter": True}),
    "ramen+neg": ("ramen", {**OFF, "attribute_negatives": 10}),
    "ramen+neg+filter": ("ramen", {"attribute_negatives": 10, "attribute_anchor_filter": True}),
    "dual_encoder+val": ("dual_encoder", {**OFF, "val_from_unused": True}),
    "dual_encoder+neg+val": ("dual_encoder", {**OFF, "attribute_negatives": 10, "val_from_unused": True}),
    "ramen+val": ("ramen", {**OFF, "val_from_unused": True}),
    "ramen+neg+filter+val": ("ramen", {"attribute_negatives": 10, "attribute_anchor_filter": True,
                                       "val_from_unused": True}),
    "ramen_no_doc_graph": ("ramen_no_doc_graph", {**OFF}),
    "ramen_no_label_graph": ("ramen_no_label_graph", {**OFF}),
    "ramen@cosession_queries": ("ramen@cosession_queries", {**OFF}),
    "ramen@click_graph": ("ramen@click_graph", {**OFF}),
    "ramen@coclick_items": ("ramen@coclick_items", {**OFF}),
    "dual_encoder_anchor_pairs": ("dual_encoder_anchor_pairs", {**OFF}),
}
LINKED = ("datasets", "anchor_sets", "simulate", "graphs", "events")
AB_QUERIES, AB_SEED = 10_000, 0


class PeriodSimulation:
    """A :class:`~xc_core.abtest.Simulation` whose traffic is drawn from given days of the world (the training
    period instead of the test window), with the A/B traffic model and its own random streams."""

    def __init__(self, world: Any, days: list[int]) -> None:
        from xc_core.abtest import Simulation

        self.inner, self.days = Simulation(world), days
        self.world, self.sampler, self.user_ids = world, self.inner.sampler, self.inner.user_ids

    def cache(self, arm: Any, k: int) -> Any:
        return self.inner.cache(arm, k)

    def serve(self, *args: Any) -> Any:
        return self.inner.serve(*args)

    def traffic(self, cfg: Any) -> Any:
        from xc_core.abtest.traffic import Traffic
        from xc_core.simulate.events import draw_query_events

        parts, drawn, round_ = [], 0, 0
        while drawn < cfg.queries:
            for day in self.days:
                rng = np.random.default_rng(np.random.SeedSequence([self.world.config.seed, 3, cfg.seed, round_, day,
                                                                    1]))
                user, market, query = draw_query_events(self.sampler, day, rng)
                parts.append((query, user, market, np.full(len(query), day, dtype=np.int64)))
                drawn += len(query)
                if drawn >= cfg.queries:
                    break
            round_ += 1
        query, user, market, days_of = (np.concatenate([p[i] for p in parts])[:cfg.queries].astype(np.int64)
                                        for i in range(4))
        decile = self.world.queries["decile"].to_numpy()[query].astype(np.int64)
        segment = self.world.queries["segment"].to_numpy()[query]
        return Traffic(query, user, market, days_of, decile, segment)


def _home(base: Path, root: Path, name: str) -> Path:
    home = root / name
    home.mkdir(parents=True, exist_ok=True)
    for part in LINKED:
        link = home / part
        if not link.exists():
            link.symlink_to(base / part)
    return home


def _ab(simulation: Any, control: Any, arm: Any) -> dict[str, Any]:
    from xc_core.abtest import ABConfig, run_abtest

    body = run_abtest(simulation, control, arm, ABConfig(queries=AB_QUERIES, seed=AB_SEED, paired=True))
    return {"arm": {m: body["arms"]["treatment"][m] for m in AB_METRICS},
            "control": {m: body["arms"]["control"][m] for m in AB_METRICS},
            "delta_pct": {m: body["delta_pct"][m] for m in AB_METRICS},
            "ci95": {m: body["ci95"][m] for m in AB_METRICS}}


def _offline(data: Any, top: np.ndarray, base_top: np.ndarray) -> dict[str, Any]:
    from xc_core.evaluation.analyses import paired_bootstrap_diff
    from xc_core.evaluation.metrics import precision_per_row
    from xc_core.evaluation.mismatch import mismatch_summary

    hits, base_hits = precision_per_row(data.y_test, top, 1), precision_per_row(data.y_test, base_top, 1)
    diff, low, high, p = paired_bootstrap_diff(hits, base_hits, n_boot=1000, seed=0)
    row: dict[str, Any] = {"P@1": 100 * float(hits.mean()), "P@5": 100 * float(precision_per_row(data.y_test, top, 5)
                                                                               .mean()),
                           "P@1_vs_pretrained": [100 * diff, 100 * low, 100 * high, p]}
    for attribute, entry in mismatch_summary(data.test_texts, top, data.label_attributes, ks=(5, 100),
                                             n_boot=200).items():
        row.update({f"{attribute}_mismatch@{k}": 100 * entry[f"rate@{k}"] for k in (5, 100)
                    if entry.get(f"rate@{k}") is not None})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--runs", nargs="+", required=True, help="VARIANT:SEED or base:METHOD")
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "issue32_brand_grid.json")
    parser.add_argument("--test", metavar="SPEC", help="the run chosen on the selection evidence: only its test-split "
                        "numbers are measured (once)")
    args = parser.parse_args()

    from xc_core.abtest import Simulation
    from xc_core.abtest.traffic import period_days
    from xc_core.paths import model_dir
    from xc_core.stages.abtest import ground_truth
    from xc_core.stages.anchor_sets import load_with_anchors
    from xc_core.stages.train import train_method

    results: dict[str, Any] = json.loads(args.json.read_text()) if args.json.exists() else {}
    runs = results.setdefault("runs", {})
    data = load_with_anchors(args.base, args.dataset)
    world = ground_truth(args.dataset, args.base)
    if world is None:
        raise SystemExit(f"{args.dataset}: no simulated world, nothing to measure against")
    test_days = period_days(world)
    simulations = {"test": Simulation(world), "train": PeriodSimulation(world, list(range(min(test_days))))}
    pretrained = EncoderArm("pretrained", model_dir(args.base, args.dataset, "pretrained", args.profile) / "encoder",
                            data.label_ids, data.label_texts)
    results.update({"base": str(args.base), "dataset": args.dataset, "profile": args.profile,
                    "ab": {"queries": AB_QUERIES, "seed": AB_SEED, "paired": True,
                           "train_period_days": [0, min(test_days) - 1], "test_period_days": [min(test_days),
                                                                                              max(test_days)]}})
    for spec in args.runs:
        if spec in runs:
            print(f"{spec}: done already", flush=True)
            continue
        started = time.perf_counter()
        overrides: dict[str, Any]
        if spec.startswith("base:"):
            method, overrides, seed = spec.split(":", 1)[1], {}, 0
            summary = json.loads((model_dir(args.base, args.dataset, method, args.profile)
                                  / "train_summary.json").read_text())
        else:
            variant, seed_text = spec.rsplit(":", 1)
            method, overrides = VARIANTS[variant]
            seed = int(seed_text)
            home = _home(args.base, args.root, f"{variant.replace('@', '_at_')}-s{seed}")
            summary = train_method(load_with_anchors(home, args.dataset), method, args.profile, home,
                                   overrides={**overrides, "seed": seed})
        arm = EncoderArm(spec, Path(summary["encoder_dir"]), data.label_ids, data.label_texts)
        runs[spec] = {
            "method": method, "overrides": overrides, "seed": seed, "selected_epoch": summary.get("selected_epoch"),
            "encoder_dir": summary["encoder_dir"],
            "epoch_fallback": (summary.get("epoch_fallback_test") or {}).get("reason"),
            "validation": summary.get("history"),
            "ab_train_period": _ab(simulations["train"], pretrained, arm),
            "seconds": round(time.perf_counter() - started, 1)}
        candidate = Path(summary["encoder_dir"]).parent / "best_encoder"
        if summary.get("selected_epoch") == 0 and (candidate / "model.safetensors").exists():
            # fell back to the start: the trained candidate's selection evidence too (what the training itself did)
            arm = EncoderArm(f"{spec} candidate", candidate, data.label_ids, data.label_texts)
            runs[spec]["candidate"] = {"ab_train_period": _ab(simulations["train"], pretrained, arm)}
        write_result(args.json, json.dumps(results, indent=1, default=float))
        row = runs[spec].get("candidate", runs[spec])
        print(f"{spec}: epoch {runs[spec]['selected_epoch']}, train-period A/B {row['ab_train_period']['delta_pct']} "
              f"({runs[spec]['seconds']:.0f} s)", flush=True)
    if args.test:  # the test split, once, for the chosen run only
        chosen = runs[args.test]
        arm = EncoderArm(args.test, Path(chosen["encoder_dir"]), data.label_ids, data.label_texts)
        _, base_top = pretrained.search(list(data.test_texts), 100)
        _, top = arm.search(list(data.test_texts), 100)
        results["test"] = {"chosen": args.test, "offline_test": _offline(data, top, base_top),
                           "ab_test_period": _ab(simulations["test"], pretrained, arm)}
        print(f"{args.test} (chosen): P@1 {results['test']['offline_test']['P@1']:.2f}, test-period A/B "
              f"{results['test']['ab_test_period']['delta_pct']}", flush=True)
    write_result(args.json, json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    main()
