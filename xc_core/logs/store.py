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
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import duckdb
import polars as pl

from xc_core.logs.schema import EVENT_SCHEMA, QUARANTINE_SCHEMA
from xc_core.logs.sessions import Sessions, last_session_per_user, sessionise
from xc_core.logs.validate import hex16, parse_hex16

_QUARANTINE_KEY = ["source_file", "line_no", "reason"]
_UNSESSIONED = [c for c in EVENT_SCHEMA if c != "session_id"]
#: What write_days merges: events without ``session_id``, ids as UInt64 (hex only in the files), with
#: ``session_seed`` (the id of the session the event would start, from ingestion; null for stored rows,
#: whose seeds are computed when needed).
_MERGE_SCHEMA = {**{c: EVENT_SCHEMA[c] for c in _UNSESSIONED}, "event_id": pl.UInt64(), "session_seed": pl.UInt64()}


def _conform(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with exactly the merge columns, in order (absent ones, e.g. all-null ones not staged, as nulls;
    hex ids, e.g. a stored day's, as numbers)."""
    def column(name: str, dtype: pl.DataType) -> pl.Expr:
        if name not in frame.columns:
            return pl.lit(None, dtype=dtype).alias(name)
        if dtype == pl.UInt64 and frame.schema[name] == pl.String:
            return pl.col(name).str.to_integer(base=16, dtype=pl.UInt64)
        return pl.col(name).cast(dtype)

    return frame.select([column(name, dtype) for name, dtype in _MERGE_SCHEMA.items()])


def _in_store_order(frame: pl.DataFrame, max_fixes: int = 64) -> pl.DataFrame:
    """``frame`` sorted by ``ts, user_id, event_id``, the order of a day file. Logs usually arrive in time
    order: then only runs of equal times may be out of order, and sorting just those few runs spares
    permuting every column of the day."""
    ts = frame.get_column("ts")
    if not ts.is_sorted():
        return frame.sort("ts", "user_id", "event_id")
    ties = frame.select(tie=(pl.col("ts") == pl.col("ts").shift(1)).fill_null(False)).to_series()
    if not ties.any():
        return frame
    in_runs = ties | ties.shift(-1, fill_value=False)  # rows whose time equals the previous or the next row's
    tied = frame.select("ts", "user_id", "event_id").with_row_index("_row").filter(in_runs)
    runs = tied.with_columns(run=(pl.col("ts") != pl.col("ts").shift(1)).fill_null(True).cum_sum())
    moved = runs.get_column("_row") != runs.sort("run", "user_id", "event_id").get_column("_row")
    to_fix = runs.filter(moved).group_by("run", maintain_order=True).agg(
        first=pl.col("_row").min(), last=pl.col("_row").max())
    if to_fix.is_empty():
        return frame
    if to_fix.height > max_fixes:
        return frame.sort("ts", "user_id", "event_id")
    pieces, at = [], 0
    for first, last in to_fix.select("first", "last").iter_rows():
        pieces += [frame.slice(at, first - at), frame.slice(first, last - first + 1).sort("user_id", "event_id")]
        at = last + 1
    return pl.concat([*pieces, frame.slice(at)])


def _write_day(frame: pl.DataFrame, path: Path) -> None:
    """A merged day (numeric ids) as the store's file: ids in hex, the seeds dropped, the schema's columns."""
    ids = frame.select(hex16(frame.get_column("event_id")), hex16(frame.get_column("session_id")))
    atomic_write_parquet(frame.with_columns(ids).select(list(EVENT_SCHEMA)), path)


def _same_sessions(before: pl.DataFrame | None, after: pl.DataFrame) -> bool:
    """Whether a rewritten day (``after``: numeric ids) kept every row's session id (a stored day, ``before``:
    hex ids); then the day after it needs no rewrite."""
    if before is None or before.height != after.height:
        return False
    old = before.select(parse_hex16(before.get_column("event_id")), parse_hex16(before.get_column("session_id")))
    return old.sort("event_id").equals(after.select("event_id", "session_id").sort("event_id"))


@dataclass(frozen=True)
class _Chunk:
    """Consecutive days prepared for writing: their rows in time order and their sessions, not yet linked to
    the day before."""

    days: list[date]
    frame: pl.DataFrame
    sessions: Sessions
    existing: dict[date, pl.DataFrame]  # the stored files' rows, for the days that have one
    new_events: dict[date, int]  # rows not stored before, for the days given rows
    already_stored: int


#: Consecutive days are merged and sessionised together up to about this much given data (a day of the
#: 10M-row benchmark is one chunk; all of aol-1000's 92 days are one).
_CHUNK_BYTES = 64 << 20


def _chunks(days: Mapping[date, Sequence[Path | pl.DataFrame]]) -> list[list[date]]:
    chunks: list[list[date]] = []
    size = 0
    for day in sorted(days):
        day_bytes = sum(p.stat().st_size if isinstance(p, Path) else int(p.estimated_size()) for p in days[day])
        if chunks and chunks[-1][-1] == day - timedelta(days=1) and size + day_bytes <= _CHUNK_BYTES:
            chunks[-1].append(day)
            size += day_bytes
        else:
            chunks.append([day])
            size = day_bytes
    return chunks


def _by_day(frame: pl.DataFrame) -> Iterator[tuple[date, pl.DataFrame]]:
    """A frame in time order split into its days (slices: no copy)."""
    days = frame.select(pl.col("ts").dt.date()).to_series()
    values = days.unique(maintain_order=True)
    bounds = [*days.search_sorted(values, side="left").to_list(), frame.height]
    for day, start, end in zip(values.to_list(), bounds[:-1], bounds[1:], strict=True):
        yield day, frame.slice(start, end - start)


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
        # zstd level 1: about as small as polars' default level on event files, and a third faster to write;
        # fixed-size row groups: a frame assembled from pieces would otherwise get one row group per piece
        frame.write_parquet(tmp, compression="zstd", compression_level=1, statistics=True, row_group_size=1 << 19)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _pid_of(name: str) -> int | None:
    """The writer pid in ``.x.tmp-<pid>-<id>`` or ``<pid>-<id>`` (staging); None when absent."""
    token = name.split(".tmp-")[-1] if ".tmp-" in name else name
    head = token.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (one we may not signal counts as running)."""
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
            if pid is not None and not pid_alive(pid):
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

    def write_days(self, days: Mapping[date, Sequence[Path | pl.DataFrame]], gap_minutes: float,
                   remove_files: bool = False) -> WriteResult:
        """Merge canonical events (with ``event_id``, optionally ``session_seed``, without ``session_id``),
        given per day as frames or Arrow IPC files, into their day partitions (``remove_files``: delete
        each file once read, staging files whose disk and cache are better freed as the merge proceeds).

        Rows already stored are skipped. A day is rewritten, in time order and re-sessionised with the
        day before as context, when it gains rows or its session ids change; then so is the stored day
        after it (its first sessions may continue across midnight), and the next while ids keep changing.
        Consecutive days are merged and sessionised together in chunks of about ``_CHUNK_BYTES`` (a small
        day costs little more than its fixed overheads); two chunks are prepared at a time by worker
        threads, then linked to the day before and written in date order, the writing in the background.
        """
        if not days:
            return WriteResult(0, 0, ())
        new_events = already_stored = 0
        written: list[date] = []
        chunks = _chunks(days)

        def prepare(chunk: list[date]) -> _Chunk:
            return self._prepare_chunk(chunk, days, gap_minutes, remove_files)

        with (self.lock(), ThreadPoolExecutor(max_workers=2, thread_name_prefix="xc-days") as workers,
              ThreadPoolExecutor(max_workers=1, thread_name_prefix="xc-write") as writer):
            preparing = [workers.submit(prepare, chunk) for chunk in chunks[:2]]
            queued = chunks[2:]
            pending: Future[None] | None = None
            previous: tuple[date, pl.DataFrame] | None = None  # the last day done and its sessions' tail
            follower: list[date] | None = None  # a stored day after a changed one: its sessions may change
            while preparing or follower:
                if follower is not None:
                    done, follower = prepare(follower), None
                else:
                    done = preparing.pop(0).result()
                    if queued:
                        preparing.append(workers.submit(prepare, queued.pop(0)))
                already_stored += done.already_stored
                new_events += sum(done.new_events.values())
                before = done.days[0] - timedelta(days=1)
                tail = previous[1] if previous is not None and previous[0] == before else self._tail_of(before)
                ids, tail = done.sessions.after(tail, gap_minutes)
                last = done.days[-1]
                previous = (last, tail.filter(pl.col("ctx_ts").dt.date() == last))  # context is one day back
                merged = done.frame.with_columns(ids)
                changed = False
                for day, part in _by_day(merged):
                    if not done.new_events.get(day) and _same_sessions(done.existing.get(day), part):
                        continue  # nothing changed: the file stays as it is
                    if pending is not None:
                        pending.result()
                    pending = writer.submit(_write_day, part, self.day_path(day))
                    written.append(day)
                    changed = day == last
                following = last + timedelta(days=1)
                if changed and following not in days and self.day_path(following).exists():
                    follower = [following]
            if pending is not None:
                pending.result()  # re-raises a failed write while the lock is still held
            if written:
                self._bump_generation()
                self.refresh_views()
        return WriteResult(new_events, already_stored, tuple(written))

    def _prepare_chunk(self, chunk: list[date], days: Mapping[date, Sequence[Path | pl.DataFrame]],
                       gap_minutes: float, remove_files: bool) -> _Chunk:
        """Consecutive days' stored rows plus their new ones, in time order, with sessions computed on their own."""
        frames, existing, new_events, already = [], {}, {}, 0
        for day in chunk:
            stored = self.read_day(day) if self.day_path(day).exists() else None
            parts = days.get(day, ())
            read = [pl.read_ipc(p) if isinstance(p, Path) else p for p in parts]
            if remove_files:
                for part in parts:
                    if isinstance(part, Path):
                        part.unlink(missing_ok=True)
            incoming = _conform(pl.concat(read, how="diagonal_relaxed")) if read else None
            if stored is not None:
                existing[day] = stored
                frames.append(_conform(stored.select(_UNSESSIONED)))
                if incoming is not None:
                    known = incoming.get_column("event_id").is_in(parse_hex16(stored.get_column("event_id")).implode())
                    already += int(known.sum())
                    incoming = incoming.filter(~known)
            if incoming is not None:
                new_events[day] = incoming.height
                frames.append(incoming)
        merged = _in_store_order(pl.concat(frames, how="vertical_relaxed") if frames
                                 else pl.DataFrame(schema=_MERGE_SCHEMA))
        return _Chunk(chunk, merged, sessionise(merged, gap_minutes), existing, new_events, already)

    def _tail_of(self, day: date) -> pl.DataFrame:
        """Each user's last session in a stored day (empty when the day is not stored)."""
        path = self.day_path(day)
        return last_session_per_user(pl.read_parquet(path, columns=["user_id", "ts", "session_id"])
                                     if path.exists() else None)

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
