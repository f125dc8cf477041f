"""Ingestion: raw sources → validated canonical events in the store, every bad record in quarantine.

Two phases so that a source that cannot be read leaves nothing behind: (1) read and validate every
source batch by batch, staging accepted events by day under ``<home>/.staging`` and keeping the
quarantine rows; (2) merge the staged days into the event store, a few days at a time
(:meth:`EventStore.write_days`). Invariant, per ingestion: ``accepted + rejected + outside_window == read``.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal, TypeVar

import polars as pl

from xc_core.logs import aol, generic
from xc_core.logs.config import CONFIG_FILE, IngestConfig, load_ingest_config
from xc_core.logs.errors import IngestError
from xc_core.logs.schema import INPUT_SCHEMA, QUARANTINE_SCHEMA, Reason
from xc_core.logs.store import EventStore
from xc_core.logs.validate import SeenIds, apply_rules, canonical, event_ids, hex16, nulls
from xc_core.progress import bar

log = logging.getLogger(__name__)
SourceKind = Literal["aol", "events"]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Source:
    kind: SourceKind
    path: Path


@dataclass
class IngestSummary:
    """What one ingestion read and did; ``reasons`` counts rejects, ``flagged`` rows kept with a flag.

    ``rejected_files`` lists the sources none of whose rows was accepted (file, rows, top reasons, and
    the unknown markets when that is a reason); ``phases`` says where the seconds went.
    """

    query_events: int = 0
    clicks: int = 0
    read: int = 0
    accepted: int = 0
    rejected: int = 0
    outside_window: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    flagged: dict[str, int] = field(default_factory=dict)
    stored: int = 0
    already_stored: int = 0
    days_written: int = 0
    first_event: str | None = None  # ISO time of the earliest / latest valid event read, inside the window or not
    last_event: str | None = None
    rejected_files: list[dict[str, object]] = field(default_factory=list)
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class _Batch:
    """One validated batch: canonical events (with ``event_id`` and ``session_seed``) and quarantine rows."""

    events: pl.DataFrame
    quarantine: pl.DataFrame
    query_events: int
    clicks: int
    read: int
    unknown_markets: dict[str, int] = field(default_factory=dict)
    origin: pl.DataFrame | None = None  # per event: ``source_file, line_no`` (Spark's duplicates are quarantined by it)


class _Phases:
    """Wall seconds per ingestion phase (reported in the summary, so a slow step shows where it is)."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - started

    def iterate(self, name: str, items: Iterator[_T]) -> Iterator[_T]:
        """``items``, with the time spent producing each one counted under ``name``."""
        while True:
            with self(name):
                item = next(items, None)
            if item is None:
                return
            yield item


def _quarantine_rows(records: pl.DataFrame, mask: pl.Series, reason: pl.Expr, disposition: str,
                     detail: pl.Expr | None = None) -> pl.DataFrame:
    if not mask.any():
        return pl.DataFrame(schema=QUARANTINE_SCHEMA)
    rows = records.filter(mask)
    fallback = pl.struct([pl.col(c).cast(pl.String) for c in INPUT_SCHEMA if c in rows.columns]
                         ).struct.json_encode()
    return rows.select(
        "source_file", "line_no",
        raw=pl.coalesce(pl.col("raw"), fallback),
        reason=reason, disposition=pl.lit(disposition), detail=pl.col("detail") if detail is None else detail,
        ingested_at=pl.lit(datetime.now(UTC)).cast(QUARANTINE_SCHEMA["ingested_at"]),
    )


def _replace_where(column: pl.Series, mask: pl.Series, values: pl.Series) -> pl.Series:
    """``column`` with the rows of ``mask`` set to ``values`` (one per masked row), without touching the rest."""
    return column.scatter(mask.arg_true(), values)


def _valid_ids(records: pl.DataFrame, valid: pl.Series) -> pl.DataFrame:
    """``event_id`` and ``session_seed`` (UInt64) of the valid records, in their order."""
    return event_ids(records if valid.all() else records.filter(valid))


