"""The graph-worth check's prediction against the measured ramen − dual_encoder, per seed (issue #43, item 4).

    .venv/bin/python experiments/graph_worth/graph_worth_table.py --dataset synthetic --profile demo \
        --homes /work/exp43 /work/exp43/seeds/s1 /work/exp43/seeds/s2 [--assess] [--beside pretrained,pecos] \
        [--json out.json]

The check comes from the first home's anchor stage (``graph_worth.json``), or — ``--assess``, for anchor sets built
before the check existed — is computed here from them with ``xc anchors``' own function. For every home (one
training seed each, the same test split) the paired P@1 differences of ``xc_core.evaluation.graph_gain`` (all
queries, the tail half, each query-frequency decile) and which encoder ``ramen`` served; with several homes, the same
on per-query metrics averaged over the seeds. Prints markdown (a row per pair and decile); ``--json`` writes the
figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.provenance import write_result


def check(home: Path, dataset: str, profile: str, assess: bool) -> dict[str, Any]:
    """The recorded check of ``home``'s anchor sets, or (``assess``) the check computed now from them."""
    from xc_core.paths import anchors_dir

    path = anchors_dir(home, dataset) / "graph_worth.json"
    if path.exists() and not assess:
        return json.loads(path.read_text())
    from xc_core.datasets.container import XCDataset
    from xc_core.profiles import get_profile
    from xc_core.stages.anchor_sets import assess_graph

    return assess_graph(XCDataset.load(anchors_dir(home, dataset)), home, get_profile(profile))


def measured(home: Path, dataset: str, profile: str) -> dict[str, Any]:
    """One seed's paired rows, what ramen served and the commit each method was trained at."""
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.graph_gain import PAIRS, gain_rows
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import anchors_dir, eval_dir, model_dir

    data = XCDataset.load(anchors_dir(home, dataset))
    per_row = {}
    served, trained_at = {}, {}
    for method in {m for pair in PAIRS for m in pair}:
        record = EvaluationRecord.load(eval_dir(home, dataset, method, profile))
        rows = record.per_row() if record is not None else None
        if rows is not None:
            per_row[method] = rows
        summary = model_dir(home, dataset, method, profile) / "train_summary.json"
        if summary.exists():
            run = json.loads(summary.read_text())
            served[method], trained_at[method] = run.get("served_encoder"), run.get("git_commit")
    return {"home": str(home), "rows": gain_rows(data, per_row), "served": served, "trained_at": trained_at}


def seed_averaged(homes: list[Path], dataset: str, profile: str) -> list[dict[str, Any]]:
    """The paired rows on per-query metrics averaged over the homes' seeds
    (``xc_core.evaluation.seed_homes.seed_average``): the seed noise averaged out, the interval over test queries."""
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.graph_gain import PAIRS, gain_rows
    from xc_core.evaluation.seed_homes import seed_average
    from xc_core.paths import anchors_dir

    per_row = {}
    for method in {m for pair in PAIRS for m in pair}:
        rows, found = seed_average(homes, dataset, method, profile)
        if found == len(homes):
            per_row[method] = rows
    return gain_rows(XCDataset.load(anchors_dir(homes[0], dataset)), per_row)


