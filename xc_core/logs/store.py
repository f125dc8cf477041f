"""The event store: Parquet partitioned by day under ``<home>/events``, plus the quarantine table.

Writes are atomic per file (write a temp file, then ``os.replace``) and serialised by a file lock, so a
crash or a concurrent writer never leaves a half-written partition; readers always see either the old
or the new file. Ingesting events that are already stored changes nothing (idempotent by ``event_id``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import duckdb
import polars as pl

from xc_core.logs.schema import EVENT_SCHEMA, QUARANTINE_SCHEMA
from xc_core.logs.sessions import assign_sessions

_QUARANTINE_KEY = ["source_file", "line_no", "reason"]


@dataclass(frozen=True)
class WriteResult:
    new_events: int
    already_stored: int
    days_written: tuple[date, ...]


def atomic_write_parquet(frame: pl.DataFrame, path: Path) -> None:
    """Write ``frame`` to ``path`` so that readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        frame.write_parquet(tmp, compression="zstd", statistics=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _pid_of(name: str) -> int | None:
    """The writer pid in ``.x.tmp-<pid>-<id>`` or ``<pid>-<id>`` (staging); None when absent."""
    token = name.split(".tmp-")[-1] if ".tmp-" in name else name
    head = token.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EventStore:
    """Day-partitioned canonical events and the quarantine, with duckdb views over both."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.events_dir = self.home / "events"
        self.quarantine_path = self.home / "quarantine" / "quarantine.parquet"
        self.duckdb_path = self.home / "xc.duckdb"

    # -- reading -------------------------------------------------------------------------------
    def day_path(self, day: date) -> Path:
        return self.events_dir / f"day={day.isoformat()}" / "events.parquet"

    def days(self) -> list[date]:
        return sorted(date.fromisoformat(p.parent.name[4:]) for p in self.events_dir.glob("day=*/events.parquet"))

    def read_day(self, day: date) -> pl.DataFrame:
        path = self.day_path(day)
        return pl.read_parquet(path) if path.exists() else pl.DataFrame(schema=EVENT_SCHEMA)

    def scan(self) -> pl.LazyFrame:
        """All stored events (an empty frame with the schema when the store is empty)."""
        files = [self.day_path(d) for d in self.days()]
        return pl.scan_parquet(files) if files else pl.DataFrame(schema=EVENT_SCHEMA).lazy()

    def read_quarantine(self) -> pl.DataFrame:
        if self.quarantine_path.exists():
            return pl.read_parquet(self.quarantine_path)
        return pl.DataFrame(schema=QUARANTINE_SCHEMA)

    def generation(self) -> int:
        """How many event writes the store has seen: derived tables record the generation they were
        built from, so a build from an older snapshot never replaces one from a newer snapshot."""
        path = self.home / ".generation"
        return int(path.read_text()) if path.exists() else 0

    # -- writing -------------------------------------------------------------------------------
    def _bump_generation(self) -> None:
        """Called under the exclusive lock after every event write."""
        path = self.home / ".generation"
        tmp = path.with_name(f".generation.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        tmp.write_text(str(self.generation() + 1))
        os.replace(tmp, path)

    def clean_stale(self) -> int:
        """Remove temp files and staging folders left by writers that were killed (their pid is gone)."""
        removed = 0
        for path in [*self.home.glob("events/day=*/.*.tmp-*"), *self.home.glob("quarantine/.*.tmp-*"),
                     *self.home.glob(".staging/*")]:
            pid = _pid_of(path.name)
            if pid is not None and not _alive(pid):
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
                removed += 1
        return removed

    @contextmanager
    def lock(self, shared: bool = False) -> Iterator[None]:
        """Serialise writers (threads, processes, concurrent Dagster runs) on one store; ``shared`` lets
        readers that need one consistent snapshot of several day files in together, with no writer."""
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / ".store.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def write_events(self, events: pl.DataFrame, gap_minutes: float) -> WriteResult:
        """Merge canonical events (with ``event_id``, without ``session_id``) into their day partitions.

        Rows already stored are skipped; touched days and the day after each (whose first sessions may
        continue across midnight) are re-sessionised with the stored day before as context.
        """
        if events.is_empty():
            return WriteResult(0, 0, ())
        with self.lock():
            events = events.with_columns(day=pl.col("ts").dt.date())
            touched = sorted(events.get_column("day").unique().to_list())
            stored_ids = self._stored_ids(touched)
            is_stored = events.get_column("event_id").is_in(stored_ids.implode())
            new = events.filter(~is_stored)
            if new.is_empty():
                return WriteResult(0, int(is_stored.sum()), ())
            new_days = set(new.get_column("day").unique().to_list())
            following = {d + timedelta(days=1) for d in new_days}
            rewrite = sorted(new_days | {d for d in following if self.day_path(d).exists()})
            columns = [c for c in EVENT_SCHEMA if c != "session_id"]
            existing = [self.read_day(d).select(columns) for d in rewrite]
            merged = pl.concat([*existing, new.select(columns)], how="vertical_relaxed")
            context = self.read_day(rewrite[0] - timedelta(days=1))
            merged = assign_sessions(merged, gap_minutes, context).select(list(EVENT_SCHEMA))
            merged = merged.sort("ts", "user_id", "event_id")
            for day, part in self._by_day(merged):
                atomic_write_parquet(part, self.day_path(day))
            self._bump_generation()
            self.refresh_views()
            return WriteResult(new.height, int(is_stored.sum()), tuple(rewrite))

    @staticmethod
    def _by_day(frame: pl.DataFrame) -> Iterator[tuple[date, pl.DataFrame]]:
        keyed = frame.with_columns(_day=pl.col("ts").dt.date())
        for (day,), part in keyed.group_by("_day", maintain_order=True):
            yield day, part.drop("_day")

    def _stored_ids(self, days: list[date]) -> pl.Series:
        files = [self.day_path(d) for d in days if self.day_path(d).exists()]
        if not files:
            return pl.Series("event_id", [], dtype=pl.String)
        return pl.scan_parquet(files).select("event_id").collect().get_column("event_id")

    def append_quarantine(self, rows: pl.DataFrame) -> int:
        """Add quarantine rows not already recorded (same source, line and reason); returns rows added."""
        if rows.is_empty():
            return 0
        with self.lock():
            current = self.read_quarantine()
            fresh = rows.select(list(QUARANTINE_SCHEMA)).unique(_QUARANTINE_KEY, keep="first", maintain_order=True)
            fresh = fresh.join(current.select(_QUARANTINE_KEY), on=_QUARANTINE_KEY, how="anti")
            if fresh.is_empty():
                return 0
            atomic_write_parquet(pl.concat([current, fresh]), self.quarantine_path)
            self.refresh_views()
            return fresh.height

    def refresh_views(self) -> None:
        """(Re)create the duckdb views ``events`` and ``quarantine`` over the Parquet files. Call it under
        :meth:`lock`: duckdb lets one process at a time open the file for writing."""
        statements = []
        if self.days():
            glob = (self.events_dir / "day=*" / "events.parquet").as_posix()
            statements.append("CREATE OR REPLACE VIEW events AS "
                              f"SELECT * FROM read_parquet('{glob}', hive_partitioning=true)")
        if self.quarantine_path.exists():
            statements.append("CREATE OR REPLACE VIEW quarantine AS "
                              f"SELECT * FROM read_parquet('{self.quarantine_path.as_posix()}')")
        if statements:
            with duckdb.connect(str(self.duckdb_path)) as con:
                for statement in statements:
                    con.execute(statement)
