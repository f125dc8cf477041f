"""Names and defaults shared by the Dagster definitions (thresholds live in configs, not here)."""

import os
from datetime import date

from xc_core.paths import resolve_home


def prefix(dataset: str) -> str:
    """A data set's asset group and key prefix (``aol-1000`` → ``aol_1000``: Dagster names allow no dash)."""
    return dataset.replace("-", "_")


#: a method partition's steps, in order: the one list the jobs, the sensors, ``xc run`` and ``xc results`` derive
#: from (``xc_assets.launch``)
METHOD_STEPS = ("encoder", "label_index", "offline_eval", "ab_vs_control")


def op_name(dataset: str, asset: str) -> str:
    """The run-config key of the op that materializes a data set's ``asset`` (Dagster names it after the key)."""
    return f"{prefix(dataset)}__{asset}"


#: The simulator's default calendar starts on the AOL log's first day: partitions start there at the latest.
DEFAULT_PARTITIONS_START = "2006-03-01"


def partitions_start() -> str:
    """The first daily partition: ``XC_PARTITIONS_START``, else ``partitions.start`` in ``<home>/xc.yaml``, else the
    simulator's default first day — moved earlier when the served home's store holds older days, so every ingested
    day (any log's, any year) is a partition the UI can materialize and backfill."""
    chosen = os.environ.get("XC_PARTITIONS_START") or _configured_start() or DEFAULT_PARTITIONS_START
    stored = _first_stored_day()
    return min(chosen, stored) if stored else chosen


def _configured_start() -> str | None:
    import yaml

    path = resolve_home() / "xc.yaml"
    if not path.exists():
        return None
    body = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    start = (body.get("partitions") or {}).get("start") if isinstance(body, dict) else None
    if start is None:
        return None
    try:
        return date.fromisoformat(str(start)).isoformat()
    except ValueError as err:
        raise ValueError(f"{path}: partitions.start {start!r} is not a date (YYYY-MM-DD)") from err


def _first_stored_day() -> str | None:
    """The earliest day in the served home's event store (its day folders are named ``day=YYYY-MM-DD``)."""
    days = sorted(p.name.removeprefix("day=") for p in (resolve_home() / "events").glob("day=*"))
    return days[0] if days else None


#: The daily partitions: from :func:`partitions_start` up to today, growing each day, so logs dated today have a
#: partition. ``XC_PARTITIONS_END`` (exclusive, YYYY-MM-DD) pins the end.
PARTITIONS_START = partitions_start()
PARTITIONS_END = os.environ.get("XC_PARTITIONS_END") or None

INGEST_GROUP = "ingestion"

#: The data set the nightly chain operates (rebuild → train/eval → report → gate): its asset group and jobs.
#: Any event-log data set, built in or defined in the home; ``XC_DATASET`` picks another than the embedded simulator.
OPERATED_DATASET = os.environ.get("XC_DATASET", "synthetic")
