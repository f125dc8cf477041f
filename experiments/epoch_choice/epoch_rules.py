"""Two epoch-selection rules on the same training runs (``grid.py --save-tops`` records): the trainer's rule (the best
validation-recall epoch is the candidate; :class:`~xc_core.training.selection.EpochChoice`) against the same rule
picking only among epochs that lose no guard to epoch 0 on its picking rows (``within_guards``). Reads no test row.

Each rule is judged as it would serve, out of sample: the validation rows are cut into 5 outer folds; for each, the
whole rule — candidate, cross-fitted fallback test against epoch 0, served epoch — runs on the other folds' rows
alone, and the fold's rows are ranked by the epoch it serves. The two rules' rankings are then paired on the same
rows, pooled over a data set's runs (rows concatenated), with 95% paired bootstrap intervals.

    .venv/bin/python experiments/epoch_choice/epoch_rules.py RUN.npz [RUN.npz ...] [--out results/compare.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xc_core.evaluation.analyses import paired_metric_diff
from xc_core.evaluation.fallback import FallbackPolicy, per_row
from xc_core.evaluation.seed_homes import metric_value
from xc_core.provenance import code_stamp, write_result
from xc_core.training.selection import EpochChoice

OUTER_FOLDS = 5
METRICS = ("P@1", "R@10", "PSP@1")


def load(path: Path) -> dict:
    found = np.load(path)
    truth = sp.csr_matrix((found["truth_data"], found["truth_indices"], found["truth_indptr"]),
                          shape=tuple(found["truth_shape"]))
    return {"name": path.stem, "epochs": found["epochs"].tolist(), "tops": found["tops"], "truth": truth,
            "inv_propensity": found["inv_propensity"], "k": int(found["k"]), "seed": int(found["seed"]),
            "policy": FallbackPolicy(**json.loads(str(found["policy"]))), "commit": str(found["commit"])}


#: the rules compared: EpochChoice's settings (the first is the trainer's; every other is paired against it)
RULES: dict[str, dict] = {"recall": {}, "within_guards": {"within_guards": True},
                          "precision": {"selection_metric": "P@1"}}


def serve(run: dict, rows: np.ndarray, rule: str) -> tuple[int, str]:
    """The epoch the rule serves when it sees only ``rows`` of the run's validation rows, and its reason."""
    choice = EpochChoice(run["truth"][rows], run["inv_propensity"], run["k"], run["policy"], run["seed"],
                         **RULES[rule])
    for epoch, top in zip(run["epochs"], run["tops"], strict=True):
        choice.add(epoch, top[rows])
    decision = choice.decide()
    return (int(decision.candidate["epoch"]) if decision.kept else 0), decision.reason


def out_of_fold(run: dict, rule: str) -> tuple[np.ndarray, list[int]]:
    """Every row ranked by the epoch the rule serves from the other outer folds' rows; the folds' served epochs."""
    n = run["truth"].shape[0]
    order = np.random.default_rng([run["seed"], 62]).permutation(n)
    ranking, served = np.array(run["tops"][0], copy=True), []
    position = {epoch: i for i, epoch in enumerate(run["epochs"])}
    for fold in (np.sort(order[i::OUTER_FOLDS]) for i in range(OUTER_FOLDS)):
        epoch, _ = serve(run, np.setdiff1d(np.arange(n), fold), rule)
        ranking[fold] = run["tops"][position[epoch]][fold]
        served.append(epoch)
    return ranking, served


def terms(run: dict, ranking: np.ndarray) -> dict[str, np.ndarray]:
    found: dict[str, np.ndarray] = {}
    for metric in METRICS:
        found.update(per_row(metric, run["truth"], ranking, run["inv_propensity"]))
    return found


def pooled(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "compare.json")
    args = parser.parse_args()
    by_dataset: dict[str, dict[str, list]] = {}
    record: dict = {"code": code_stamp(), "outer_folds": OUTER_FOLDS, "runs": [], "datasets": {}}
    for path in args.runs:
        run = load(path)
        dataset = run["name"].split("-dual_encoder")[0].split("-ramen")[0]
        entry = {"run": run["name"], "trained_at": run["commit"], "rows": int(run["truth"].shape[0])}
        for rule in RULES:
            epoch, reason = serve(run, np.arange(run["truth"].shape[0]), rule)
            ranking, folds = out_of_fold(run, rule)
            entry[rule] = {"served_on_all_rows": epoch, "reason": reason, "served_per_outer_fold": folds}
            by_dataset.setdefault(dataset, {}).setdefault(rule, []).append(terms(run, ranking))
        by_dataset[dataset].setdefault("epoch0", []).append(terms(run, run["tops"][0]))
        record["runs"].append(entry)
        print(f"{run['name']}: served on all rows / per outer fold: " + "; ".join(
            f"{rule} {entry[rule]['served_on_all_rows']} / {entry[rule]['served_per_outer_fold']}" for rule in RULES))
    base, *others = RULES
    print(f"\n| data set | rows | metric | epoch 0 | {' | '.join(RULES)} | "
          + " | ".join(f"{rule} − {base} [95%]" for rule in others) + " |")
    print("|---" * (4 + len(RULES) + len(others)) + "|")
    for dataset, found_rules in by_dataset.items():
        rows = {rule: pooled(found_rules[rule]) for rule in [*RULES, "epoch0"]}
        summary: dict[str, dict] = {}
        for metric in METRICS:
            summary[metric] = {rule: metric_value(rows[rule], metric) for rule in rows}
            cells = []
            for rule in others:
                found = paired_metric_diff(rows[rule], rows[base], metric)
                assert found is not None  # both rules' terms hold every metric
                diff, low, high, _ = found
                summary[metric][f"{rule} - {base}"] = [diff, low, high]
                cells.append(f"{100 * diff:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}]")
            print(f"| {dataset} | {len(rows[base]['P@1'])} | {metric} | "
                  + " | ".join(f"{100 * metric_value(rows[r], metric):.2f}" for r in ["epoch0", *RULES]) + " | "
                  + " | ".join(cells) + " |")
        record["datasets"][dataset] = {"rows": int(len(rows[base]["P@1"])), "metrics": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out, json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
