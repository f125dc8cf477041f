"""Paired test-split differences between methods evaluated in one home (the same test queries), with their 95%
paired bootstrap intervals: the tables of docs/results/issue-62.md.

    .venv/bin/python experiments/encoder_tower/pairs.py --home HOME --dataset synthetic \\
        --pair dual_encoder:pretrained --pair dual_encoder-clf:pretrained-clf
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--pair", action="append", required=True, help="A:B, paired as A − B")
    parser.add_argument("--metrics", default="P@1,PSP@1,P@5")
    args = parser.parse_args()

    import numpy as np

    from xc_core.evaluation.analyses import paired_metric_diff
    from xc_core.paths import eval_dir

    def rows(method: str) -> dict[str, np.ndarray]:
        with np.load(eval_dir(args.home, args.dataset, method, args.profile) / "per_row.npz") as data:
            return {k: data[k] for k in data.files}

    for pair in args.pair:
        a, b = pair.split(":")
        ra, rb = rows(a), rows(b)
        cells = []
        for metric in args.metrics.split(","):
            found = paired_metric_diff(ra, rb, metric)
            if found is not None:
                diff, low, high, _ = found
                cells.append(f"{metric} {100 * diff:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}]")
        print(f"{a} − {b}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
