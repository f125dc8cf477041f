"""The graph-worth check's prediction against the measured ramen − dual_encoder, per seed (issue #43, item 4).

    .venv/bin/python experiments/graph_worth/graph_worth_table.py --dataset synthetic --profile demo \
        --homes /work/exp43 /work/exp43/seeds/s1 /work/exp43/seeds/s2 [--assess] [--beside pretrained,pecos] \
        [--json out.json] [--save-hits experiments/graph_worth/results/hits] [--hits SAVED.json ...]

The check comes from the first home's anchor stage (``graph_worth.json``), or — ``--assess``, for anchor sets built
before the check existed — is computed here from them with ``xc anchors``' own function. For every home (one
training seed each, the same test split) the paired P@1 differences of ``xc_core.evaluation.graph_gain`` (all
queries, the tail half, each query-frequency decile) and which encoder ``ramen`` served; with several homes, the same
on per-query metrics averaged over the seeds. Prints markdown (a row per pair and decile); ``--json`` writes the
figures. ``--save-hits`` keeps each home's seed as a small file (per-query P@1 bits, deciles, test-split
fingerprint, commits) and ``--hits`` reads such files as seeds, so a table can gather seeds trained in sessions whose
homes are gone (aol-1000: one seed of ``dual_encoder`` and ``ramen`` is about two hours of CPU here).
"""

from __future__ import annotations

import argparse
import base64
import json
import zlib
from dataclasses import dataclass
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


@dataclass(frozen=True)
class SeedRows:
    """One seed home's per-query P@1 of the methods the table reads, with its test queries' deciles and the test
    split's fingerprint. Read from a home, or from the compact file a home leaves behind (``--save-hits``): seeds
    trained in different sessions, whose homes are gone, still make one seed-averaged table."""

    source: str
    per_row: dict[str, dict[str, np.ndarray]]  # method → {"P@1": per-query 0/1}
    deciles: np.ndarray
    basis: str
    test_split: str
    served: dict[str, Any]
    trained_at: dict[str, Any]


def from_home(home: Path, dataset: str, profile: str, others: list[str]) -> SeedRows:
    """``home``'s rows of the pairs' methods and of ``others`` (each where evaluated), what ramen served and the
    commit each method was trained at."""
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.graph_gain import METRIC, PAIRS, query_deciles
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import anchors_dir, eval_dir, model_dir

    per_row, served, trained_at, splits = {}, {}, {}, set()
    for method in dict.fromkeys([m for pair in PAIRS for m in pair] + others):
        record = EvaluationRecord.load(eval_dir(home, dataset, method, profile))
        if record is not None and (rows := record.per_row()) is not None:
            per_row[method] = {METRIC: rows[METRIC]}
            splits.add(record.test_split or "")
        summary = model_dir(home, dataset, method, profile) / "train_summary.json"
        if summary.exists():
            run = json.loads(summary.read_text())
            served[method], trained_at[method] = run.get("served_encoder"), run.get("git_commit")
    if len(splits) > 1:
        raise SystemExit(f"{home}: its evaluations were scored on {len(splits)} different test splits; re-evaluate")
    deciles, basis = query_deciles(XCDataset.load(anchors_dir(home, dataset)))
    return SeedRows(str(home), per_row, deciles, basis, splits.pop() if splits else "", served, trained_at)


def _pack(values: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(values.tobytes(), 9)).decode("ascii")


def _unpack(text: str, dtype: type) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=dtype)


def hits_json(seed: SeedRows, dataset: str, profile: str) -> str:
    """``seed`` as a small JSON file (P@1 of one query is 0 or 1: bits, zlib, base64; the deciles as bytes)."""
    from xc_core.evaluation.graph_gain import METRIC

    hits = {}
    for method, rows in seed.per_row.items():
        values = rows[METRIC]
        if not np.isin(values, (0.0, 1.0)).all():
            raise ValueError(f"{seed.source}: {method}'s {METRIC} is not 0/1 per query; it cannot be stored as hits")
        hits[method] = _pack(np.packbits(values.astype(bool)))
    return json.dumps({"dataset": dataset, "profile": profile, "source": seed.source, "rows": len(seed.deciles),
                       "test_split": seed.test_split, "basis": seed.basis, "served": seed.served,
                       "trained_at": seed.trained_at, "deciles": _pack(seed.deciles.astype(np.int8)),
                       "hits": hits}, indent=1) + "\n"


def load_hits(path: Path) -> SeedRows:
    """The :class:`SeedRows` a ``--save-hits`` file holds."""
    from xc_core.evaluation.graph_gain import METRIC

    try:
        saved = json.loads(path.read_text())
        n = saved["rows"]
        per_row = {m: {METRIC: np.unpackbits(_unpack(v, np.uint8))[:n].astype(np.float64)}
                   for m, v in saved["hits"].items()}
        deciles = _unpack(saved["deciles"], np.int8).astype(np.int64)
        found = SeedRows(str(path), per_row, deciles, saved["basis"], saved["test_split"], saved["served"],
                         saved["trained_at"])
    except (OSError, ValueError, KeyError, zlib.error) as error:  # json and base64 errors are ValueErrors
        raise SystemExit(f"{path}: not a seed file of --save-hits ({type(error).__name__}: {error}); write it again "
                         "with --save-hits from the seed's home") from error
    if len(deciles) != n or any(len(rows[METRIC]) != n for rows in per_row.values()):
        raise SystemExit(f"{path}: holds fewer rows than its 'rows' ({n}); write it again with --save-hits")
    return found


