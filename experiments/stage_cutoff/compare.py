"""Paired differences between two homes built from the same data set, profile and seed by two versions of the code
(the same validation rows and test queries, so each method is paired with itself), and within each home between
methods: the tables of experiments/stage_cutoff/README.md.

    .venv/bin/python experiments/stage_cutoff/compare.py --base HOME_A --new HOME_B --dataset synthetic \\
        --methods pretrained,dual_encoder,pretrained-clf,dual_encoder-clf \\
        --pair dual_encoder:pretrained --pair dual_encoder-clf:pretrained-clf --out results/synthetic-seed0.json

Validation (the promotion split, the last days of the training window) is what a choice is made on; the test
split is printed once, beside it, and read by no rule.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

SPLITS = ("validation", "test")


def _rows(home: Path, dataset: str, method: str, profile: str, split: str) -> dict[str, Any] | None:
    import numpy as np

    from xc_core.paths import eval_dir

    path = eval_dir(home, dataset, method, profile, split) / "per_row.npz"
    if not path.exists():
        return None
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _cell(a: dict[str, Any], b: dict[str, Any], metric: str) -> dict[str, float] | None:
    from xc_core.evaluation.analyses import paired_metric_diff

    found = paired_metric_diff(a, b, metric)
    if found is None:
        return None
    diff, low, high, _ = found
    return {"diff": round(100 * diff, 2), "low": round(100 * low, 2), "high": round(100 * high, 2)}


def _mean(rows: dict[str, Any], metric: str) -> float | None:
    if metric in rows:
        return round(100 * float(rows[metric].mean()), 2)
    num, den = rows.get(f"{metric}__numerator"), rows.get(f"{metric}__denominator")
    return None if num is None or den is None else round(100 * float(num.sum() / den.sum()), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the home trained by the former code")
    parser.add_argument("--new", type=Path, required=True, help="the home trained by the code under test")
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--methods", required=True, help="comma-separated: each paired new − base")
    parser.add_argument("--pair", action="append", default=[], help="A:B, paired A − B within each home")
    parser.add_argument("--metrics", default="P@1,PSP@1,P@5,tail_P@5")
    parser.add_argument("--out", type=Path, help="write the table as JSON here too")
    args = parser.parse_args()

    from xc_core.provenance import checkout_stamp

    metrics = args.metrics.split(",")
    homes = {"base": args.base, "new": args.new}
    table: dict[str, Any] = {"dataset": args.dataset, "profile": args.profile, "homes": {k: str(v) for k, v in
                                                                                          homes.items()},
                             "means": {}, "new_minus_base": {}, "pairs": {}, "code": checkout_stamp()}
    for split in SPLITS:
        rows = {(h, m): _rows(home, args.dataset, m, args.profile, split) for h, home in homes.items()
                for m in args.methods.split(",")}
        for (home_name, method), found in rows.items():
            if found is not None:
                table["means"].setdefault(split, {}).setdefault(home_name, {})[method] = {
                    "rows": len(next(iter(found.values()))), **{m: _mean(found, m) for m in metrics}}
        for method in args.methods.split(","):
            a, b = rows[("new", method)], rows[("base", method)]
            if a is not None and b is not None:
                table["new_minus_base"].setdefault(split, {})[method] = {m: _cell(a, b, m) for m in metrics}
        for pair in args.pair:
            first, second = pair.split(":")
            for home_name in homes:
                a, b = rows.get((home_name, first)), rows.get((home_name, second))
                if a is not None and b is not None:
                    table["pairs"].setdefault(split, {}).setdefault(home_name, {})[pair] = {
                        m: _cell(a, b, m) for m in metrics}
    text = json.dumps(table, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
