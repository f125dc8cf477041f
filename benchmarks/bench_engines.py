"""The graph tables per engine (issue #42): events/s and peak memory of duckdb and Spark (``local[2]``) at growing
event counts, on this machine.

    .venv/bin/python benchmarks/bench_engines.py --events 1000000,10000000 [--work /tmp/xc-engines]

For each size, a simulated event store is written straight into the store's layout (``events/day=*/events.parquet``,
the canonical schema, sessions already cut): 30 days, Zipf-distributed users, queries and items, one shown item in
three clicked — the shape of search logs, generated with a seed, without the world simulator (whose per-event
Python would dominate at 100M). Then each engine builds the three tables over the first 20 days, in a subprocess of
its own, while the parent samples the resident memory of that process and its children (Spark's JVM is one) every
50 ms. Both engines' tables are compared (row counts; equal rows are the tests' job, tests/engines).

JSON: benchmarks/results/engines_graph_tables.json (sizes measured so far are kept: the grid is resumable; an engine
run alone at a size keeps the other engine's run of the same seeded store; each run records its commit).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from xc_core.measure import machine, tree_rss_mb
from xc_core.provenance import checkout_stamp, write_result
from xc_core.simulate.bulk_store import DAYS, FIRST_DAY, bulk_event_store

RESULT = Path(__file__).resolve().parent / "results" / "engines_graph_tables.json"
TRAIN_DAYS = 20


def _same_store(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Two simulated stores are the same when all but their build time agree (same size and seed)."""
    return a is not None and {k: v for k, v in a.items() if k != "seconds"} == {
        k: v for k, v in b.items() if k != "seconds"}


def build(home: Path, engine: str) -> dict[str, Any]:
    """In the child process: the three tables with ``engine``."""
    from xc_core.datasets.graph_tables import GraphConfig, build_graph_tables
    from xc_core.logs.store import EventStore

    start = datetime(FIRST_DAY.year, FIRST_DAY.month, FIRST_DAY.day, tzinfo=UTC)
    summary = build_graph_tables(EventStore(home), home / f"graphs-{engine}", start,
                                 start + timedelta(days=TRAIN_DAYS), GraphConfig(engine=engine),  # type: ignore[arg-type]
                                 register=False)
    return summary.to_dict()


def measure(home: Path, engine: str) -> dict[str, Any]:
    """Run :func:`build` in a subprocess, sampling its memory; its summary, wall seconds and peak memory."""
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    child = subprocess.Popen([sys.executable, __file__, "--child", engine, "--work", str(home)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "XC_SPARK_SHUFFLE_PARTITIONS": "8"})
    peak = [0.0]

    def sample() -> None:
        while child.poll() is None:
            peak[0] = max(peak[0], tree_rss_mb(child.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = child.communicate()
    sampler.join()
    if child.returncode != 0:
        return {"engine": engine, "error": err.strip().splitlines()[-1] if err.strip() else f"exit {child.returncode}"}
    summary = json.loads(out.strip().splitlines()[-1])
    # the 1-minute load average around the run: above the 2 cores, someone else shared them and the rate is low
    return {"engine": engine, "wall_seconds": round(time.perf_counter() - started, 1), "peak_rss_mb": round(peak[0]),
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "build_seconds": summary["seconds"], "tables": {k: summary[k] for k in
                                                            ("click_graph", "cosession_queries", "coclick_items")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", default="1000000,10000000", help="comma-separated event counts")
    parser.add_argument("--engines", default="duckdb,spark")
    parser.add_argument("--work", type=Path, default=Path("/tmp/xc-engines"), help="where the stores are written")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep each simulated store (GBs at 100M)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(build(args.work, args.child)))
        return
    result = json.loads(RESULT.read_text()) if RESULT.exists() else {"sizes": {}}
    result.update({"machine": machine(), "code": checkout_stamp(), "days": DAYS, "train_days": TRAIN_DAYS,
                   "spark_master": "local[2]"})
    for n in (int(x) for x in args.events.split(",")):
        home = args.work / f"events-{n}"
        shutil.rmtree(home, ignore_errors=True)
        store = bulk_event_store(home, n, args.seed)
        runs = {engine: {**measure(home, engine), "commit": checkout_stamp()["commit"]}
                for engine in args.engines.split(",")}
        earlier = result["sizes"].get(str(n), {})
        if _same_store(earlier.get("store"), store):  # the same seeded store: keep the engines not run this time
            runs = {**earlier["runs"], **runs}
        train_events = n * TRAIN_DAYS // DAYS
        for run in runs.values():
            if "build_seconds" in run:
                run["train_events_per_s"] = round(train_events / run["build_seconds"])
                run["per_core_events_per_s"] = round(run["train_events_per_s"] / (os.cpu_count() or 1))
        counts = [run["tables"] for run in runs.values() if "tables" in run]
        result["sizes"][str(n)] = {"store": store, "train_events": train_events, "runs": runs,
                                   # None: one engine ran, nothing to compare
                                   "same_row_counts": all(c == counts[0] for c in counts) if len(counts) > 1
                                   else None}
        write_result(RESULT, json.dumps(result, indent=1) + "\n")
        print(json.dumps({n: {e: {k: r.get(k) for k in ("build_seconds", "peak_rss_mb", "train_events_per_s",
                                                        "error")} for e, r in runs.items()}}), flush=True)
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
