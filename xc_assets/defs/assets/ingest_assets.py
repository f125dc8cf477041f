"""Ingestion assets: ``raw_events`` (daily partitions) and ``quarantine``; both call xc_core.logs.

No ``from __future__ import annotations`` here: Dagster reads the Config/resource annotations at runtime.
"""

import warnings
from datetime import datetime
from pathlib import Path
from typing import Literal

import dagster as dg
import polars as pl
from pydantic import Field

from xc_assets.defs.constants import INGEST_GROUP
from xc_assets.defs.partitions import daily_partitions
from xc_assets.defs.resources import XcHome
from xc_core.logs.config import load_ingest_config
from xc_core.logs.errors import IngestError, NothingStoredError
from xc_core.logs.ingest import IngestSummary, Source, SourceKind, rejected_file_message
from xc_core.paths import aol_archive
from xc_core.stages.ingest import ingest_files, rejected_files

# BackfillPolicy is "beta" in Dagster 1.13; single-run backfills are what make a 92-day ingest one read.
warnings.filterwarnings("ignore", category=dg.BetaWarning)


class RawEventsConfig(dg.Config):
    """Which raw logs to ingest. ``simulated`` (the default) reads the simulated_events day files of the
    partition window; ``aol`` with empty ``paths`` reads the shared aol-1000 archive."""

    source: Literal["simulated", "aol", "events"] = Field(
        default="simulated", description="simulated day files, aol block files, or canonical event files")
    paths: list[str] = Field(default_factory=list, description="files to read")
    # None: ingest.<name> in <home>/xc.yaml, else the default (run config > home file > default)
    markets: list[str] | None = Field(
        default=None, description="accepted markets, e.g. [zh-CN, en-US]; ['*']: any (default: any)")
    max_query_chars: int | None = Field(default=None, description="longer queries are quarantined (default 512)")
    session_gap_minutes: float | None = Field(
        default=None, description="inactivity that starts a new session (default 30)")


def markdown_table(frame: pl.DataFrame, limit: int = 10) -> str:
    if frame.is_empty():
        return "_none_"
    head = frame.head(limit).with_columns(pl.all().cast(pl.String).str.replace_all(r"\|", "/").str.slice(0, 80))
    lines = ["| " + " | ".join(head.columns) + " |", "|" + "---|" * len(head.columns)]
    lines += ["| " + " | ".join("" if v is None else v for v in row) + " |" for row in head.iter_rows()]
    return "\n".join(lines)


def png_markdown(path: Path) -> str:
    """A PNG embedded in markdown metadata, so the plot shows in the Dagster UI itself."""
    import base64

    return f"![{path.name}](data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()})"


def _default_paths(source: str, xc_home: XcHome, start: datetime, end: datetime) -> list[Path]:
    if source == "aol":
        return [aol_archive()]
    if source == "simulated":
        from xc_core.simulate.pipeline import days_in_window, load_current_world, simulated_day_files

        sim = load_current_world(xc_home.path)
        return simulated_day_files(sim, xc_home.path, days_in_window(sim.config, start, end))
    raise dg.Failure("source 'events' needs config paths: canonical Parquet/CSV/TSV/JSON Lines files")


@dg.asset(
    deps=["simulated_events"],
    partitions_def=daily_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name=INGEST_GROUP,
    kinds={"polars", "parquet", "duckdb"},
    retry_policy=dg.RetryPolicy(max_retries=2, delay=5),
    description="Validated canonical events, Parquet partitioned by day, with duckdb views (xc_core.logs).",
)
def raw_events(context: dg.AssetExecutionContext, config: RawEventsConfig, xc_home: XcHome) -> dg.MaterializeResult:
    window = context.partition_time_window
    paths = [Path(p) for p in config.paths] or _default_paths(config.source, xc_home, window.start, window.end)
    kind: SourceKind = "aol" if config.source == "aol" else "events"
    try:
        cfg = load_ingest_config(xc_home.path, markets=config.markets, max_query_chars=config.max_query_chars,
                                 session_gap_minutes=config.session_gap_minutes)
    except IngestError as exc:  # a bad xc.yaml or run config: say which key, no retry would help
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    try:  # the stage's one rule: a run that stored nothing (and found nothing stored) fails, saying why
        summary = ingest_files([Source(kind, p) for p in paths], xc_home.path, cfg, window=(window.start, window.end))
    except NothingStoredError as exc:
        missed = exc.summary
        assert isinstance(missed, IngestSummary)
        raise dg.Failure(description=" ".join([str(exc), *rejected_files(missed, xc_home.path)]), metadata={
            "rows_read": missed.read, "rows_rejected": missed.rejected,
            "rows_outside_partitions": missed.outside_window}, allow_retries=False) from exc  # same input, same end
    context.log.info(f"ingested {summary.to_dict()}")
    for entry in summary.rejected_files:  # a file that gave nothing must not pass unnoticed
        context.log.warning(rejected_file_message(entry, xc_home.path))
    rejects = xc_home.event_store().read_quarantine().filter(pl.col("disposition") == "rejected")
    return dg.MaterializeResult(metadata={
        "rows_read": summary.read,
        "rows_accepted": summary.accepted,
        "rows_rejected": summary.rejected,
        "rows_outside_partitions": summary.outside_window,
        "events_stored": summary.stored,
        "events_already_stored": summary.already_stored,
        "rejects_by_reason": summary.reasons,
        "flagged_by_reason": summary.flagged,
        "reject_sample": dg.MetadataValue.md(markdown_table(
            rejects.select("source_file", "line_no", "reason", "detail", "raw"))),
        "store": dg.MetadataValue.path(str(xc_home.event_store().events_dir)),
        "seconds": summary.seconds,
    })


@dg.asset(
    deps=[raw_events],
    group_name=INGEST_GROUP,
    kinds={"parquet", "duckdb"},
    description="Every record that did not make it into raw_events, with its raw text, file, line and reason.",
)
def quarantine(context: dg.AssetExecutionContext, xc_home: XcHome) -> dg.MaterializeResult:
    table = xc_home.event_store().read_quarantine()
    by_reason = table.group_by("reason", "disposition").len().sort("len", descending=True)
    context.log.info(f"quarantine holds {table.height} rows")
    return dg.MaterializeResult(metadata={
        "rows": table.height,
        "rejected": table.filter(pl.col("disposition") == "rejected").height,
        "kept_with_flag": table.filter(pl.col("disposition") == "kept").height,
        "by_reason": dg.MetadataValue.md(markdown_table(by_reason, 50)),
        "sample": dg.MetadataValue.md(markdown_table(table.select("source_file", "line_no", "reason", "raw"))),
        "path": dg.MetadataValue.path(str(xc_home.event_store().quarantine_path)),
    })
