"""Where each method earns its P@k and PSP@k: shares per label-frequency decile (0 = tail), from evaluations.

    .venv/bin/python experiments/label_deciles/decile_table.py --home /tmp/xc-s0 --dataset aol-1000 --profile demo \
        --methods pecos,pretrained,pretrained-clf [--k 5] [--json out.json]

Reads each method's saved test top-100 (``eval/<data set>/<method>-<profile>/top100.npy``, the filter
already applied) — the linear peer included — and prints one markdown table per metric: a row per decile,
a column per method; each column sums to the method's P@k (PSP@k). Shows where the peer still wins.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from xc_core.provenance import write_result


def build(home: Path, dataset: str, profile: str, methods: list[str], k: int) -> dict:
    from xc_core.classifier.tradeoff import decile_table
    from xc_core.evaluation.metrics import propensity
    from xc_core.paths import eval_dir
    from xc_core.stages.anchor_sets import load_with_anchors

    data = load_with_anchors(home, dataset)
    tops = {m: np.load(eval_dir(home, dataset, m, profile) / "top100.npy") for m in methods}
    table = decile_table(data.y_test, data.y_train, tops, propensity(data), k=k)
    return {metric: {m: [float(v) for v in table.filter(table["variant"] == m)[metric]] for m in methods}
            for metric in (f"P@{k}", f"PSP@{k}")}


def markdown(result: dict) -> str:
    out = []
    for metric, columns in result.items():
        methods = list(columns)
        out += [f"**{metric} share by label-frequency decile (0 = tail)**", "",
                "| decile | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
        for d in range(len(next(iter(columns.values())))):
            out.append(f"| {d} | " + " | ".join(f"{100 * columns[m][d]:.2f}" for m in methods) + " |")
        out.append("| sum | " + " | ".join(f"{100 * sum(columns[m]):.2f}" for m in methods) + " |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--methods", required=True)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = build(args.home, args.dataset, args.profile, args.methods.split(","), args.k)
    print(markdown(result))
    if args.json:
        write_result(args.json, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
