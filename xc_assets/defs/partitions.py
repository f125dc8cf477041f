from pathlib import Path

import dagster as dg

from xc_assets.defs.constants import PARTITIONS_END, PARTITIONS_START

#: end_offset=1: today's (still open) day is a partition too, so a file landing today can be ingested today.
daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITIONS_START, end_date=PARTITIONS_END, timezone="UTC",
                                                end_offset=0 if PARTITIONS_END else 1)


def partition_range(paths: list[Path], source: str) -> tuple[str, str] | None:
    """The daily partitions the files' events fall on (first, last day), clipped to the partition set; None
    when they hold no valid event (the run would store nothing)."""
    from xc_core.logs.config import load_ingest_config
    from xc_core.logs.ingest import Source, event_span
    from xc_core.paths import resolve_home

    # the home's ingest settings (markets, …): a file whose every row they reject requests no run
    cfg = load_ingest_config(resolve_home())
    span = event_span([Source("aol" if source == "aol" else "events", path) for path in paths], cfg)
    if span is None:
        return None
    keys = daily_partitions.get_partition_keys()
    first, last = max(span[0].isoformat(), keys[0]), min(span[1].isoformat(), keys[-1])
    return (first, last) if first <= last else None