def _with_duplicates(records: pl.DataFrame, valid: pl.Series, ids: pl.DataFrame, seen: SeenIds) -> pl.DataFrame:
    """Give the valid records their ``event_id`` and ``session_seed`` (``ids``: :func:`_valid_ids`; UInt64 until
    the store spells them in hex) and turn repeats into ``duplicate_event`` rejects; rows keep their order."""
    everything = bool(valid.all())
    if ids.is_empty():
        return records.with_columns(event_id=pl.lit(None, dtype=pl.UInt64), session_seed=pl.lit(None, dtype=pl.UInt64))
    duplicate = seen.add(ids.get_column("event_id"))
    if not everything:
        ids = pl.DataFrame([_replace_where(nulls(name, pl.UInt64(), records.height), valid, ids.get_column(name))
                            for name in ids.columns])
    records = records.with_columns(ids)
    if duplicate.any():
        mask = duplicate if everything else _replace_where(pl.repeat(False, records.height, eager=True), valid,
                                                           duplicate)
        repeats = hex16(records.get_column("event_id").filter(mask))
        records = records.with_columns(
            _replace_where(records.get_column("reason"), mask,
                           pl.repeat(Reason.DUPLICATE_EVENT.value, repeats.len(), eager=True)),
            _replace_where(records.get_column("detail"), mask,
                           ("same event as an earlier record (event_id " + repeats + ")")),
        )
    return records


def _finish(records: pl.DataFrame, emit: pl.Series | None, query_events: int, clicks: int) -> _Batch:
    """Split validated records into stored events and quarantine rows; ``emit`` (None: all) says which
    accepted records become events."""
    rejected = records.get_column("reason").is_not_null()
    quarantine = [_quarantine_rows(records, rejected, pl.col("reason"), "rejected")]
    flagged = ~rejected & records.get_column("invalid_utf8")
    if flagged.any():
        quarantine.append(_quarantine_rows(records, flagged, pl.lit(Reason.INVALID_UTF8.value), "kept",
                                           pl.lit("bytes were not UTF-8; decoded with U+FFFD")))
    unknown: dict[str, int] = {}
    if rejected.any():
        markets = records.filter(pl.col("reason") == Reason.UNKNOWN_MARKET.value).get_column("market")
        unknown = {str(m): int(n) for m, n in markets.value_counts(sort=True).head(5).iter_rows()}
    keep = ~rejected if emit is None else ~rejected & emit
    kept = records if keep.all() else records.filter(keep)
    events = pl.concat([kept.select("event_id", "session_seed"), canonical(kept)], how="horizontal")
    return _Batch(events, pl.concat(quarantine), query_events, clicks, records.height, unknown,
                  kept.select("source_file", "line_no"))


def _aol_batches(path: Path, cfg: IngestConfig, seen: SeenIds) -> Iterator[_Batch]:
    """The whole AOL source as one batch (the full archive is ~1M lines: small enough)."""
    records = aol.parse_aol(aol.read_lines(path), cfg.max_query_chars).with_columns(
        position_invalid=pl.lit(False), position_raw=pl.lit(None, dtype=pl.String),
        brand=pl.lit(None, dtype=pl.String), location=pl.lit(None, dtype=pl.String),
        bid=pl.lit(None, dtype=pl.Float64),
    )
    queries = apply_rules(records.filter(pl.col("is_query")), cfg)
    parent = queries.select(parent="record", parent_reason="reason", p_ts="ts", p_ts_raw="ts_raw", p_query="query_text")
    clicks = records.filter(~pl.col("is_query")).join(parent, on="parent", how="left", maintain_order="left")
    clicks = clicks.with_columns(ts="p_ts", ts_raw="p_ts_raw", query_text="p_query").with_columns(
        reason=pl.coalesce(pl.col("structural_reason"),
                           pl.when(pl.col("parent_reason").is_not_null()).then(pl.lit(Reason.PARENT_REJECTED.value))),
        detail=pl.coalesce(pl.col("structural_detail"),
                           pl.format("its query line was rejected ({})", pl.col("parent_reason"))),
    ).drop("p_ts", "p_ts_raw", "p_query", "parent_reason")
    records = pl.concat([queries, clicks], how="diagonal_relaxed").sort("record")
    # A click's event is its own row; a query line yields a row only when none of its clicks was kept. A
    # click rejected below as a duplicate repeats an event of the same query (user, time, query), which is
    # stored already: its query line yields no row either.
    with_kept_click = clicks.filter(pl.col("reason").is_null()).get_column("parent").implode()
    emit = records.select(~(pl.col("is_query") & pl.col("record").is_in(with_kept_click))).to_series()
    valid = records.get_column("reason").is_null() & emit
    records = _with_duplicates(records, valid, _valid_ids(records, valid), seen)
    n_queries = int(records.get_column("is_query").sum())
    yield _finish(records, emit, n_queries, records.height - n_queries)


