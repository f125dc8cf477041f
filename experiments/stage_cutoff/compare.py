"""Paired differences between two homes built from the same data set, profile and seed by two versions of the code
(the same validation rows and test queries, so each method is paired with itself), and within each home between
methods: the tables of experiments/stage_cutoff/README.md.

    .venv/bin/python experiments/stage_cutoff/compare.py --base HOME_A --new HOME_B --dataset synthetic \\
        --methods pretrained,dual_encoder,pretrained-clf,dual_encoder-clf \\
        --pair dual_encoder:pretrained --pair dual_encoder-clf:pretrained-clf --out results/synthetic-seed0.json

With several ``--base`` / ``--new`` homes (one pair per seed, in the same order) the seeds are pooled: the test
split's per-query values are averaged over the seeds (the same queries in every home), the validation rows, which
each seed draws anew, are concatenated; the intervals are then over queries (test) or seed-rows (validation).

Validation (the promotion split, the last days of the training window) is what a choice is made on; the test
split is printed once, beside it, and read by no rule.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

SPLITS = ("validation", "test")


def _rows(homes: list[Path], dataset: str, method: str, profile: str, split: str) -> dict[str, Any] | None:
    """One method's per-row values in ``homes`` (see the module docstring for how seeds pool); None unless every home
    evaluated it on ``split``."""
    import numpy as np

    from xc_core.paths import eval_dir

    found = []
    for home in homes:
        path = eval_dir(home, dataset, method, profile, split) / "per_row.npz"
        if not path.exists():
            return None
        with np.load(path) as data:
            found.append({k: data[k].astype(np.float64) for k in data.files})
    if split == "test":
        return {k: np.mean([f[k] for f in found], axis=0) for k in found[0]}
    return {k: np.concatenate([f[k] for f in found]) for k in found[0]}


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


def _training_commits(homes: dict[str, list[Path]], dataset: str, methods: list[str],
                      profile: str) -> dict[str, list[str]]:
    """The commits that trained each home's models (every published figure names the commit that trained it)."""
    from xc_core.paths import model_dir
    from xc_core.training.record import SUMMARY

    out: dict[str, list[str]] = {}
    for name, found in homes.items():
        commits = set()
        for home in found:
            for method in methods:
                path = model_dir(home, dataset, method, profile) / SUMMARY
                if path.exists():
                    commits.add(str(json.loads(path.read_text()).get("git_commit", "unknown"))[:7])
        out[name] = sorted(commits)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, nargs="+", required=True, help="the home(s) trained by the former code")
    parser.add_argument("--new", type=Path, nargs="+", required=True, help="the home(s) trained by the code under "
                        "test: one per --base home, the same seed")
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--methods", required=True, help="comma-separated: each paired new − base")
    parser.add_argument("--pair", action="append", default=[], help="A:B, paired A − B within each home")
    parser.add_argument("--metrics", default="P@1,PSP@1,P@5,tail_P@5")
    parser.add_argument("--out", type=Path, help="write the table as JSON here too")
    args = parser.parse_args()

    from xc_core.provenance import checkout_stamp

    metrics = args.metrics.split(",")
    if len(args.base) != len(args.new):
        parser.error("give one --new home per --base home (the same seed, in the same order)")
    homes = {"base": args.base, "new": args.new}
    table: dict[str, Any] = {"dataset": args.dataset, "profile": args.profile,
                             "homes": {k: [str(h) for h in v] for k, v in homes.items()},
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
    table["trained_at"] = _training_commits(homes, args.dataset, args.methods.split(","), args.profile)
    text = json.dumps(table, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
