"""``xc run``: materialize one data set's asset graph in-process, on the instance of ``$DAGSTER_HOME``.

    what a data set's registry entry says it ingests (``DatasetSpec.raw``), then its graphs … anchor_sets:
    synthetic:   world → simulated_events → raw_events → quarantine → synthetic/*
    aol-1000:    raw_events (the aol archive, over the days its events fall on) → quarantine → aol_1000/*
    wikispeedia: wikispeedia/* (nothing to ingest)
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from xc_assets.defs.assets import abtest_assets, ingest_assets, simulate_assets
from xc_assets.defs.constants import prefix
from xc_assets.defs.family import DatasetFamily, family
from xc_assets.defs.resources import XcHome
from xc_core.datasets.registry import RawEvents, get_dataset_spec
from xc_core.simulate.config import PROFILE_SCALE

SUMMARY_KEYS = ("rows_read", "rows_accepted", "rows_rejected", "events_stored", "documents", "labels",
                "train_documents", "test_documents", "leaked_test_nodes", "proxy_edges", "reachable_train_labels")


def _instance(home: Path) -> dg.DagsterInstance:
    """The configured instance when ``DAGSTER_HOME`` is set (runs show in the UI), else one under home."""
    if os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    return dg.DagsterInstance.local_temp(tempdir=str(home / "dagster"))


def _raw(dataset: str, home: Path | None = None) -> RawEvents | None:
    """What the data set's definition says a run ingests (None: a file data set, or events already stored)."""
    return get_dataset_spec(dataset, home).raw


def _family(dataset: str, home: Path | None = None) -> DatasetFamily:
    """The data set's assets as ``home`` defines it (any data set of any home, no code location needed)."""
    return family(dataset, get_dataset_spec(dataset, home).from_events)


def _selection(dataset: str, home: Path | None = None) -> tuple[list[Any], list[Any]]:
    lineage = _family(dataset, home)
    raw = _raw(dataset, home)
    simulator = [simulate_assets.world, simulate_assets.simulated_events] if raw and raw.source == "simulated" else []
    ingestion = [*simulator, ingest_assets.raw_events, ingest_assets.quarantine] if raw else []
    return [*ingestion, *lineage.lineage], list(lineage.lineage_checks)


def _ingest_ops(dataset: str, profile: str, home: Path | None = None) -> dict[str, Any]:
    raw = _raw(dataset, home)
    if raw is None:
        return {}
    ops: dict[str, Any] = {"raw_events": {"config": {"source": raw.source,
                                                     "paths": [str(path) for path in raw.files()]}}}
    if raw.source == "simulated":
        ops["world"] = {"config": {"scale": PROFILE_SCALE[profile]}}
    return ops


def _partition_tags(dataset: str, profile: str, home: Path | None = None) -> dict[str, str]:
    """The daily partitions the run ingests: the simulator's calendar, or the days the source files' events fall
    on (the partitions run on to today, so the whole range would be thousands of empty days)."""
    raw = _raw(dataset, home)
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


DEFAULT_CONTROL = abtest_assets.ABTestConfig().control  # make run prints each method's A/B lifts against it


#: a method partition's steps, in order (one run each method: `xc run`, `xc results`)
METHOD_STEPS = ("encoder", "label_index", "offline_eval", "ab_vs_control")


def _method_run(dataset: str, profile: str, home: Path, method: str, instance: dg.DagsterInstance,
                dask_address: str | None = None) -> dg.ExecuteInProcessResult | dg.JobExecutionResult:
    """One method partition's run (encoder → label_index → offline_eval → ab_vs_control): in this process, or its
    steps on the dask cluster at ``dask_address`` (:mod:`xc_assets.distributed`); the same config either way."""
    p, config = prefix(dataset), {"config": {"profile": profile}}
    run_config = {"ops": {f"{p}__{step}": config for step in METHOD_STEPS}}
    tags = {"xc/dataset": dataset, "xc/profile": profile, "xc/method": method}
    if dask_address:
        from xc_assets.distributed import materialize_on_dask  # dagster-dask: the optional extra `scale`

        events = get_dataset_spec(dataset, home).from_events
        return materialize_on_dask(dask_address, dataset, events, home, method, instance, run_config, tags)
    return dg.materialize(_family(dataset, home).method_steps, instance=instance, partition_key=method,
                          resources={"xc_home": XcHome(home=str(home))}, run_config=run_config,
                          raise_on_error=False, tags=tags)