def _generic_batches(path: Path, cfg: IngestConfig, seen: SeenIds, phases: _Phases) -> Iterator[_Batch]:
    """Validated batches of a canonical event file. While one batch is hashed in a worker thread (polars and
    duckdb release the GIL), the next one is read and validated: the two use both cores."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="xc-hash") as hasher:
        pending: tuple[pl.DataFrame, pl.Series, Future[pl.DataFrame]] | None = None
        for records in phases.iterate("read", generic.iter_generic(path, cfg.batch_rows)):
            with phases("validate"):
                records = apply_rules(records, cfg)
                valid = records.get_column("reason").is_null()
            hashing = hasher.submit(_valid_ids, records, valid)
            if pending is not None:
                yield _generic_batch(*pending, seen, phases)
            pending = (records, valid, hashing)
        if pending is not None:
            yield _generic_batch(*pending, seen, phases)


def _generic_batch(records: pl.DataFrame, valid: pl.Series, hashing: Future[pl.DataFrame], seen: SeenIds,
                   phases: _Phases) -> _Batch:
    with phases("event ids + duplicates"):
        records = _with_duplicates(records, valid, hashing.result(), seen)
    with phases("count + quarantine"):
        query_events = _distinct_query_events(records)
        clicks = int(records.get_column("clicked").fill_null(False).sum())
        return _finish(records, None, query_events, clicks)


def _distinct_query_events(records: pl.DataFrame) -> int:
    """How many distinct (user_id, ts, query_text) the records hold. A time that occurs once is one query
    event by itself, so the exact (costly) distinct count runs only on rows whose time repeats or is null."""
    ts = records.get_column("ts").sort()
    tied = ((ts == ts.shift(1)) | (ts == ts.shift(-1))).fill_null(False)
    single = int((~tied & ts.is_not_null()).sum())
    if single == records.height:
        return single
    repeated = ts.filter(tied).unique().implode()
    rest = records.filter(pl.col("ts").is_in(repeated) | pl.col("ts").is_null())
    return single + rest.select("user_id", "ts", "query_text").n_unique()


def _batches(source: Source, cfg: IngestConfig, seen: SeenIds, phases: _Phases | None = None) -> Iterator[_Batch]:
    """A source's validated batches, read as its kind says (AOL block files or canonical event files)."""
    phases = phases or _Phases()
    if source.kind == "aol":  # one batch: reading, parsing, validating and hashing the archive
        return phases.iterate("read + validate + event ids (aol)", _aol_batches(source.path, cfg, seen))
    return _generic_batches(source.path, cfg, seen, phases)


def preflight(sources: Sequence[Source]) -> None:
    """Fail fast, before reading anything, on sources that are missing or of an unknown type."""
    for source in sources:
        if source.kind == "events":
            generic.file_kind(source.path)
        elif not source.path.exists():
            raise IngestError(source.path, "file not found", "the AOL archive user_search_logs.tgz")


def _by_day(events: pl.DataFrame) -> Iterator[tuple[date, pl.DataFrame]]:
    """``events`` split by the day of ``ts``: zero-copy slices when they are in time order (logs usually are)."""
    days = events.select(pl.col("ts").dt.date()).to_series()
    if days.is_sorted():
        values = days.unique(maintain_order=True)
        bounds = [*days.search_sorted(values, side="left").to_list(), events.height]
        for day, start, end in zip(values.to_list(), bounds[:-1], bounds[1:], strict=True):
            yield day, events.slice(start, end - start)
        return
    keyed = events.with_columns(_day=days)
    for (day,), part in keyed.partition_by("_day", as_dict=True, include_key=False, maintain_order=True).items():
        assert isinstance(day, date)
        yield day, part


