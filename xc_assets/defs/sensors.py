"""Sensors: a landing folder for raw log files (each file ingested exactly once), and run failures made
visible. The landing folder is ``$XC_LANDING`` or ``<home>/landing``."""

import hashlib
import json
import os
from pathlib import Path

import dagster as dg

from xc_assets.defs.jobs import ingest_job

LANDING_SUFFIXES = (".tgz", ".txt", ".parquet", ".csv", ".tsv", ".jsonl", ".ndjson")


def landing_dir() -> Path:
    from xc_core.paths import resolve_home

    return Path(os.environ.get("XC_LANDING") or resolve_home() / "landing")


def file_run_key(path: Path) -> str:
    """Name + content hash: a re-delivered identical file maps to the same key, so it never runs twice."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return f"{path.name}:{digest}"


@dg.sensor(job=ingest_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.STOPPED,
           description="Launches ingestion for each new raw log file in the landing folder, exactly once")
def landing_folder_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    folder = landing_dir()
    files = sorted(p for p in folder.glob("*") if p.suffix in LANDING_SUFFIXES) if folder.exists() else []
    requests = []
    for path in files:
        source = "aol" if path.suffix in (".tgz", ".txt") else "events"
        requests.append(dg.RunRequest(
            run_key=file_run_key(path),
            run_config={"ops": {"raw_events": {"config": {"source": source, "paths": [str(path)]}}}},
            tags={"dagster/asset_partition_range_start": "2006-03-01",
                  "dagster/asset_partition_range_end": "2006-05-31", "xc/landing_file": path.name}))
    return dg.SensorResult(run_requests=requests)


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING,
                       description="Records every failed run in <home>/run_failures.jsonl and the Dagster log")
def record_run_failures(context: dg.RunFailureSensorContext) -> None:
    from xc_core.paths import resolve_home

    record = {"run_id": context.dagster_run.run_id, "job": context.dagster_run.job_name,
              "error": context.failure_event.message}
    with open(resolve_home() / "run_failures.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    context.log.error(f"run {record['run_id']} of {record['job']} failed: {record['error']}")
