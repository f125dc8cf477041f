"""Sensors: a landing folder for raw log files (each file ingested exactly once, over the days its events fall
on), one for novel keyword files (each streamed into IRENE's index exactly once), the nightly chain, and run
failures made visible. The landing folders are ``$XC_LANDING`` or ``<home>/landing``, and ``$XC_KEYWORD_LANDING``
or ``<home>/landing/keywords``."""

import hashlib
import json
import os
from pathlib import Path

import dagster as dg

from xc_assets.defs.constants import OPERATED_DATASET, op_name
from xc_assets.defs.jobs import (
    add_keywords_job,
    ingest_job,
    promotion_job,
    report_job,
    retrain_job,
    train_eval_job,
)
from xc_assets.defs.partitions import daily_partitions, partition_range

LANDING_SUFFIXES = (".tgz", ".txt", ".parquet", ".csv", ".tsv", ".jsonl", ".ndjson")


def landing_dir() -> Path:
    from xc_core.paths import resolve_home

    return Path(os.environ.get("XC_LANDING") or resolve_home() / "landing")


def file_run_key(path: Path) -> str:
    """Name + content hash: a re-delivered identical file maps to the same key, so it never runs twice."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return f"{path.name}:{digest}"


@dg.sensor(job=ingest_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.STOPPED,
           description="Launches ingestion for each new raw log file in the landing folder, exactly once, over "
                       "the days its events fall on")
def landing_folder_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    folder = landing_dir()
    files = sorted(p for p in folder.glob("*") if p.suffix in LANDING_SUFFIXES) if folder.exists() else []
    done = set(json.loads(context.cursor)) if context.cursor else set()
    requests, skipped = [], []
    for path in files:
        key = file_run_key(path)
        if key in done:  # read once: the dates of a file already requested are not parsed again every tick
            continue
        done.add(key)
        source = "aol" if path.suffix in (".tgz", ".txt") else "events"
        days = partition_range([path], source)
        if days is None:
            skipped.append(f"{path.name}: no valid event on a partition day ({daily_partitions.start:%Y-%m-%d} "
                           "onwards); nothing to ingest")
            continue
        requests.append(dg.RunRequest(
            run_key=key,
            run_config={"ops": {"raw_events": {"config": {"source": source, "paths": [str(path)]}}}},
            tags={"dagster/asset_partition_range_start": days[0], "dagster/asset_partition_range_end": days[1],
                  "xc/landing_file": path.name}))
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(sorted(done)),
                           skip_reason="; ".join(skipped) if skipped and not requests else None)


# -- novel keywords: each file landed is streamed into IRENE's serving index once ----------------------------

KEYWORD_SUFFIXES = (".csv", ".parquet")


def keyword_landing_dir() -> Path:
    from xc_core.paths import resolve_home

    return Path(os.environ.get("XC_KEYWORD_LANDING") or resolve_home() / "landing" / "keywords")


def keyword_profile() -> str:
    """The profile whose IRENE index the keywords go into: ``XC_KEYWORD_PROFILE``, else the nightly chain's."""
    return os.environ.get("XC_KEYWORD_PROFILE") or retrain_profile()


@dg.sensor(job=add_keywords_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.STOPPED,
           description="Streams each new keyword file (CSV/Parquet: keyword_text, optional keyword_id) landed in "
                       "$XC_KEYWORD_LANDING into IRENE's serving index, exactly once; waits while there is no "
                       "IRENE index")
def keyword_landing_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    from xc_core.methods import keyword_method
    from xc_core.paths import index_dir, resolve_home

    folder, profile, method = keyword_landing_dir(), keyword_profile(), keyword_method()
    files = sorted(p for p in folder.glob("*") if p.suffix.lower() in KEYWORD_SUFFIXES) if folder.exists() else []
    done = set(json.loads(context.cursor)) if context.cursor else set()
    index = index_dir(resolve_home(), OPERATED_DATASET, method, profile)
    if files and not (index / "manifest.json").exists():  # the files wait: none is marked done
        return dg.SensorResult(cursor=context.cursor, skip_reason=(
            f"{len(files)} keyword file(s) waiting: no IRENE index at {index} — run `xc train` then `xc index "
            f"--dataset {OPERATED_DATASET} --method {method} --profile {profile}`"))
    requests = []
    for path in files:
        key = file_run_key(path)
        if key in done:
            continue
        done.add(key)
        requests.append(dg.RunRequest(
            run_key=key, tags={"xc/keyword_file": path.name},
            run_config={"ops": {op_name(OPERATED_DATASET, "streamed_keywords"): {"config": {
                "paths": [str(path)], "profile": profile}}}}))
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(sorted(done)))


