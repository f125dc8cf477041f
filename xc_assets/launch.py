"""How xc launches its Dagster work, in one place: the data set's assets, the lineage a run
materializes with its ingest config and partition range, a method partition's steps and their run config, the
promotion's run config, and why a run failed. ``xc run``, ``xc promote``, ``xc results``, the jobs and the sensors
all derive from these, so the chain is described once.

The steps of a method partition are :data:`xc_assets.defs.constants.METHOD_STEPS`; an op's run-config key is
:func:`xc_assets.defs.constants.op_name`."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from xc_assets.defs.assets import ingest_assets, simulate_assets
from xc_assets.defs.constants import METHOD_STEPS, op_name, prefix
from xc_assets.defs.family import DatasetFamily, family
from xc_core.datasets.registry import RawEvents, get_dataset_spec
from xc_core.simulate.config import PROFILE_SCALE

#: what the PostgreSQL variant of the instance config reads its database URL from (the Makefile derives it)
DAGSTER_POSTGRES_ENV = "XC_DAGSTER_POSTGRES_URL"


def instance_for(home: Path) -> dg.DagsterInstance:
    """The configured instance when ``DAGSTER_HOME`` is set (runs show in the UI), else one under home: its run,
    event-log and schedule storage on the PostgreSQL server of ``XC_POSTGRES_URL`` when set (``xc_core.storage``),
    else SQLite files there; compute logs and local artifacts stay under home either way."""
    from xc_core.storage import database_url, postgres_server

    if os.environ.get("DAGSTER_HOME"):
        if postgres_server() is not None:  # xc_assets/deploy/postgres/dagster.yaml reads its database from here
            os.environ.setdefault(DAGSTER_POSTGRES_ENV, database_url("dagster"))
        return dg.DagsterInstance.get()
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    overrides = ({"storage": {"postgres": {"postgres_url": database_url("dagster")}}}
                 if postgres_server() is not None else None)
    return dg.DagsterInstance.local_temp(tempdir=str(home / "dagster"), overrides=overrides)


def raw_events_of(dataset: str, home: Path | None = None) -> RawEvents | None:
    """What the data set's definition says a run ingests (None: a file data set, or events already stored)."""
    return get_dataset_spec(dataset, home).raw


def dataset_family(dataset: str, home: Path | None = None) -> DatasetFamily:
    """The data set's assets as ``home`` defines it (any data set of any home, no code location needed)."""
    return family(dataset, get_dataset_spec(dataset, home).from_events)


def lineage_selection(dataset: str, home: Path | None = None) -> tuple[list[Any], list[Any]]:
    lineage = dataset_family(dataset, home)
    raw = raw_events_of(dataset, home)
    simulator = [simulate_assets.world, simulate_assets.simulated_events] if raw and raw.source == "simulated" else []
    ingestion = [*simulator, ingest_assets.raw_events, ingest_assets.quarantine] if raw else []
    return [*ingestion, *lineage.lineage], list(lineage.lineage_checks)


def ingest_ops(dataset: str, profile: str, home: Path | None = None) -> dict[str, Any]:
    raw = raw_events_of(dataset, home)
    if raw is None:
        return {}
    ops: dict[str, Any] = {"raw_events": {"config": {"source": raw.source,
                                                     "paths": [str(path) for path in raw.files()]}}}
    if raw.source == "simulated":
        ops["world"] = {"config": {"scale": PROFILE_SCALE[profile]}}
    return ops