def _train_and_evaluate(dataset: str, profile: str, home: Path, methods: tuple[str, ...],
                        instance: dg.DagsterInstance, min_lead: float = 0.0,
                        dask_address: str | None = None) -> dict[str, Any]:
    """One run per method partition, then the report run (in this process) and the promotions."""
    p, assets = prefix(dataset), _family(dataset, home)
    resources = {"xc_home": XcHome(home=str(home))}
    config = {"config": {"profile": profile}}
    out: dict[str, Any] = {"methods": {}}
    for method in methods:
        result = _method_run(dataset, profile, home, method, instance, dask_address)
        metrics: dict[str, Any] = {}
        for event in result.get_asset_materialization_events():
            m = event.step_materialization_data.materialization
            if m.asset_key.path[-1] == "offline_eval":
                metrics.update({k: m.metadata[k].value for k in ("P@1", "PSP@1", "P@5", "PSP@5", "R@10",
                                                                 "hnsw_recall@10") if k in m.metadata})
            if m.asset_key.path[-1] == "ab_vs_control" and m.metadata["tests"].value:
                metrics["ab_vs_control"] = _ab_headline(dataset, profile, home, method)
        out["methods"][method] = {"success": result.success, **metrics}
    report = dg.materialize([assets.eval_report], instance=instance, resources=resources,
                            run_config={"ops": {f"{p}__eval_report": config}}, raise_on_error=False)
    for event in report.get_asset_materialization_events():
        out["report"] = event.step_materialization_data.materialization.metadata["report"].value
    out["success"] = report.success and all(m["success"] for m in out["methods"].values())
    out["promotion"] = _promote_each(dataset, profile, methods, resources, instance, min_lead, home)
    return out


def _ab_headline(dataset: str, profile: str, home: Path, method: str) -> dict[str, str]:
    """The method's A/B lifts against the control, as ``make run`` prints them."""
    from xc_core.abtest.report import headline
    from xc_core.stages.abtest import saved_results

    found = [r for r in saved_results(home, dataset, profile)
             if r["treatment"] == method and r["control"] == DEFAULT_CONTROL]
    return {"control": found[0]["control"], "mode": found[0]["mode"], **headline(found[0])} if found else {}


def promotion_run_config(dataset: str, method: str, profile: str, min_lead: float = 0.0,
                         home: Path | None = None) -> dict[str, Any]:
    """Which method to register, and the gate's policy for both steps that apply it: the check decides and
    the champion step re-decides before moving the alias, so they must not disagree."""
    challenger, _, check, champion = _family(dataset, home).promotion
    policy = {"config": {"min_lead": min_lead}}
    return {"ops": {challenger.node_def.name: {"config": {"method": method, "profile": profile}},
                    check.node_def.name: policy, champion.node_def.name: policy}}


def _promote_each(dataset: str, profile: str, methods: tuple[str, ...], resources: dict[str, Any],
                  instance: dg.DagsterInstance, min_lead: float = 0.0,
                  home: Path | None = None) -> list[dict[str, Any]]:
    """Register every evaluated method in turn; the blocking check decides whether it becomes champion."""
    decisions = []
    for method in methods:
        result = dg.materialize(
            _family(dataset, home).promotion, instance=instance, resources=resources, raise_on_error=False,
            run_config=promotion_run_config(dataset, method, profile, min_lead, home),
            tags={"xc/dataset": dataset, "xc/method": method})
        gate = next((e for e in result.get_asset_check_evaluations()), None)
        decisions.append({"method": method, "version": gate.metadata["challenger_version"].value if gate else None,
                          "promoted": bool(gate and gate.passed),
                          "reason": gate.description if gate else _failure(result)})
    return decisions


def _failure(result: dg.ExecuteInProcessResult | dg.JobExecutionResult) -> str:
    """Why a promotion run ended before its gate (registration failed): the step error, not a rejection."""
    errors = []
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error if event.event_specific_data else None
        if error is not None and error.cause is not None and error.cls_name == "DagsterExecutionStepExecutionError":
            error = error.cause  # Dagster wraps the error the step raised: report that one
        if error is not None:
            errors.append(error.message.strip())
    return "error before the gate: " + ("; ".join(errors) if errors else "run failed")


def promote_methods(dataset: str, profile: str, home: Path, methods: tuple[str, ...],
                    min_lead: float = 0.0) -> dict[str, object]:
    """Register each evaluated method in turn and run the promotion gate (``xc promote``): the same Dagster
    runs as the end of ``xc run``, for models that are already trained and evaluated. ``min_lead``: the
    smallest primary-metric lead promoted (see :class:`xc_core.tracking.registry.PromotionPolicy`)."""
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import eval_dir

    missing = [m for m in methods if EvaluationRecord.load(eval_dir(home, dataset, m, profile)) is None]
    if missing:
        raise FileNotFoundError(f"not evaluated in {home}: {', '.join(missing)}; run `xc eval --dataset {dataset} "
                                f"--method NAME --profile {profile} --home {home}` (or `xc run`) first")
    started = time.perf_counter()
    summary: dict[str, object] = {"dataset": dataset, "profile": profile, "success": True}
    _add_promotion(summary, _promote_each(dataset, profile, methods, {"xc_home": XcHome(home=str(home))},
                                          _instance(home), min_lead, home))
    return _finish(summary, home, started)