def measured(seed: SeedRows) -> dict[str, Any]:
    """One seed's paired rows, what ramen served and the commit each method was trained at."""
    from xc_core.evaluation.graph_gain import rows_by_decile

    return {"home": seed.source, "rows": rows_by_decile(seed.deciles, seed.basis, seed.per_row),
            "served": seed.served, "trained_at": seed.trained_at}


def _averaged(seeds: list[SeedRows], method: str) -> dict[str, np.ndarray] | None:
    """``method``'s P@1 averaged over the seeds, or None unless every seed evaluated it."""
    from xc_core.evaluation.graph_gain import METRIC

    if not all(method in s.per_row for s in seeds):
        return None
    return {METRIC: np.mean([s.per_row[method][METRIC] for s in seeds], axis=0)}


def same_split(seeds: list[SeedRows]) -> None:
    """Refuse seeds scored on different test splits (their fingerprints, or their queries' deciles, differ)."""
    splits = {s.test_split for s in seeds}
    if len(splits) > 1 or any(not np.array_equal(s.deciles, seeds[0].deciles) for s in seeds):
        raise SystemExit("the seeds were scored on different test splits: "
                         + ", ".join(f"{s.source} ({s.test_split or 'unknown'})" for s in seeds))


def seed_averaged(seeds: list[SeedRows]) -> list[dict[str, Any]]:
    """The paired rows on per-query P@1 averaged over the seeds: the seed noise averaged out, the interval over test
    queries."""
    from xc_core.evaluation.graph_gain import PAIRS, rows_by_decile

    per_row = {m: rows for m in {m for pair in PAIRS for m in pair}
               if (rows := _averaged(seeds, m)) is not None}
    return rows_by_decile(seeds[0].deciles, seeds[0].basis, per_row)


def beside(seeds: list[SeedRows], others: list[str]) -> list[dict[str, Any]]:
    """``ramen`` and ``dual_encoder`` (per-query metrics averaged over the seeds) against each of ``others`` as the
    first seed that evaluated it scored it (the untrained encoder, the PECOS peer: one seed suffices, neither trains on
    a seed): each one's test P@1 and the paired differences, all queries and the tail half."""
    from xc_core.evaluation.analyses import paired_metric_diff
    from xc_core.evaluation.graph_gain import METRIC
    from xc_core.evaluation.seed_homes import metric_value

    tail = seeds[0].deciles >= 5
    ours = {m: rows for m in ("ramen", "dual_encoder") if (rows := _averaged(seeds, m)) is not None}
    out = []
    for other in others:
        rows = next((s.per_row[other] for s in seeds if other in s.per_row), None)
        if rows is None:
            raise SystemExit(f"no seed holds a per-query evaluation of {other}: evaluate it in one of them first")
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
    parser.add_argument("--homes", nargs="*", type=Path, default=[], help="one home per seed, first = seed 0")
    parser.add_argument("--hits", nargs="*", type=Path, default=[],
                        help="seeds saved with --save-hits (after --homes' seeds, in the order given)")
    parser.add_argument("--save-hits", type=Path, help="folder: write each home's seed as <dataset>-<profile>-"
                        "<home folder>.json, the per-query P@1 a later table reads with --hits")
    parser.add_argument("--assess", action="store_true", help="compute the check now from the first home's sets")
    parser.add_argument("--check-from", type=Path, help="reuse the check of an earlier --json file (its 'check')")
    parser.add_argument("--beside", default="", help="comma-separated methods evaluated in one of the seeds (e.g. "
                        "pretrained,pecos) that the seed-averaged ramen and dual_encoder are paired against")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not args.homes and not args.hits:
        parser.error("give --homes, --hits or both")
    if not args.homes and not args.check_from:
        parser.error("the check is read from the first home's anchor sets: with --hits alone, pass --check-from")
    others = [m for m in args.beside.split(",") if m]
    seeds = [from_home(h, args.dataset, args.profile, others) for h in args.homes]
    for home, seed in zip(args.homes, seeds, strict=True):
        if args.save_hits:
            out = args.save_hits / f"{args.dataset}-{args.profile}-{home.name}.json"
            print(f"saved {write_result(out, hits_json(seed, args.dataset, args.profile))}")
    seeds += [load_hits(path) for path in args.hits]
    same_split(seeds)
    record = (json.loads(args.check_from.read_text())["check"] if args.check_from
              else check(args.homes[0], args.dataset, args.profile, args.assess))
    rows = [measured(seed) for seed in seeds]
    averaged = seed_averaged(seeds) if len(seeds) > 1 else []
    print(f"## {args.dataset}: the graph-worth check\n")
    table = worth_table(record)
    if table:
        print("| " + " | ".join(table[0]) + " |\n|" + "---|" * len(table[0]))
        for row in table:
            print("| " + " | ".join(str(v) for v in row.values()) + " |")
    print("\n## measured (P@1 points, 95% paired interval)\n")
    print(decile_markdown(rows, averaged) + "\n")
    for i, found in enumerate(rows):
        print(f"seed {i} ({found['home']}): served {found['served']}, trained at {found['trained_at']}")
    against = beside(seeds, others)
    for row in against:
        print(f"{row['method']} (seed-averaged) − {row['vs']} ({100 * row[row['vs'] + ' P@1']:.2f}), {row['subset']}: "
              f"{_cell(row)}")
    if args.json:
        write_result(args.json, json.dumps({"dataset": args.dataset, "profile": args.profile, "check": record,
                                         "seeds": rows, "seed_averaged": averaged,
                                         "beside": against}, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
