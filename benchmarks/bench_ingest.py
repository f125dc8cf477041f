"""Ingestion benchmark: all of aol-1000, and a generated 10M-row canonical Parquet file.

Each measurement runs in its own process so its peak RSS is its own. Baseline, measured in the same
run: reading the same Parquet file with pyarrow and nothing else (the floor any ingestion pays).
Goals (issue 2): aol-1000 ≤ 10 s; generic Parquet ≥ 1M events/s; peak RSS ≤ 2 GB for 10M rows.

The machine is shared: before measuring, the script waits (up to ``--wait-minutes``) until the 1-minute
load average is at most ``--max-load``, and records the load averages it measured at in the JSON.

    .venv/bin/python benchmarks/bench_ingest.py [--rows 10000000] [--max-load 0.8] [--wait-minutes 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import peak_rss_mb  # benchmarks run as scripts from this folder

RESULTS = Path(__file__).parent / "results" / "bench_ingest.json"


def generate(path: Path, rows: int, seed: int = 0) -> None:
    """A canonical event file: 30 days, 200k users, 4 markets, impressions with ~5% clicks, time-sorted."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    start = np.datetime64("2006-03-01T00:00:00", "us").astype(np.int64)
    ts = np.sort(start + rng.integers(0, 30 * 86_400 * 1_000_000, rows))
    frame = pl.DataFrame({
        "ts": pl.Series(ts).cast(pl.Datetime("us", "UTC")),
        "user_id": pl.Series(rng.integers(0, 200_000, rows)).cast(pl.String),
        "market": pl.Series(rng.integers(1, 5, rows)).cast(pl.String),
        "query_text": pl.Series(rng.zipf(1.3, rows) % 500_000).cast(pl.String),
        "item_id": pl.Series(rng.integers(0, 100_000, rows)).cast(pl.String),
        "position": pl.Series(rng.integers(1, 6, rows), dtype=pl.Int32),
        "impressed": pl.Series(np.ones(rows, dtype=bool)),
        "clicked": pl.Series(rng.random(rows) < 0.05),
    }).with_columns(market=pl.lit("MC-") + pl.col("market"), query_text=pl.lit("query ") + pl.col("query_text"),
                    item_text=pl.lit("keyword ") + pl.col("item_id"))
    frame.write_parquet(path, row_group_size=1_000_000)


def part(name: str, path: str, home: str) -> dict[str, Any]:
    """One measurement, run inside a child process."""
    started = time.perf_counter()
    phases: dict[str, float] = {}
    if name == "baseline_pyarrow_read":
        import pyarrow.parquet as pq

        rows = sum(batch.num_rows for batch in pq.ParquetFile(path).iter_batches(batch_size=1_000_000))
    else:
        from xc_core.logs.ingest import Source, ingest

        summary = ingest([Source("aol" if name == "aol-1000" else "events", Path(path))], Path(home), progress=False)
        rows = summary.read
        assert summary.accepted + summary.rejected == summary.read
        if name == "generic_parquet":  # a fresh home: every accepted row is a new stored event
            assert summary.stored == summary.accepted
        phases = summary.phases
    seconds = time.perf_counter() - started
    cpu = os.times()  # this process and its threads
    result: dict[str, Any] = {"rows": rows, "seconds": round(seconds, 3), "events_per_s": round(rows / seconds),
                              "cpu_seconds": round(cpu.user + cpu.system, 2), "peak_rss_mb": round(peak_rss_mb(), 1)}
    if name != "baseline_pyarrow_read":
        result["phase_seconds"] = phases  # wall seconds per ingestion phase (xc_core.logs.ingest)
    return result


def wait_for_quiet(max_load: float, wait_minutes: float) -> float:
    """The 1-minute load average once it is at most ``max_load`` (or when ``wait_minutes`` have passed)."""
    deadline = time.monotonic() + wait_minutes * 60
    while (load := os.getloadavg()[0]) > max_load and time.monotonic() < deadline:
        print(f"load average {load:.2f} > {max_load}: waiting", file=sys.stderr, flush=True)
        time.sleep(60)
    return load


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--max-load", type=float, default=0.8, help="wait until the 1-minute load average is below")
    parser.add_argument("--wait-minutes", type=float, default=20.0, help="for at most this long")
    parser.add_argument("--part", nargs=3, metavar=("NAME", "PATH", "HOME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        print(json.dumps(part(*args.part)))
        return
    from xc_core.paths import aol_archive

    results: dict[str, Any] = {"cpu_cores": os.cpu_count()}  # the JSON record written below
    results["load_average_1m_at_start"] = round(wait_for_quiet(args.max_load, args.wait_minutes), 2)
    with tempfile.TemporaryDirectory() as tmp:
        parquet = Path(tmp) / "events.parquet"
        generate(parquet, args.rows)
        jobs = {"aol-1000": str(aol_archive()), "generic_parquet": str(parquet), "baseline_pyarrow_read": str(parquet)}
        for name, path in jobs.items():
            load = os.getloadavg()[0]  # includes this script's own work just before (generating, the run before)
            out = subprocess.run([sys.executable, __file__, "--part", name, path, str(Path(tmp) / f"home-{name}")],
                                 capture_output=True, text=True, check=True)
            measured = json.loads(out.stdout.strip().splitlines()[-1])
            results[name] = {**measured, "load_average_1m_before": round(load, 2)}
            print(name, results[name], flush=True)
        results["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    generic, baseline = results["generic_parquet"], results["baseline_pyarrow_read"]
    results["ratio_generic_vs_pyarrow_read_seconds"] = round(generic["seconds"] / baseline["seconds"], 1)
    results["goals"] = {
        "aol_1000_seconds<=10": results["aol-1000"]["seconds"] <= 10,
        "generic_events_per_s>=1e6": generic["events_per_s"] >= 1_000_000,
        "generic_peak_rss_mb<=2048": generic["peak_rss_mb"] <= 2048,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