def _reuse_data(dataset: str, profile: str, home: Path, methods: tuple[str, ...], started: float,
                min_lead: float, dask_address: str | None = None) -> dict[str, object]:
    from xc_core.paths import anchors_dir

    folder = anchors_dir(home, dataset)
    if not (folder / "meta.json").exists():
        raise FileNotFoundError(f"--reuse-data: no anchor sets at {folder}; run `xc run --dataset {dataset} "
                                f"--profile {profile} --home {home}` once without --reuse-data")
    summary: dict[str, object] = {"dataset": dataset, "profile": profile, "reused_data": str(folder)}
    _add_training(summary, _train_and_evaluate(dataset, profile, home, methods, _instance(home), min_lead,
                                               dask_address))
    return _finish(summary, home, started)


def _add_training(summary: dict[str, object], trained: dict[str, Any]) -> None:
    summary["success"] = trained.pop("success")
    summary.update(trained)
    _add_promotion(summary, trained["promotion"])


def _add_promotion(summary: dict[str, object], decisions: list[dict[str, Any]]) -> None:
    """Decisions, the last promoted model, and success: a rejected challenger is a success of the gate; a
    registration that errored before the gate fails the run."""
    promoted = [d for d in decisions if d["promoted"]]
    summary["promotion"] = decisions
    summary["champion"] = promoted[-1] if promoted else None
    summary["success"] = bool(summary["success"]) and all(d["version"] is not None for d in decisions)


def _finish(summary: dict[str, object], home: Path, started: float) -> dict[str, object]:
    summary["home"] = str(home)
    summary["seconds"] = round(time.perf_counter() - started, 2)
    return summary


def run_pipeline(dataset: str, profile: str, home: Path, methods: tuple[str, ...] | None = None,
                 reuse_data: bool = False, min_lead: float = 0.0,
                 dask_address: str | None = None) -> dict[str, object]:
    """Data lineage in one run (with its checks), then training/evaluation per method and the report.

    ``reuse_data`` skips the lineage run when its anchor sets are already materialized in ``home`` (e.g. to
    train more methods on aol-1000 without re-ingesting); it refuses when they are missing. ``min_lead`` goes
    to the promotion gate (as in :func:`promote_methods`). ``methods``: default the registry's ``run_methods()``;
    each trains after the methods it builds on. ``dask_address``: run each method partition's steps on the dask
    cluster there (``xc run --executor dask``); None keeps every run in this process."""
    from xc_core.methods import dependency_order, run_methods

    started = time.perf_counter()
    methods = tuple(dependency_order(run_methods() if methods is None else methods))
    if reuse_data:
        return _reuse_data(dataset, profile, home, methods, started, min_lead, dask_address)
    assets, checks = _selection(dataset, home)
    ops: dict[str, Any] = {f"{prefix(dataset)}_anchor_sets": {"config": {"profile": profile}},
                           **_ingest_ops(dataset, profile, home)}
    instance = _instance(home)
    result = dg.materialize(
        [*assets, *checks], instance=instance, resources={"xc_home": XcHome(home=str(home))},
        run_config={"ops": ops}, raise_on_error=False,
        tags={**_partition_tags(dataset, profile, home), "xc/dataset": dataset, "xc/profile": profile},
    )
    summary: dict[str, object] = {"dataset": dataset, "profile": profile, "run_id": result.run_id,
                                  "success": result.success}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        meta = {k: v.value for k, v in materialization.metadata.items() if k in SUMMARY_KEYS}
        if meta:
            summary[materialization.asset_key.to_user_string()] = meta
    evaluations = result.get_asset_check_evaluations()
    # checks that gate (ERROR) pass or stop the run; a failed WARN check (the graph-worth check) is advice, kept apart
    summary["checks"] = {e.asset_check_key.to_user_string(): e.passed for e in evaluations
                         if e.severity == dg.AssetCheckSeverity.ERROR}
    summary["warnings"] = {e.asset_check_key.to_user_string(): e.description for e in evaluations
                           if e.severity == dg.AssetCheckSeverity.WARN and not e.passed}
    if result.success and methods:
        _add_training(summary, _train_and_evaluate(dataset, profile, home, methods, instance, min_lead,
                                                   dask_address))
    return _finish(summary, home, started)
