"""Ingestion with Spark as its engine: the same validation, on Spark's executors, into the same store.

What runs where:

- **on the executors, one task per source file**: reading, validation and event ids — :mod:`xc_core.logs.ingest`'s
  own batches (``_batches``), the same polars code the default engine runs, so there is one definition of every
  rule. Each task writes its accepted events and its quarantine rows to the staging folder (on a cluster, a folder
  every executor and the driver share) and returns its counts. This is the costly part of an ingestion: on
  aol-1000, reading, validating and hashing are ~55% of the default engine's time.
- **a Spark job over all the files' event ids**: the duplicates *across* files (each task found those within its
  file). As the default engine's one pass over the sources in order, the first occurrence is kept — the earlier
  source, then the earlier row — and the later ones are quarantined as ``duplicate_event``.
- **on the driver**: the window filter, the day split and the store's merge and sessions
  (:meth:`~xc_core.logs.store.EventStore.write_days`, as the default engine): the store is this home's folder of
  day files. (Sessions over a whole span can also be cut on Spark: ``logs.sessions.sessionise_on_spark``.)

The store, the summary counts and the quarantine's reasons equal the default engine's (tests/engines). One
difference: a duplicate found across files is quarantined (at its file and line) with its canonical row as ``raw``,
where the default engine quotes the raw line. pyspark is the optional extra ``scale``.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from xc_core.logs.config import IngestConfig
from xc_core.logs.ingest import (
    IngestSummary,
    Source,
    _batches,
    _count,
    _in_window,
    _opened,
    _Phases,
    _SourceTally,
    _Staging,
    _store,
    _summed_up,
    _widen_span,
)
from xc_core.logs.schema import QUARANTINE_SCHEMA, Reason
from xc_core.logs.validate import SeenIds, hex16

ORDER, ORIGIN = "_order", "_source"  # a staged event's row in its file, and its file's place among the sources


def validate_file(index: int, source: Source, cfg: IngestConfig, staging: str) -> dict[str, Any]:
    """One source validated as the default engine validates it (an executor's task): its accepted events and
    quarantine rows written under ``staging``, its counts returned."""
    folder = Path(staging)
    summary, reasons, flagged, tally = IngestSummary(), Counter[str](), Counter[str](), _SourceTally()
    events: list[pl.DataFrame] = []
    quarantine: list[pl.DataFrame] = []
    done = 0
    for batch in _batches(source, cfg, SeenIds()):
        _count(summary, reasons, flagged, batch, tally)
        _widen_span(summary, batch.events)
        part = batch.events.drop("session_seed")
        if batch.origin is not None:  # where each event was read: a later file's repeat is quarantined by it
            part = pl.concat([part, batch.origin.select(pl.col("source_file").alias("_file"),
                                                        pl.col("line_no").alias("_line"))], how="horizontal")
        events.append(part.with_columns(pl.int_range(done, done + part.height, dtype=pl.Int64).alias(ORDER)))
        done += part.height
        quarantine.append(batch.quarantine)
    paths = {"events": folder / f"events-{index:06d}.parquet", "quarantine": folder / f"quarantine-{index:06d}.parquet"}
    staged = pl.concat(events) if events else pl.DataFrame()
    if staged.height:
        staged = staged.with_columns(_key=hex16(staged.get_column("event_id")), **{ORIGIN: pl.lit(index, pl.Int64)})
    staged.write_parquet(paths["events"])
    pl.concat([pl.DataFrame(schema=QUARANTINE_SCHEMA), *quarantine]).write_parquet(paths["quarantine"])
    return {"index": index, "summary": asdict(summary), "reasons": dict(reasons), "flagged": dict(flagged),
            "tally": {"read": tally.read, "rejected": tally.rejected, "reasons": dict(tally.reasons),
                      "unknown_markets": dict(tally.unknown_markets)},
            "events": str(paths["events"]), "quarantine": str(paths["quarantine"]), "rows": staged.height}


def _validate_on_spark(spark: Any, sources: Sequence[Source], cfg: IngestConfig, staging: Path) -> list[dict[str, Any]]:
    """Every source validated by a task of its own, in source order."""
    jobs = list(enumerate(sources))
    where = str(staging)
    found = spark.sparkContext.parallelize(jobs, max(1, len(jobs))).map(
        lambda job: validate_file(job[0], job[1], cfg, where)).collect()
    return sorted(found, key=lambda f: f["index"])


def _duplicates_across_files(spark: Any, files: list[dict[str, Any]]) -> pl.DataFrame:
    """``_source, _order`` of every staged event whose id an earlier file (or an earlier row) holds too."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    paths = [f["events"] for f in files if f["rows"]]
    if len(paths) < 2:  # a task already rejected the duplicates within its own file
        return pl.DataFrame(schema={ORIGIN: pl.Int64, ORDER: pl.Int64})
    ids = spark.read.parquet(*paths).select("_key", ORIGIN, ORDER)
    first = Window.partitionBy("_key").orderBy(ORIGIN, ORDER)
    later = ids.withColumn("_rank", F.row_number().over(first)).where(F.col("_rank") > 1).select(ORIGIN, ORDER)
    found = pl.from_arrow(later.toArrow())
    assert isinstance(found, pl.DataFrame)  # a table converts to a frame
    return found.cast({ORIGIN: pl.Int64, ORDER: pl.Int64})


def _duplicate_rows(events: pl.DataFrame, source: Source) -> pl.DataFrame:
    """Quarantine rows of events rejected as repeats of an earlier file's (their canonical row as ``raw``)."""
    shown = [c for c in events.columns if c not in ("_key", ORIGIN, ORDER, "event_id", "_file", "_line")]
    return events.select(
        source_file=pl.col("_file") if "_file" in events.columns else pl.lit(str(source.path)),
        line_no=pl.col("_line").cast(pl.Int64) if "_line" in events.columns else pl.lit(None, pl.Int64),
        raw=pl.struct([pl.col(c).cast(pl.String) for c in shown]).struct.json_encode(),
        reason=pl.lit(Reason.DUPLICATE_EVENT.value), disposition=pl.lit("rejected"),
        detail="same event as an earlier record (event_id " + pl.col("_key") + ")",
        ingested_at=pl.lit(datetime.now(UTC)).cast(QUARANTINE_SCHEMA["ingested_at"]))


def ingest_on_spark(sources: Sequence[Source], home: Path, cfg: IngestConfig | None = None,
                    window: tuple[datetime, datetime] | None = None, master: str = "local[2]") -> IngestSummary:
    """:func:`xc_core.logs.ingest.ingest` with the sources validated on Spark (``master``: ``local[2]`` here, a
    cluster's URL elsewhere; an active session is used as it is). The same summary, store and quarantine."""
    from xc_core.engines.spark import spark_session

    started = time.perf_counter()
    cfg, store = _opened(sources, home, cfg)
    phases = _Phases()
    folder = home / ".staging" / f"spark-{os.getpid()}-{uuid.uuid4().hex}"
    folder.mkdir(parents=True)
    staging = _Staging(folder / "days")
    summary, reasons, flagged = IngestSummary(), Counter[str](), Counter[str]()
    quarantine: list[pl.DataFrame] = []
    try:
        with spark_session(master, "xc-ingest") as spark:
            with phases("read + validate + event ids (spark)"):
                files = _validate_on_spark(spark, sources, cfg, folder)
            with phases("duplicates across files (spark)"):
                repeats = _duplicates_across_files(spark, files)
        for found, source in zip(files, sources, strict=True):
            with phases("count + quarantine"):
                _add(summary, found)
                reasons.update(found["reasons"])
                flagged.update(found["flagged"])
                events = pl.read_parquet(found["events"]) if found["rows"] else pl.DataFrame()
                quarantine.append(pl.read_parquet(found["quarantine"]))
                gone = repeats.filter(pl.col(ORIGIN) == found["index"]).get_column(ORDER)
                if len(gone):
                    repeated = events.get_column(ORDER).is_in(gone.implode())
                    quarantine.append(_duplicate_rows(events.filter(repeated), source))
                    events = events.filter(~repeated)
                    summary.rejected += len(gone)
                    reasons[Reason.DUPLICATE_EVENT.value] += len(gone)
                    found["tally"]["rejected"] += len(gone)
                    found["tally"]["reasons"][Reason.DUPLICATE_EVENT.value] = (
                        found["tally"]["reasons"].get(Reason.DUPLICATE_EVENT.value, 0) + len(gone))
                events = _in_window(events, window, summary)
            with phases("stage"):
                if events.height:
                    staging.add(events.drop("_key", ORIGIN, ORDER, "_file", "_line", strict=False))
            if (entry := _tally(found["tally"]).entry(source)) is not None:
                summary.rejected_files.append(entry)
        _store(store, staging, quarantine, summary, cfg, phases)
    finally:
        staging.discard()
        shutil.rmtree(folder, ignore_errors=True)
    return _summed_up(summary, reasons, flagged, started, phases)


def _add(summary: IngestSummary, found: dict[str, Any]) -> None:
    """A task's counts into the ingestion's."""
    part = found["summary"]
    for key in ("read", "query_events", "clicks", "rejected"):
        setattr(summary, key, getattr(summary, key) + part[key])
    for key, pick in (("first_event", min), ("last_event", max)):
        if part[key] is not None:
            current = getattr(summary, key)
            setattr(summary, key, part[key] if current is None else pick(current, part[key]))


def _tally(found: dict[str, Any]) -> _SourceTally:
    return _SourceTally(found["read"], found["rejected"], Counter(found["reasons"]), Counter(found["unknown_markets"]))
