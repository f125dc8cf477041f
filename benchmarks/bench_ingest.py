"""Ingestion benchmark: all of aol-1000, and a generated 10M-row canonical Parquet file.

``--engines`` (issue #42) also ingests the generated rows split into ``--files`` Parquet files with each engine
(``default``: xc's own process, the engine every home uses; ``spark``: ``xc ingest --engine spark``, the files
validated as Spark tasks on ``local[2]``), into fresh homes: events/s, events/s a core, and the peak memory of the
Python process and, for Spark, of its JVM (the largest child process: the driver and the ``local`` executors).

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

from xc_core.measure import peak_rss_mb
from xc_core.provenance import checkout_stamp, write_result

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
    elif name.startswith("engine_"):
        return engine_part(name.removeprefix("engine_"), Path(path), Path(home))
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


def engine_part(engine: str, folder: Path, home: Path) -> dict[str, Any]:
    """The Parquet files of ``folder`` ingested by ``engine`` into a fresh ``home`` (inside a child process)."""
    from xc_core.logs.ingest import Source, ingest
    from xc_core.logs.spark_ingest import ingest_on_spark

    sources = [Source("events", path) for path in sorted(folder.glob("*.parquet"))]
    with ChildSampler() as jvm:  # Spark's JVM is a child process that outlives the session's stop
        started = time.perf_counter()
        summary = ingest(sources, home, progress=False) if engine == "default" else ingest_on_spark(sources, home)
        seconds = time.perf_counter() - started
    assert summary.accepted + summary.rejected == summary.read and summary.stored == summary.accepted
    cpu = os.times()
    cpu_seconds = cpu.user + cpu.system + jvm.cpu_seconds
    return {"engine": engine, "files": len(sources), "rows": summary.read, "stored": summary.stored,
            "seconds": round(seconds, 2), "events_per_s": round(summary.read / seconds),
            # a core's throughput from the CPU time spent, both processes counted: the figure that scales out
            "events_per_cpu_s": round(summary.read / cpu_seconds),
            "cpu_seconds_python": round(cpu.user + cpu.system, 2),
            "cpu_seconds_children": round(jvm.cpu_seconds, 2), "peak_rss_mb_python": round(peak_rss_mb(), 1),
            "peak_rss_mb_children": round(jvm.peak_mb, 1), "phase_seconds": summary.phases}


class ChildSampler:
    """Every 0.2 s, the summed RSS and CPU time of this process's descendants (read from /proc): the peak RSS and the
    last CPU seconds seen. Spark's JVM is such a descendant, and ``getrusage`` counts it only once reaped."""

    def __init__(self) -> None:
        import threading

        self.peak_mb, self.cpu_seconds, self._stop = 0.0, 0.0, threading.Event()
        self._cpu: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ChildSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.wait(0.2):
            rss = 0.0
            for pid in _descendants(os.getpid()):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue  # it ended between the listing and the read
                rss += next((int(line.split()[1]) / 1024 for line in status.splitlines()
                             if line.startswith("VmRSS:")), 0.0)
                self._cpu[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            self.peak_mb, self.cpu_seconds = max(self.peak_mb, rss), sum(self._cpu.values())


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            try:
                kids = [int(k) for k in task.read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def split_file(path: Path, folder: Path, files: int) -> None:
    """``path``'s rows in ``files`` consecutive Parquet files (a day's logs arrive as several files)."""
    import polars as pl

    frame = pl.read_parquet(path)
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-frame.height // files)
    for i in range(files):
        frame.slice(i * step, step).write_parquet(folder / f"part-{i:03d}.parquet", row_group_size=1_000_000)


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
    parser.add_argument("--engines", default="", help="also compare ingestion engines, e.g. default,spark")
    parser.add_argument("--files", type=int, default=4, help="… on the generated rows split into this many files")
    parser.add_argument("--only-engines", action="store_true", help="skip aol-1000 and the single-file runs")
    parser.add_argument("--out", type=Path, default=RESULTS)
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
        jobs = {} if args.only_engines else {"aol-1000": str(aol_archive()), "generic_parquet": str(parquet),
                                             "baseline_pyarrow_read": str(parquet)}
        if engines := [e for e in args.engines.split(",") if e]:
            split_file(parquet, Path(tmp) / "parts", args.files)
            jobs |= {f"engine_{e}": str(Path(tmp) / "parts") for e in engines}
        for name, path in jobs.items():
            load = os.getloadavg()[0]  # includes this script's own work just before (generating, the run before)
            out = subprocess.run([sys.executable, __file__, "--part", name, path, str(Path(tmp) / f"home-{name}")],
                                 capture_output=True, text=True, check=True)
            measured = json.loads(out.stdout.strip().splitlines()[-1])
            results[name] = {**measured, "load_average_1m_before": round(load, 2)}
            print(name, results[name], flush=True)
        results["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    if args.only_engines:
        write(results, args.out)
        return
    generic, baseline = results["generic_parquet"], results["baseline_pyarrow_read"]
    results["ratio_generic_vs_pyarrow_read_seconds"] = round(generic["seconds"] / baseline["seconds"], 1)
    results["goals"] = {
        "aol_1000_seconds<=10": results["aol-1000"]["seconds"] <= 10,
        "generic_events_per_s>=1e6": generic["events_per_s"] >= 1_000_000,
        "generic_peak_rss_mb<=2048": generic["peak_rss_mb"] <= 2048,
    }
    write(results, args.out)


def write(results: dict[str, Any], out: Path) -> None:
    results["git"] = checkout_stamp()
    out.parent.mkdir(parents=True, exist_ok=True)
    write_result(out, json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
