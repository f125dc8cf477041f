"""How much could the novel-only oracle move P@1 at most? An upper bound from the baseline's own rankings.

    .venv/bin/python experiments/graph_oracle/oracle_bound.py --home BASE_S0 --home BASE_S1 --home BASE_S2 \
        --dataset synthetic --profile demo --json experiments/graph_oracle/results/oracle_bound-synthetic.json

**A diagnostic that reads the test split on purpose** (as the oracle does). On the oracle-covered test queries (the
query text is a training query's), a model handed the novel-only oracle can gain a P@1 point only on a query whose
baseline top-1 is wrong *and* that clicks, in the test period, a label it has no training pair with: the oracle
carries nothing else. The share of such queries bounds any novel-only oracle's gain, whichever way it is passed on
(regularizer or training pairs). The script also splits the baseline's misses by what its top-1 is: one of the
query's own training labels (a novel label must then beat a label the task loss holds as a positive) or another label.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.record import EvaluationRecord
from xc_core.graphs.oracle import covered_answers, covered_queries
from xc_core.paths import anchors_dir, eval_dir
from xc_core.provenance import checkout_stamp, write_result


def bound(data: XCDataset, top1: np.ndarray) -> dict[str, Any]:
    """Shares of the oracle-covered test queries (each a fraction of them): the baseline's top-1 right; wrong and
    the query clicks a novel label (the bound); wrong with no novel label; wrong with its top-1 one of the query's
    training labels; every answer novel (and that with the top-1 right); then the baseline's P@1 on the two halves
    of the covered queries (every answer novel, a trained answer among them)."""
    covered = covered_queries(data)
    counts = {"top1_right": 0, "wrong_with_novel_label": 0, "wrong_without_novel_label": 0,
              "wrong_top1_a_training_label": 0, "all_test_labels_novel": 0, "all_novel_and_top1_right": 0}
    for t, truth, trained in covered_answers(data):
        novel = truth - trained
        all_novel = bool(truth) and novel == truth
        counts["all_test_labels_novel"] += all_novel
        if int(top1[t]) in truth:
            counts["top1_right"] += 1
            counts["all_novel_and_top1_right"] += all_novel
            continue
        counts["wrong_with_novel_label" if novel else "wrong_without_novel_label"] += 1
        counts["wrong_top1_a_training_label"] += int(top1[t]) in trained
    shares = {k: v / covered.sum() for k, v in counts.items()}
    novel_rows = counts["all_test_labels_novel"]
    # the baseline's P@1 on the two covered halves (every answer novel; a trained answer among them)
    p1 = {"P@1_every_answer_novel": counts["all_novel_and_top1_right"] / max(novel_rows, 1),
          "P@1_a_trained_answer": (counts["top1_right"] - counts["all_novel_and_top1_right"])
          / max(int(covered.sum()) - novel_rows, 1)}
    return {"covered_queries": int(covered.sum()), **shares, **p1}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, action="append", required=True,
                        help="a home with an evaluated dual_encoder (one per seed)")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--method", default="dual_encoder")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"dataset": args.dataset, "profile": args.profile, "method": args.method,
                           **checkout_stamp(), "homes": {}}
    for home in args.home:
        record = EvaluationRecord.load(eval_dir(home, args.dataset, args.method, args.profile))
        if record is None:
            raise SystemExit(f"{home}: no evaluation of {args.method} ({args.profile}): run `xc eval` there first")
        data = XCDataset.load(anchors_dir(home, args.dataset))
        found = bound(data, record.top()[:, 0])
        out["homes"][str(home)] = {**found, "trained_at": record.summary.get("git_commit")}
        print(f"{home}: " + ", ".join(f"{k} {100 * v:.2f}" if v <= 1 else f"{k} {v}" for k, v in found.items()))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    write_result(args.json, json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
