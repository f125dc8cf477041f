"""Round 6's test read: a variant's ``dual_encoder`` (homes ``<root>/<dataset>-s<seed>-<tag>`` of
``experiments/training_budget/variant_grid.py``) against the seed homes' ``dual_encoder`` at the profile's settings,
``pretrained`` and PECOS (``experiments/seeds/seed_grid.py --peer``), each query's metric averaged over the seeds,
paired 95% bootstrap intervals (xc_core/evaluation/seed_homes.py). Reads evaluations already made; trains nothing.

    .venv/bin/python experiments/encoder_tower/test_pairs.py --root /tmp/grid --dataset wikispeedia \\
        --tag logq-lr3e-3 --out experiments/encoder_tower/results/round6/wikispeedia-test-logq-lr3e-3.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

METRICS = ("P@1", "P@5", "R@10", "PSP@1", "PSP@5")
PAIRS = (("variant", "pretrained"), ("variant", "profile"), ("variant", "pecos"), ("profile", "pretrained"),
         ("profile", "pecos"))


def commits(homes: list[Path], dataset: str, method: str, profile: str) -> list[str]:
    """The commit each home's evaluation of ``method`` records (the figure's provenance)."""
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import eval_dir

    records = [EvaluationRecord.load(eval_dir(home, dataset, method, profile)) for home in homes]
    return [r.summary.get("git_commit", "unknown") if r is not None else "missing" for r in records]


def main() -> None:
    from xc_core.evaluation.seed_homes import metric_ci, metric_value, paired_diff, seed_average
    from xc_core.provenance import write_result

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    base = [args.root / f"{args.dataset}-s{s}" for s in args.seeds]
    variant = [args.root / f"{args.dataset}-s{s}-{args.tag}" for s in args.seeds]
    sources = {"variant": (variant, "dual_encoder"), "profile": (base, "dual_encoder"),
               "pretrained": (base, "pretrained"), "pecos": (base, "pecos")}
    rows, stamps = {}, {}
    for name, (homes, method) in sources.items():
        rows[name] = seed_average(homes, args.dataset, method, args.profile)[0]
        stamps[name] = commits(homes, args.dataset, method, args.profile)
    result: dict = {"dataset": args.dataset, "tag": args.tag, "seeds": args.seeds, "commits": stamps,
                    "methods": {}, "pairs": {}}
    for name, per_query in rows.items():
        result["methods"][name] = {m: [round(100 * metric_value(per_query, m), 2),
                                       *(round(100 * x, 2) for x in metric_ci(per_query, m))] for m in METRICS}
    for a, b in PAIRS:
        result["pairs"][f"{a} − {b}"] = {m: [round(100 * x, 2) for x in paired_diff(rows[a], rows[b], m)[:3]]
                                         for m in METRICS}
    print(json.dumps(result, indent=1, ensure_ascii=False))
    if args.out:
        write_result(args.out, json.dumps(result, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