def partition_tags(dataset: str, profile: str, home: Path | None = None) -> dict[str, str]:
    """The daily partitions the run ingests: the simulator's calendar, or the days the source files' events fall
    on (the partitions run on to today, so the whole range would be thousands of empty days)."""
    raw = raw_events_of(dataset, home)
    if raw is None:
        return {}
    if raw.source == "simulated":
        from xc_core.simulate import scale_config

        cfg = scale_config(PROFILE_SCALE[profile])
        first, last = cfg.start.date().isoformat(), (cfg.start + timedelta(days=cfg.days - 1)).date().isoformat()
    else:
        from xc_assets.defs.partitions import partition_range

        days = partition_range(raw.files(), raw.source)
        if days is None:
            raise ValueError(f"{', '.join(map(str, raw.files()))}: no valid event on a daily partition")
        first, last = days
    return {"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last}


#: the roles of the runs ``xc run`` and ``xc results`` launch, each a named job per data set (``synthetic_lineage``,
#: ``synthetic_method`` …) so that the UI's Runs page filters by job
JOB_ROLES = ("lineage", "method", "report", "promotion", "results")


def job_name(dataset: str, role: str) -> str:
    """The job a run of ``role`` on ``dataset`` goes under (``aol-1000``, ``method`` → ``aol_1000_method``)."""
    if role not in JOB_ROLES:
        raise ValueError(f"unknown job role {role!r}: one of {', '.join(JOB_ROLES)}")
    return f"{prefix(dataset)}_{role}"


def named_job(name: str, assets: Sequence[Any], home: Path) -> dg.JobDefinition:
    """``assets`` (with their checks) as the job ``name``, the home bound: what ``dg.materialize`` builds under
    ``__ephemeral_asset_job__``, under a name the UI can filter by."""
    from xc_assets.defs.resources import XcHome

    defs = dg.Definitions(jobs=[dg.define_asset_job(name)], assets=[a for a in assets if not _is_check(a)],
                          asset_checks=[a for a in assets if _is_check(a)],
                          resources={"xc_home": XcHome(home=str(home))})
    return defs.resolve_job_def(name)


def _is_check(definition: Any) -> bool:
    return isinstance(definition, dg.AssetChecksDefinition)


def step_names(job: dg.JobDefinition) -> list[str]:
    """The job's steps (one per op: an asset, a multi-asset or a check), upstream first."""
    return [node.name for node in job.nodes_in_topological_order]


def execute(job: dg.JobDefinition, instance: dg.DagsterInstance, *, run_config: Mapping[str, Any] | None = None,
            partition_key: str | None = None, tags: Mapping[str, str] | None = None,
            watch: Callable[[str], None] | None = None) -> dg.ExecuteInProcessResult:
    """Run ``job`` in this process on ``instance`` (a failure is in the result, never raised). ``watch`` gets the
    run's id before it starts, to follow its events (``StepProgress.watch``)."""
    run_id = str(uuid.uuid4())  # a run id as Dagster draws one, known before the run starts
    if watch is not None:
        watch(run_id)
    return job.execute_in_process(run_config=run_config, instance=instance, partition_key=partition_key,
                                  raise_on_error=False, tags=tags, run_id=run_id)


def lineage_job(dataset: str, home: Path) -> dg.JobDefinition:
    """The data lineage with its checks (ingestion first where the data set ingests) as ``<dataset>_lineage``."""
    assets, checks = lineage_selection(dataset, home)
    return named_job(job_name(dataset, "lineage"), [*assets, *checks], home)


def lineage_run_config(dataset: str, profile: str, home: Path) -> dict[str, Any]:
    ops: dict[str, Any] = {f"{prefix(dataset)}_anchor_sets": {"config": {"profile": profile}},  # a multi-asset's op
                           **ingest_ops(dataset, profile, home)}
    return {"ops": ops}


def lineage_tags(dataset: str, profile: str, home: Path, tags: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**partition_tags(dataset, profile, home), "xc/dataset": dataset, "xc/profile": profile, **(tags or {})}


def materialize_lineage(instance: dg.DagsterInstance, dataset: str, home: Path, profile: str,
                        tags: dict[str, str] | None = None,
                        watch: Callable[[str], None] | None = None) -> dg.ExecuteInProcessResult:
    """One run of the data lineage with its checks: what ``xc run`` and ``xc results`` both start with."""
    return execute(lineage_job(dataset, home), instance, run_config=lineage_run_config(dataset, profile, home),
                   tags=lineage_tags(dataset, profile, home, tags), watch=watch)


def method_run_config(dataset: str, profile: str, steps: tuple[str, ...] = METHOD_STEPS, seed: int | None = None,
                      ab_queries: int | None = None) -> dict[str, Any]:
    """The run config of a method partition's ``steps``: the profile for each, the training seed for the encoder and
    the A/B test's query count where given."""
    def one(step: str) -> dict[str, Any]:
        config: dict[str, Any] = {"profile": profile}
        if step == "encoder" and seed is not None:
            config["seed"] = seed
        if step == "ab_vs_control" and ab_queries is not None:
            config["queries"] = ab_queries
        return {"config": config}

    return {"ops": {op_name(dataset, step): one(step) for step in steps}}


def promotion_run_config(dataset: str, method: str, profile: str, min_lead: float = 0.0,
                         home: Path | None = None) -> dict[str, Any]:
    """Which method to register, and the gate's policy for both steps that apply it: the check decides and
    the champion step re-decides before moving the alias, so they must not disagree."""
    challenger, _, check, champion = dataset_family(dataset, home).promotion
    policy = {"config": {"min_lead": min_lead}}
    return {"ops": {challenger.node_def.name: {"config": {"method": method, "profile": profile}},
                    check.node_def.name: policy, champion.node_def.name: policy}}


def run_failure(result: dg.ExecuteInProcessResult | dg.JobExecutionResult) -> str:
    """Why a promotion run ended before its gate (registration failed): the step error, not a rejection."""
    errors = []
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error if event.event_specific_data else None
        if error is not None and error.cause is not None and error.cls_name == "DagsterExecutionStepExecutionError":
            error = error.cause  # Dagster wraps the error the step raised: report that one
        if error is not None:
            errors.append(error.message.strip())
    return "error before the gate: " + ("; ".join(errors) if errors else "run failed")
