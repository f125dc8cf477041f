"""Paired P@1 differences on the validation rows, split into repeated queries (asked before the validation days, so
trained on by the encoder's window and known to the click memory) and new ones, pooled over seed homes: where does
the trained encoder's gain go, and where does the fused model lose it?

    .venv/bin/python experiments/stage_cutoff/repeated.py --homes HOME_S0 HOME_S1 HOME_S2 --dataset synthetic \\
        --pair dual_encoder:pretrained --pair dual_encoder-clf:pretrained-clf --out results/NAME.json

Reads the validation split only (the rows each model's record rebuilds); the test is not read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _repeated(home: Path, dataset: str, method: str, profile: str) -> Any:
    """Per validation row (in the order evaluation scores them): was its query asked before the validation days?"""
    import numpy as np

    from xc_core.datasets.container import XCDataset
    from xc_core.paths import dataset_dir
    from xc_core.training.record import TrainedModel
    from xc_core.training.validation import recorded_split_config, validation_split

    data = XCDataset.load(dataset_dir(home, dataset))
    trained = TrainedModel.of(home, dataset, method, profile)
    found = validation_split(data, recorded_split_config(trained.summary, method))
    return np.isin(found.val_rows, found.train_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--homes", type=Path, nargs="+", required=True, help="one home per seed")
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--pair", action="append", required=True, help="A:B, paired A − B")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import numpy as np

    from xc_core.evaluation.analyses import paired_bootstrap_diff
    from xc_core.paths import eval_dir
    from xc_core.provenance import checkout_stamp

    def p_at_1(home: Path, method: str) -> Any:
        with np.load(eval_dir(home, args.dataset, method, args.profile, "validation") / "per_row.npz") as data:
            return data["P@1"].astype(np.float64)

    table: dict[str, Any] = {"dataset": args.dataset, "profile": args.profile, "homes": [str(h) for h in args.homes],
                             "code": checkout_stamp(), "pairs": {}}
    for pair in args.pair:
        a, b = pair.split(":")
        diffs, repeated = [], []
        for home in args.homes:
            mask = _repeated(home, args.dataset, a, args.profile)
            first, second = p_at_1(home, a), p_at_1(home, b)
            if not len(mask) == len(first) == len(second):
                raise SystemExit(f"{home}: {len(mask)} validation rows rebuilt, {len(first)} and {len(second)} scored: "
                                 "the models were not scored on the rows their records rebuild")
            diffs.append(first - second)
            repeated.append(mask)
        diff, mask = np.concatenate(diffs), np.concatenate(repeated)
        cells = {}
        for name, rows in (("all", np.ones_like(mask)), ("repeated", mask), ("new", ~mask)):
            d = diff[rows]
            mean, low, high, _ = paired_bootstrap_diff(d, np.zeros_like(d), 1000, 0, 0.05)
            cells[name] = {"rows": int(rows.sum()), "diff": round(100 * mean, 2), "low": round(100 * low, 2),
                           "high": round(100 * high, 2)}
        table["pairs"][pair] = cells
        print(pair, json.dumps(cells))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
