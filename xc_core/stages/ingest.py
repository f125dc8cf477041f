"""``xc ingest`` and the ``raw_events`` asset: raw log files → validated events in the home's store + quarantine.

One failure rule for both: a run that stores no event and finds none already stored fails, saying why (no rows,
every row rejected, or every valid event outside the run's days) and what to do."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from xc_core.paths import aol_archive, resolve_home
from xc_core.stages import Command, Payload, register

if TYPE_CHECKING:
    from xc_core.logs.config import IngestConfig
    from xc_core.logs.ingest import IngestSummary, Source


def nothing_stored(summary: IngestSummary, files: int, home: Path,
                   window: tuple[datetime, datetime] | None = None) -> str | None:
    """Why an ingestion stored no event and what to do, or None when it stored (or had already stored) some. What
    each rejected file held is for the caller to show beside it (:func:`rejected_files`)."""
    if summary.stored or summary.already_stored:
        return None
    days = f" (partitions {window[0].date()} .. {(window[1] - timedelta(days=1)).date()})" if window else ""
    if summary.read == 0:
        return f"stored no events: the input ({files} file(s)) has no rows{days}"
    if summary.first_event is None:
        return (f"stored no events: nothing accepted from {files} file(s): all {summary.rejected:,} of "
                f"{summary.read:,} rows were rejected, the rejected rows are in the quarantine{days} "
                "(--markets and the other options, or the run config, override <home>/xc.yaml)")
    return (f"stored no events: the valid events read lie between {summary.first_event} and {summary.last_event}, "
            f"outside this run's days{days} ({summary.outside_window} rows); run it for those dates (the landing "
            "sensor does so from the file's own dates)")


def rejected_files(summary: IngestSummary, home: Path) -> list[str]:
    """One line per file that gave nothing: what it held and what to do (a file must not fail unnoticed)."""
    from xc_core.logs.ingest import rejected_file_message

    return [rejected_file_message(entry, home) for entry in summary.rejected_files]


def ingest_files(sources: list[Source], home: Path, cfg: IngestConfig,
                 window: tuple[datetime, datetime] | None = None, progress: bool = False) -> IngestSummary:
    """Ingest ``sources`` into the home's store (only events inside ``window`` when given).

    Args:
        sources: the files to read, each with its format.
        home: the data root holding the event store.
        cfg: the ingestion settings (engine, quarantine, limits).
        window: the (first, last) timestamps to keep; None keeps every event.
        progress: show progress bars.

    Returns:
        What the ingestion read and did (:class:`~xc_core.logs.ingest.IngestSummary`).

    Raises:
        NothingStoredError: the run stored nothing (:func:`nothing_stored` says why).
    """
    from xc_core.logs.errors import NothingStoredError
    from xc_core.logs.ingest import ingest

    if cfg.engine == "spark":  # each file validated by a Spark task, the same store
        from xc_core.logs.spark_ingest import ingest_on_spark

        summary = ingest_on_spark(sources, home, cfg, window=window, master=cfg.spark_master)
    else:
        summary = ingest(sources, home, cfg, window=window, progress=progress)
    why = nothing_stored(summary, len(sources), home, window)
    if why is not None:
        raise NothingStoredError(why, summary)
    return summary


def _arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--source", choices=["aol", "events"], required=True)
    command.add_argument("paths", nargs="*", help="files to ingest (default for aol: the shared aol-1000 archive)")
    command.add_argument("--markets", help="accepted markets, comma separated, e.g. zh-CN,en-US; '*': any "
                                           "(default: ingest.markets in <home>/xc.yaml, else any)")
    command.add_argument("--max-query-chars", type=int, help="longer queries are quarantined (default 512)")
    command.add_argument("--session-gap-minutes", type=float,
                         help="inactivity that starts a new session (default 30)")
    command.add_argument("--engine", choices=["default", "spark"],
                         help="where the files are validated: this process (default) or Spark tasks "
                              "(ingest.engine in <home>/xc.yaml, env XC_INGEST_ENGINE; master: XC_SPARK_MASTER)")


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.logs.config import load_ingest_config
    from xc_core.logs.errors import NothingStoredError
    from xc_core.logs.ingest import IngestSummary, Source

    paths = [Path(p) for p in args.paths] or ([aol_archive()] if args.source == "aol" else [])
    if not paths:
        raise SystemExit("xc ingest --source events needs at least one PATH (Parquet, CSV/TSV or JSON Lines)")
    home = resolve_home(args.home)
    cfg = load_ingest_config(home, markets=args.markets, max_query_chars=args.max_query_chars,
                             session_gap_minutes=args.session_gap_minutes, engine=args.engine)
    try:
        summary = ingest_files([Source(args.source, p) for p in paths], home, cfg, progress=not args.quiet)
    except NothingStoredError as exc:
        assert isinstance(exc.summary, IngestSummary)
        _print_rejected(exc.summary, home)  # each file's line, then the error's
        raise
    _print_rejected(summary, home)
    return summary.to_dict()


def _print_rejected(summary: IngestSummary, home: Path) -> None:
    for line in rejected_files(summary, home):
        print(f"xc ingest: {line}", file=sys.stderr)


COMMAND = register(Command("ingest", "raw logs → event store + quarantine", _arguments, _run,
                           docs="docs/data.md", assets=("raw_events", "quarantine")))