def beside(homes: list[Path], dataset: str, profile: str, others: list[str]) -> list[dict[str, Any]]:
    """``ramen`` and ``dual_encoder`` (per-query metrics averaged over the homes' seeds) against each of ``others``
    evaluated in the first home (the untrained encoder, the PECOS peer: one seed suffices, neither trains on a seed):
    each one's test P@1 and the paired differences, all queries and the tail half."""
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.analyses import paired_metric_diff
    from xc_core.evaluation.graph_gain import METRIC, query_deciles
    from xc_core.evaluation.seed_homes import metric_value, seed_average
    from xc_core.paths import anchors_dir

    tail = query_deciles(XCDataset.load(anchors_dir(homes[0], dataset)))[0] >= 5
    ours = {m: seed_average(homes, dataset, m, profile)[0] for m in ("ramen", "dual_encoder")}
    out = []
    for other in others:
        rows, found = seed_average(homes[:1], dataset, other, profile)
        if not found:
            raise SystemExit(f"{homes[0]}: no per-query evaluation of {other} ({profile}): evaluate it there first")
        for method, mine in ours.items():
            for subset, mask in (("all", np.ones(len(tail), bool)), ("tail half (deciles 5–9)", tail)):
                found_diff = paired_metric_diff({k: v[mask] for k, v in mine.items()},
                                                {k: v[mask] for k, v in rows.items()}, METRIC)
                if found_diff is not None:
                    out.append({"method": method, "vs": other, "subset": subset, "rows": int(mask.sum()),
                                f"{other} {METRIC}": metric_value(rows, METRIC), METRIC: list(found_diff[:3])})
    return out


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "–"
    d, lo, hi = (100 * v for v in row["P@1"])
    return f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def decile_markdown(seeds: list[dict[str, Any]], averaged: list[dict[str, Any]]) -> str:
    """One markdown row per (pair, subset): its rows, each seed's paired P@1 difference and the seed-averaged one."""
    keyed = [{(r["method"], r["subset"]): r for r in seed["rows"]} for seed in seeds]
    mean = {(r["method"], r["subset"]): r for r in averaged}
    order = list(dict.fromkeys(key for rows in keyed for key in rows))
    head = ["pair", "subset", "rows", *(f"seed home {i}" for i in range(len(seeds))),
            *(["averaged over the seeds"] if averaged else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method, subset in order:
        first = next(rows[(method, subset)] for rows in keyed if (method, subset) in rows)
        cells = [f"{method} − {first['vs']}", subset, str(first["rows"]),
                 *(_cell(rows.get((method, subset))) for rows in keyed),
                 *([_cell(mean.get((method, subset)))] if averaged else [])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from xc_core.graphs.worth import worth_table

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--homes", nargs="+", type=Path, required=True, help="one home per seed, first = seed 0")
    parser.add_argument("--assess", action="store_true", help="compute the check now from the first home's sets")
    parser.add_argument("--check-from", type=Path, help="reuse the check of an earlier --json file (its 'check')")
    parser.add_argument("--beside", default="", help="comma-separated methods evaluated in the first home (e.g. "
                        "pretrained,pecos) that the seed-averaged ramen and dual_encoder are paired against")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    record = (json.loads(args.check_from.read_text())["check"] if args.check_from
              else check(args.homes[0], args.dataset, args.profile, args.assess))
    seeds = [measured(h, args.dataset, args.profile) for h in args.homes]
    averaged = seed_averaged(args.homes, args.dataset, args.profile) if len(args.homes) > 1 else []
    print(f"## {args.dataset}: the graph-worth check\n")
    table = worth_table(record)
    if table:
        print("| " + " | ".join(table[0]) + " |\n|" + "---|" * len(table[0]))
        for row in table:
            print("| " + " | ".join(str(v) for v in row.values()) + " |")
    print("\n## measured (P@1 points, 95% paired interval)\n")
    print(decile_markdown(seeds, averaged) + "\n")
    for i, seed in enumerate(seeds):
        print(f"seed home {i}: served {seed['served']}, trained at {seed['trained_at']}")
    against = beside(args.homes, args.dataset, args.profile, [m for m in args.beside.split(",") if m])
    for row in against:
        print(f"{row['method']} (seed-averaged) − {row['vs']} ({100 * row[row['vs'] + ' P@1']:.2f}), {row['subset']}: "
              f"{_cell(row)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_result(args.json, json.dumps({"dataset": args.dataset, "profile": args.profile, "check": record,
                                         "seeds": seeds, "seed_averaged": averaged,
                                         "beside": against}, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
