"""Ingestion: raw sources → validated canonical events in the store, every bad record in quarantine.

Two phases so that a source that cannot be read leaves nothing behind: (1) read and validate every
source, staging accepted batches and quarantine rows under ``<home>/.staging``; (2) merge the staged
batches into the event store. Invariant, per ingestion: ``accepted + rejected + outside_window == read``.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal

import polars as pl
from tqdm.auto import tqdm

from xc_core.logs import aol, generic
from xc_core.logs.config import IngestConfig
from xc_core.logs.errors import IngestError
from xc_core.logs.schema import EVENT_SCHEMA, INPUT_SCHEMA, QUARANTINE_SCHEMA, Reason
from xc_core.logs.store import EventStore
from xc_core.logs.validate import apply_rules, canonical, event_ids, mark_duplicates, no_ids_seen

log = logging.getLogger(__name__)
SourceKind = Literal["aol", "events"]


@dataclass(frozen=True)
class Source:
    kind: SourceKind
    path: Path


@dataclass
class IngestSummary:
    """What one ingestion read and did; ``reasons`` counts rejects, ``flagged`` rows kept with a flag."""

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
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class _Batch:
    """One validated batch: canonical events (with event_id) and quarantine rows."""

    events: pl.DataFrame
    quarantine: pl.DataFrame
    query_events: int
    clicks: int
    read: int


def _quarantine_rows(records: pl.DataFrame, mask: pl.Expr, reason: pl.Expr, disposition: str) -> pl.DataFrame:
    rows = records.filter(mask)
    if rows.is_empty():
        return pl.DataFrame(schema=QUARANTINE_SCHEMA)
    fallback = pl.struct([pl.col(c).cast(pl.String) for c in INPUT_SCHEMA if c in rows.columns]).struct.json_encode()
    return rows.select(
        "source_file", "line_no",
        raw=pl.coalesce(pl.col("raw"), fallback),
        reason=reason, disposition=pl.lit(disposition), detail=pl.col("detail"),
        ingested_at=pl.lit(datetime.now(UTC)).cast(QUARANTINE_SCHEMA["ingested_at"]),
    )


def _with_duplicates(records: pl.DataFrame, valid: pl.Expr, seen: pl.Series) -> tuple[pl.DataFrame, pl.Series]:
    """Give valid records an ``event_id`` and turn repeats into ``duplicate_event`` rejects."""
    ok = records.filter(valid)
    if ok.is_empty():
        return records.with_columns(event_id=pl.lit(None, dtype=pl.String)), seen
    ok = ok.with_columns(event_id=event_ids(canonical(ok)))
    duplicate, seen = mark_duplicates(ok, seen)
    ok = ok.with_columns(
        reason=pl.when(duplicate).then(pl.lit(Reason.DUPLICATE_EVENT.value)).otherwise(pl.col("reason")),
        detail=pl.when(duplicate).then(pl.format("same event as an earlier record (event_id {})", pl.col("event_id")))
        .otherwise(pl.col("detail")),
    )
    return pl.concat([records.filter(~valid).with_columns(event_id=pl.lit(None, dtype=pl.String)), ok],
                     how="vertical_relaxed"), seen


def _finish(records: pl.DataFrame, emit: pl.Expr, query_events: int, clicks: int) -> _Batch:
    rejected = _quarantine_rows(records, pl.col("reason").is_not_null(), pl.col("reason"), "rejected")
    flagged = _quarantine_rows(records.with_columns(detail=pl.lit("bytes were not UTF-8; decoded with U+FFFD")),
                               pl.col("reason").is_null() & pl.col("invalid_utf8"),
                               pl.lit(Reason.INVALID_UTF8.value), "kept")
    events = records.filter(pl.col("reason").is_null() & emit)
    events = pl.concat([events.select("event_id"), canonical(events)], how="horizontal")
    return _Batch(events, pl.concat([rejected, flagged]), query_events, clicks, records.height)


def _aol_batches(path: Path, cfg: IngestConfig, seen: pl.Series) -> Iterator[tuple[_Batch, pl.Series]]:
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
    # A click's event is its own row; a query line yields a row only when none of its clicks was kept.
    records, seen = _with_duplicates(
        records,
        pl.col("reason").is_null() & ~(pl.col("is_query") & pl.col("record").is_in(
            clicks.filter(pl.col("reason").is_null()).get_column("parent").implode())),
        seen,
    )
    kept_click_parents = records.filter(~pl.col("is_query") & pl.col("reason").is_null()).get_column("parent")
    emit = ~(pl.col("is_query") & pl.col("record").is_in(kept_click_parents.implode()))
    n_queries = int(records.get_column("is_query").sum())
    yield _finish(records, emit, n_queries, records.height - n_queries), seen


def _generic_batches(path: Path, cfg: IngestConfig, seen: pl.Series) -> Iterator[tuple[_Batch, pl.Series]]:
    for records in generic.iter_generic(path, cfg.batch_rows):
        records = apply_rules(records, cfg)
        records, seen = _with_duplicates(records, pl.col("reason").is_null(), seen)
        query_events = records.select(pl.struct("user_id", "ts", "query_text").n_unique()).item()
        clicks = int(records.get_column("clicked").fill_null(False).sum())
        yield _finish(records, pl.lit(True), query_events, clicks), seen


def _batches(source: Source, cfg: IngestConfig, seen: pl.Series) -> Iterator[tuple[_Batch, pl.Series]]:
    """A source's validated batches, read as its kind says (AOL block files or canonical event files)."""
    reader = _aol_batches if source.kind == "aol" else _generic_batches
    return reader(source.path, cfg, seen)


