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
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from _common import RESULTS_DIR  # benchmarks run as scripts from this folder
from bench_serve import git_head, machine
from xc_core.provenance import write_result

RESULT = RESULTS_DIR / "engines_graph_tables.json"
DAYS, TRAIN_DAYS = 30, 20
FIRST_DAY = date(2026, 1, 1)


def _same_store(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Two simulated stores are the same when all but their build time agree (same size and seed)."""
    return a is not None and {k: v for k, v in a.items() if k != "seconds"} == {
        k: v for k, v in b.items() if k != "seconds"}


def simulate_store(home: Path, n_events: int, seed: int) -> dict[str, Any]:
    """``n_events`` rows in the event store's layout; what was written."""
    import polars as pl

    from xc_core.logs.schema import EVENT_SCHEMA

    rng = np.random.default_rng(seed)
    n_users, n_queries, n_items = max(n_events // 50, 10), max(n_events // 20, 10), max(n_events // 100, 10)
    started, per_day = time.perf_counter(), n_events // DAYS
    for d in range(DAYS):
        rows = per_day + (n_events % DAYS if d == DAYS - 1 else 0)
        day = FIRST_DAY + timedelta(days=d)
        users = _zipf(rng, n_users, rows)
        session = users * 8 + rng.integers(0, 8, rows)  # ~8 sessions a user a day
        clicked = rng.random(rows) < 1 / 3
        ts = (datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1e6
              + rng.integers(0, 86_400_000_000, rows)).astype("datetime64[us]")
        frame = pl.DataFrame({
            "event_id": pl.Series(np.arange(rows)).cast(pl.String).str.replace(r"^", f"{d}-"),
            "ts": pl.Series(ts).dt.replace_time_zone("UTC"),
            "user_id": pl.Series(users).cast(pl.String),
            "session_id": pl.Series(session).cast(pl.String).str.replace(r"^", f"{d}-"),
            "market": "en-US",
            "query_text": pl.Series(_zipf(rng, n_queries, rows)).cast(pl.String).str.replace(r"^", "query "),
            "item_id": pl.Series(_zipf(rng, n_items, rows)).cast(pl.String).str.replace(r"^", "item-"),
            "item_text": None, "position": pl.Series(rng.integers(1, 11, rows), dtype=pl.Int32),
            "impressed": True, "clicked": pl.Series(clicked), "brand": None, "location": None, "bid": None,
        }).cast({k: v for k, v in EVENT_SCHEMA.items()})
        folder = home / "events" / f"day={day.isoformat()}"
        folder.mkdir(parents=True, exist_ok=True)
        frame.select(list(EVENT_SCHEMA)).write_parquet(folder / "events.parquet")
    size = sum(p.stat().st_size for p in (home / "events").rglob("*.parquet"))
    return {"events": n_events, "users": n_users, "queries": n_queries, "items": n_items,
            "parquet_mb": round(size / 2**20, 1), "seconds": round(time.perf_counter() - started, 1)}


def _zipf(rng: np.random.Generator, n: int, size: int, exponent: float = 1.1) -> np.ndarray:
    """Ids in [0, n) with a Zipf-like head (search logs: a few queries and items take most events)."""
    return (rng.zipf(exponent, size) - 1) % n


def build(home: Path, engine: str) -> dict[str, Any]:
    """In the child process: the three tables with ``engine``."""
    from xc_core.datasets.graph_tables import GraphConfig, build_graph_tables
    from xc_core.logs.store import EventStore

    start = datetime(FIRST_DAY.year, FIRST_DAY.month, FIRST_DAY.day, tzinfo=UTC)
    summary = build_graph_tables(EventStore(home), home / f"graphs-{engine}", start,
                                 start + timedelta(days=TRAIN_DAYS), GraphConfig(engine=engine),  # type: ignore[arg-type]
                                 register=False)
    return summary.to_dict()


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (Spark's JVM is a child of the Python driver)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            todo += [int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
        except (OSError, StopIteration):
            continue
    return total / 1024


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
    result.update({"machine": machine(), "code": git_head(), "days": DAYS, "train_days": TRAIN_DAYS,
                   "spark_master": "local[2]"})
    for n in (int(x) for x in args.events.split(",")):
        home = args.work / f"events-{n}"
        shutil.rmtree(home, ignore_errors=True)
        store = simulate_store(home, n, args.seed)
        runs = {engine: {**measure(home, engine), "commit": git_head()["commit"]}
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