class _Staging:
    """Accepted events spilled to disk per day (Arrow IPC: fast to write and read back), so memory holds
    a couple of batches while reading and a few days while merging, whatever the size of the input. One
    background thread writes while the next batch is validated; at most one write is in flight."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.days: dict[date, list[Path]] = defaultdict(list)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xc-staging")
        self._pending: Future[None] | None = None
        self._count = 0

    def add(self, events: pl.DataFrame) -> None:
        # all-null optional columns (brand, location, bid in most logs) are not staged: write_days restores them
        empty = [name for name in events.columns if events.get_column(name).null_count() == events.height]
        events = events.drop(empty)
        self.folder.mkdir(parents=True, exist_ok=True)
        files = []
        for day, part in _by_day(events):
            path = self.folder / f"{day.isoformat()}-{self._count:06d}.arrow"  # read back by write_days
            self._count += 1
            self.days[day].append(path)
            files.append((part, path))
        self.wait()
        self._pending = self._writer.submit(self._write, files)

    @staticmethod
    def _write(files: list[tuple[pl.DataFrame, Path]]) -> None:
        for part, path in files:
            # uncompressed, polars' own layout: costs less CPU both ways than lz4 or a conversion to plain Arrow
            part.write_ipc(path, compression="uncompressed", compat_level=pl.CompatLevel.newest())

    def wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()  # re-raises a failed write here, before anything is committed

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._writer.shutdown(wait=True)

    def discard(self) -> None:
        """After a failure elsewhere: stop writing and remove what was staged (a write's own error is moot)."""
        try:
            self.close()
        except Exception:  # the failure being handled is the one to report
            log.debug("staging write failed during cleanup", exc_info=True)
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class _SourceTally:
    """Per-source counts, to say loudly when a file's rows were all rejected."""

    read: int = 0
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    unknown_markets: Counter[str] = field(default_factory=Counter)

    def entry(self, source: Source) -> dict[str, object] | None:
        if not self.read or self.rejected < self.read:
            return None
        entry: dict[str, object] = {"file": str(source.path), "rows": self.read,
                                    "reasons": dict(self.reasons.most_common(3))}
        if self.unknown_markets:
            entry["markets"] = [m for m, _ in self.unknown_markets.most_common(5)]
        return entry


def ingest(sources: Sequence[Source], home: Path, cfg: IngestConfig | None = None,
           window: tuple[datetime, datetime] | None = None, progress: bool = True) -> IngestSummary:
    """Read, validate, quarantine and store ``sources``; only events inside ``window`` are stored.

    ``cfg`` None: the defaults overridden by ``<home>/xc.yaml`` (:func:`load_ingest_config`).
    """
    started = time.perf_counter()
    cfg, store = _opened(sources, home, cfg)
    phases = _Phases()
    staging = _Staging(home / ".staging" / f"{os.getpid()}-{uuid.uuid4().hex}")
    summary = IngestSummary()
    reasons: Counter[str] = Counter()
    flagged: Counter[str] = Counter()
    quarantine: list[pl.DataFrame] = []
    seen = SeenIds()
    try:
        for source in bar(sources, desc="ingest", unit="file", enabled=progress):
            tally = _SourceTally()
            for batch in _batches(source, cfg, seen, phases):
                with phases("count + quarantine"):
                    _count(summary, reasons, flagged, batch, tally)
                    events = batch.events
                    _widen_span(summary, events)
                    events = _in_window(events, window, summary)
                    quarantine.append(batch.quarantine)
                with phases("stage"):
                    if events.height:
                        staging.add(events)
            if (entry := tally.entry(source)) is not None:
                summary.rejected_files.append(entry)
        _store(store, staging, quarantine, summary, cfg, phases)
    finally:
        staging.discard()
    return _summed_up(summary, reasons, flagged, started, phases)


def _opened(sources: Sequence[Source], home: Path, cfg: IngestConfig | None) -> tuple[IngestConfig, EventStore]:
    """The settings (``cfg``, else the home's) and the store, once every source was found readable."""
    cfg = cfg or load_ingest_config(home)
    preflight(sources)
    store = EventStore(home)
    store.clean_stale()
    return cfg, store


def _in_window(events: pl.DataFrame, window: tuple[datetime, datetime] | None,
               summary: IngestSummary) -> pl.DataFrame:
    """``events`` inside ``window`` (all without one); the others counted as ``outside_window``."""
    if window is None or not events.height:
        return events
    inside = events.select((pl.col("ts") >= window[0]) & (pl.col("ts") < window[1])).to_series()
    if inside.all():
        return events
    summary.outside_window += int((~inside).sum())
    return events.filter(inside)


def _store(store: EventStore, staging: _Staging, quarantine: list[pl.DataFrame], summary: IngestSummary,
           cfg: IngestConfig, phases: _Phases) -> None:
    """The staged days merged into the store and the quarantine appended (phase 2 of the module docstring)."""
    with phases("stage"):
        staging.close()
    summary.accepted = summary.read - summary.rejected - summary.outside_window
    _commit(store, staging.days, quarantine, summary, cfg, phases)


def _summed_up(summary: IngestSummary, reasons: Counter[str], flagged: Counter[str], started: float,
               phases: _Phases) -> IngestSummary:
    summary.reasons = dict(sorted(reasons.items()))
    summary.flagged = dict(sorted(flagged.items()))
    summary.seconds = round(time.perf_counter() - started, 3)
    summary.phases = {name: round(seconds, 3) for name, seconds in phases.seconds.items()}
    log.info("ingested %s", summary.to_dict())
    return summary


def rejected_file_message(entry: dict[str, object], home: Path) -> str:
    """One line for a source whose rows were all rejected: file, rows, top reasons and the fix."""
    reasons = entry["reasons"]
    assert isinstance(reasons, dict)
    top = ", ".join(f"{reason} {count:,}" for reason, count in reasons.items())
    config = Path(home) / CONFIG_FILE
    first = next(iter(reasons), "")
    markets = ",".join(str(m) for m in entry.get("markets", []))  # type: ignore[attr-defined]  # a list when present
    fixes = {
        Reason.UNKNOWN_MARKET.value: f"markets {markets} are not accepted: use --markets {markets} (or '*' for any) "
                                     f"or set ingest.markets in {config}",
        Reason.QUERY_TOO_LONG.value: f"raise --max-query-chars or ingest.max_query_chars in {config}",
        Reason.TIMESTAMP_OUT_OF_RANGE.value: f"widen ingest.min_ts / ingest.max_ts in {config}",
        Reason.UNPARSABLE_TIMESTAMP.value: "write ts as 'YYYY-MM-DD hh:mm:ss' or ISO 8601",
        Reason.MISSING_FIELD.value: "every row needs a non-empty user_id and market",
        Reason.DUPLICATE_EVENT.value: "its events were already read earlier in this ingestion (a file given twice?)",
    }
    fix = fixes.get(first, "see the raw rows and details in the quarantine")
    return (f"all {entry['rows']:,} rows of {entry['file']} were rejected ({top}); fix: {fix}. "
            f"The rejected rows are in {EventStore(home).quarantine_path}")


def _widen_span(summary: IngestSummary, events: pl.DataFrame) -> None:
    if not events.height:
        return
    span = events.select(first=pl.col("ts").min().dt.to_string(), last=pl.col("ts").max().dt.to_string())
    first, last = str(span.item(0, "first")), str(span.item(0, "last"))
    summary.first_event = min(summary.first_event or first, first)
    summary.last_event = max(summary.last_event or last, last)


def event_span(sources: Sequence[Source], cfg: IngestConfig | None = None) -> tuple[date, date] | None:
    """First and last day of the valid events in ``sources`` (None when there are none): which daily
    partitions an ingestion of these files should cover. Reads and validates like :func:`ingest`, stores nothing."""
    cfg = cfg or IngestConfig()
    preflight(sources)
    summary = IngestSummary()
    for source in sources:
        for batch in _batches(source, cfg, SeenIds()):  # duplicates do not move a span
            _widen_span(summary, batch.events)
    if summary.first_event is None or summary.last_event is None:
        return None
    return datetime.fromisoformat(summary.first_event).date(), datetime.fromisoformat(summary.last_event).date()


def _count(summary: IngestSummary, reasons: Counter[str], flagged: Counter[str], batch: _Batch,
           tally: _SourceTally) -> None:
    summary.read += batch.read
    summary.query_events += batch.query_events
    summary.clicks += batch.clicks
    tally.read += batch.read
    q = batch.quarantine
    if q.is_empty():
        return
    rejected = dict(q.filter(pl.col("disposition") == "rejected").get_column("reason").value_counts().iter_rows())
    kept = dict(q.filter(pl.col("disposition") == "kept").get_column("reason").value_counts().iter_rows())
    reasons.update(rejected)
    flagged.update(kept)
    tally.reasons.update(rejected)
    tally.unknown_markets.update(batch.unknown_markets)
    summary.rejected += sum(rejected.values())
    tally.rejected += sum(rejected.values())


def _commit(store: EventStore, staged: dict[date, list[Path]], quarantine: list[pl.DataFrame],
            summary: IngestSummary, cfg: IngestConfig, phases: _Phases) -> None:
    with phases("store: merge, sessions, write days"):
        result = store.write_days(staged, cfg.session_gap_minutes, remove_files=True)
    summary.stored += result.new_events
    summary.already_stored += result.already_stored
    summary.days_written = len(result.days_written)
    with phases("quarantine + views"):
        added = store.append_quarantine(pl.concat(quarantine) if quarantine else pl.DataFrame(schema=QUARANTINE_SCHEMA))
        if not result.days_written and not added:
            with store.lock():  # duckdb allows one writing process per file: never open it beside another writer
                store.refresh_views()