def preflight(sources: Sequence[Source]) -> None:
    """Fail fast, before reading anything, on sources that are missing or of an unknown type."""
    for source in sources:
        if source.kind == "events":
            generic.file_kind(source.path)
        elif not source.path.exists():
            raise IngestError(source.path, "file not found", "the AOL archive user_search_logs.tgz")


def ingest(sources: Sequence[Source], home: Path, cfg: IngestConfig | None = None,
           window: tuple[datetime, datetime] | None = None, progress: bool = True) -> IngestSummary:
    """Read, validate, quarantine and store ``sources``; only events inside ``window`` are stored."""
    cfg = cfg or IngestConfig()
    started = time.perf_counter()
    preflight(sources)
    store = EventStore(home)
    store.clean_stale()
    staging = home / ".staging" / f"{os.getpid()}-{uuid.uuid4().hex}"
    summary = IngestSummary()
    reasons: Counter[str] = Counter()
    flagged: Counter[str] = Counter()
    staged: list[Path] = []
    quarantine: list[pl.DataFrame] = []
    seen = no_ids_seen()
    try:
        for source in tqdm(sources, desc="ingest", unit="file", disable=not progress):
            for batch, grown in _batches(source, cfg, seen):
                seen = grown  # the ids seen so far: the next source's batches start from them
                _count(summary, reasons, flagged, batch)
                events = batch.events
                _widen_span(summary, events)
                if window is not None:
                    inside = (pl.col("ts") >= window[0]) & (pl.col("ts") < window[1])
                    summary.outside_window += events.filter(~inside).height
                    events = events.filter(inside)
                if events.height:
                    staged.append(staging / f"batch-{len(staged):05d}.parquet")
                    staged[-1].parent.mkdir(parents=True, exist_ok=True)
                    events.write_parquet(staged[-1], compression="lz4")  # scratch: speed over size
                quarantine.append(batch.quarantine)
        summary.accepted = summary.read - summary.rejected - summary.outside_window
        _commit(store, staged, quarantine, summary, cfg)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    summary.reasons = dict(sorted(reasons.items()))
    summary.flagged = dict(sorted(flagged.items()))
    summary.seconds = round(time.perf_counter() - started, 3)
    log.info("ingested %s", summary.to_dict())
    return summary


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
        for batch, _ in _batches(source, cfg, no_ids_seen()):  # duplicates do not move a span
            _widen_span(summary, batch.events)
    if summary.first_event is None or summary.last_event is None:
        return None
    return datetime.fromisoformat(summary.first_event).date(), datetime.fromisoformat(summary.last_event).date()


def _count(summary: IngestSummary, reasons: Counter[str], flagged: Counter[str], batch: _Batch) -> None:
    summary.read += batch.read
    summary.query_events += batch.query_events
    summary.clicks += batch.clicks
    q = batch.quarantine
    rejected = q.filter(pl.col("disposition") == "rejected").get_column("reason").value_counts()
    kept = q.filter(pl.col("disposition") == "kept").get_column("reason").value_counts()
    reasons.update(dict(rejected.iter_rows()))
    flagged.update(dict(kept.iter_rows()))
    summary.rejected += int(rejected.get_column("count").sum()) if rejected.height else 0


def _commit(store: EventStore, staged: list[Path], quarantine: list[pl.DataFrame], summary: IngestSummary,
            cfg: IngestConfig) -> None:
    days: set[object] = set()
    for path in staged:
        result = store.write_events(pl.read_parquet(path).select(["event_id", *INPUT_SCHEMA]), cfg.session_gap_minutes)
        summary.stored += result.new_events
        summary.already_stored += result.already_stored
        days.update(result.days_written)
    summary.days_written = len(days)
    store.append_quarantine(pl.concat(quarantine) if quarantine else pl.DataFrame(schema=QUARANTINE_SCHEMA))
    with store.lock():  # duckdb allows one writing process per file: never open it beside another writer
        store.refresh_views()
    assert set(EVENT_SCHEMA) >= set(INPUT_SCHEMA)