# -- the nightly chain: rebuild → train/eval per method → report → gate, one promotion at a time -------------

GENERATION = "xc/generation"  # the nightly rebuild run that a training / promotion run belongs to
NIGHTLY = "nightly_retrain"


def retrain_profile() -> str:
    return os.environ.get("XC_RETRAIN_PROFILE", "demo")


def retrain_methods() -> list[str]:
    """``XC_RETRAIN_METHODS`` (comma-separated) or ``xc run``'s default list; every name must be registered."""
    from xc_core.methods import get_method, run_methods

    methods = [m for m in os.environ.get("XC_RETRAIN_METHODS", ",".join(run_methods())).split(",") if m]
    for method in methods:
        get_method(method)  # an unknown name fails the tick with the registry's message
    return methods


@dg.run_status_sensor(run_status=dg.DagsterRunStatus.SUCCESS, monitored_jobs=[retrain_job], request_job=train_eval_job,
                      default_status=dg.DefaultSensorStatus.RUNNING,
                      description="After a nightly rebuild: train, index and evaluate every configured method "
                                  "(XC_RETRAIN_METHODS, profile XC_RETRAIN_PROFILE), one run per method partition")
def train_after_rebuild(context: dg.RunStatusSensorContext) -> list[dg.RunRequest] | dg.SkipReason:
    rebuild = context.dagster_run
    if rebuild.tags.get("xc/trigger") != NIGHTLY:  # a hand-launched rebuild trains nothing by surprise
        return dg.SkipReason(f"run {rebuild.run_id} was not launched by {NIGHTLY}")
    from xc_assets.launch import method_run_config

    methods, profile = retrain_methods(), retrain_profile()
    return [dg.RunRequest(
        run_key=f"{rebuild.run_id}:{method}", partition_key=method,
        run_config=method_run_config(OPERATED_DATASET, profile),  # every step the job runs, the A/B test included
        tags={GENERATION: rebuild.run_id, "xc/methods": ",".join(methods), "xc/profile": profile,
              "xc/method": method}) for method in methods]


@dg.run_status_sensor(run_status=dg.DagsterRunStatus.SUCCESS, monitored_jobs=[train_eval_job],
                      request_jobs=[report_job, promotion_job], default_status=dg.DefaultSensorStatus.RUNNING,
                      description="When every method of a nightly generation is evaluated: the report, then each "
                                  "method through the promotion gate in the configured order")
def promote_after_training(context: dg.RunStatusSensorContext) -> list[dg.RunRequest] | dg.SkipReason:
    from xc_assets.launch import promotion_run_config

    tags = context.dagster_run.tags
    if GENERATION not in tags:
        return dg.SkipReason("not a run of the nightly chain")
    generation, methods, profile = tags[GENERATION], tags["xc/methods"].split(","), tags["xc/profile"]
    runs = context.instance.get_runs(filters=dg.RunsFilter(job_name=train_eval_job.name, tags={GENERATION: generation},
                                                           statuses=[dg.DagsterRunStatus.SUCCESS]))
    missing = sorted(set(methods) - {r.tags.get("dagster/partition") for r in runs})
    if missing:
        return dg.SkipReason(f"generation {generation}: waiting for {', '.join(missing)}")
    requests = [dg.RunRequest(run_key=f"{generation}:report", job_name=report_job.name,
                              run_config={"ops": {op_name(OPERATED_DATASET, "eval_report"):
                                                  {"config": {"profile": profile}}}},
                              tags={GENERATION: generation, "dagster/priority": str(len(methods) + 1)})]
    for order, method in enumerate(methods):  # the queue's priority keeps the order; xc/promotion keeps one at a time
        requests.append(dg.RunRequest(
            run_key=f"{generation}:promote:{method}", job_name=promotion_job.name,
            run_config=promotion_run_config(OPERATED_DATASET, method, profile),
            tags={GENERATION: generation, "xc/method": method, "xc/promotion": OPERATED_DATASET,
                  "dagster/priority": str(len(methods) - order)}))
    return requests


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING,
                       description="Records every failed run in <home>/run_failures.jsonl and the Dagster log")
def record_run_failures(context: dg.RunFailureSensorContext) -> None:
    from xc_core.paths import resolve_home

    record = {"run_id": context.dagster_run.run_id, "job": context.dagster_run.job_name,
              "error": context.failure_event.message}
    with open(resolve_home() / "run_failures.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    context.log.error(f"run {record['run_id']} of {record['job']} failed: {record['error']}")
