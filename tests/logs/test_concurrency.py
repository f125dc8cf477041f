"""Concurrent writers and killed runs: the event store stays consistent and readable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from xc_core.logs.ingest import Source, ingest
from xc_core.logs.store import EventStore


def _generic_file(path: Path, day: int, rows: int) -> Path:
    frame = pl.DataFrame({
        "ts": [f"2006-03-{day:02d} {h % 24:02d}:{(h * 7) % 60:02d}:{h % 60:02d}" for h in range(rows)],
        "user_id": [f"u{h % 50}" for h in range(rows)], "market": "MC-1",
        "query_text": [f"query {h % 300}" for h in range(rows)], "item_id": [f"k{h}" for h in range(rows)],
        "position": 1, "impressed": True, "clicked": [h % 9 == 0 for h in range(rows)]})
    frame.write_csv(path)
    return path


def _ingest_process(home: Path, path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "xc_core.cli", "ingest", "--source", "events", str(path),
                             "--home", str(home), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_concurrent_ingestions_of_overlapping_days_lose_nothing(tmp_path: Path) -> None:
    # both files write days 3-4 (the day after each file's own is re-sessionised): they contend on the lock
    a, b = _generic_file(tmp_path / "a.csv", 3, 4000), _generic_file(tmp_path / "b.csv", 4, 4000)
    procs = [_ingest_process(tmp_path / "home", p) for p in (a, b)]
    assert all(p.wait(timeout=300) == 0 for p in procs), [p.stderr.read() for p in procs if p.stderr]
    stored = EventStore(tmp_path / "home").scan().collect()
    assert stored.height == 8000 and stored.get_column("event_id").is_unique().all()
    assert [d.day for d in EventStore(tmp_path / "home").days()] == [3, 4]


def test_a_killed_ingestion_leaves_the_store_readable_and_the_next_run_completes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ingest([Source("events", _generic_file(tmp_path / "first.csv", 5, 2000))], home, progress=False)
    before = EventStore(home).scan().collect().height
    big = _generic_file(tmp_path / "big.csv", 6, 200_000)
    victim = _ingest_process(home, big)
    time.sleep(1.5)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    readable = EventStore(home).scan().collect()  # whatever was committed is readable, nothing half-written
    assert readable.height >= before
    summary = ingest([Source("events", big)], home, progress=False)
    assert not list(home.glob("events/**/.*.tmp-*")) and not list(home.glob(".staging/*"))  # debris cleaned
    assert summary.accepted == 200_000
    assert EventStore(home).scan().collect().height == before + 200_000


def test_debris_of_dead_writers_is_removed_but_a_live_writers_is_kept(tmp_path: Path) -> None:
    day = tmp_path / "events" / "day=2006-03-01"
    day.mkdir(parents=True)
    dead = day / ".events.parquet.tmp-999999-abcd1234"
    live = day / f".events.parquet.tmp-{os.getpid()}-abcd1234"
    staging = tmp_path / ".staging" / "999999-deadbeef"
    for path in (dead, live):
        path.write_bytes(b"partial")
    staging.mkdir(parents=True)
    assert EventStore(tmp_path).clean_stale() == 2
    assert not dead.exists() and not staging.exists() and live.exists()
