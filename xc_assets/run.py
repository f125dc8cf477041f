"""``xc run``: materialize one data set's asset graph in-process, on the instance of ``$DAGSTER_HOME``.

    what a data set's registry entry says it ingests (``DatasetSpec.raw``), then its graphs … anchor_sets:
    synthetic:   world → simulated_events → raw_events → quarantine → synthetic/*
    aol-1000:    raw_events (the aol archive, over the days its events fall on) → quarantine → aol_1000/*
    wikispeedia: wikispeedia/* (nothing to ingest)
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from xc_assets.defs.assets import abtest_assets
from xc_assets.defs.constants import op_name
from xc_assets.defs.resources import XcHome
from xc_assets.launch import (
    dataset_family,
    instance_for,
    materialize_lineage,
    method_run_config,
    promotion_run_config,
    run_failure,
)
from xc_core.datasets.registry import get_dataset_spec

SUMMARY_KEYS = ("rows_read", "rows_accepted", "rows_rejected", "events_stored", "documents", "labels",
                "train_documents", "test_documents", "leaked_test_nodes", "proxy_edges", "reachable_train_labels")


DEFAULT_CONTROL = abtest_assets.ABTestConfig().control  # make run prints each method's A/B lifts against it


def _method_run(dataset: str, profile: str, home: Path, method: str, instance: dg.DagsterInstance,
                dask_address: str | None = None) -> dg.ExecuteInProcessResult | dg.JobExecutionResult:
    """One method partition's run (encoder → label_index → offline_eval → ab_vs_control): in this process, or its
    steps on the dask cluster at ``dask_address`` (:mod:`xc_assets.distributed`); the same config either way."""
    run_config = method_run_config(dataset, profile)
    tags = {"xc/dataset": dataset, "xc/profile": profile, "xc/method": method}
    if dask_address:
        from xc_assets.distributed import materialize_on_dask  # dagster-dask: the optional extra `scale`

        events = get_dataset_spec(dataset, home).from_events
        return materialize_on_dask(dask_address, dataset, events, home, method, instance, run_config, tags)
    return dg.materialize(dataset_family(dataset, home).method_steps, instance=instance, partition_key=method,
                          resources={"xc_home": XcHome(home=str(home))}, run_config=run_config,
                          raise_on_error=False, tags=tags)


def _train_and_evaluate(dataset: str, profile: str, home: Path, methods: tuple[str, ...],
                        instance: dg.DagsterInstance, min_lead: float = 0.0,
                        dask_address: str | None = None) -> dict[str, Any]:
    """One run per method partition, then the report run (in this process) and the promotions."""
    assets = dataset_family(dataset, home)
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
                            run_config={"ops": {op_name(dataset, "eval_report"): config}}, raise_on_error=False)
    for event in report.get_asset_materialization_events():
        metadata = event.step_materialization_data.materialization.metadata
        out["report"] = metadata["report"].value
        if "label_deciles" in metadata:  # the tail in view: P@5 by label-frequency decile
            out["label_deciles"] = metadata["label_deciles"].value
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


def _promote_each(dataset: str, profile: str, methods: tuple[str, ...], resources: dict[str, Any],
                  instance: dg.DagsterInstance, min_lead: float = 0.0,
                  home: Path | None = None) -> list[dict[str, Any]]:
    """Register every evaluated method in turn; the blocking check decides whether it becomes champion."""
    decisions = []
    for method in methods:
        result = dg.materialize(
            dataset_family(dataset, home).promotion, instance=instance, resources=resources, raise_on_error=False,
            run_config=promotion_run_config(dataset, method, profile, min_lead, home),
            tags={"xc/dataset": dataset, "xc/method": method})
        gate = next((e for e in result.get_asset_check_evaluations()), None)
        decisions.append({"method": method, "version": gate.metadata["challenger_version"].value if gate else None,
                          "promoted": bool(gate and gate.passed),
                          "reason": gate.description if gate else run_failure(result),
                          **(_decided(gate.metadata) if gate else {})})
    return decisions


def _decided(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What the gate decided on (the promotion split and the challenger's P@1 there) and its test view."""
    if "decided_on" not in metadata:
        return {}
    scored = metadata["challenger_metrics"].value
    return {"decided_on": metadata["decided_on"].value, "test_view": metadata["test_view"].value,
            "decided_P@1": scored.get("P@1") if isinstance(scored, dict) else None}


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
                                          instance_for(home), min_lead, home))
    return _finish(summary, home, started)


def _reuse_data(dataset: str, profile: str, home: Path, methods: tuple[str, ...], started: float,
                min_lead: float, dask_address: str | None = None) -> dict[str, object]:
    from xc_core.paths import anchors_dir

    folder = anchors_dir(home, dataset)
    if not (folder / "meta.json").exists():
        raise FileNotFoundError(f"--reuse-data: no anchor sets at {folder}; run `xc run --dataset {dataset} "
                                f"--profile {profile} --home {home}` once without --reuse-data")
    summary: dict[str, object] = {"dataset": dataset, "profile": profile, "reused_data": str(folder)}
    _add_training(summary, _train_and_evaluate(dataset, profile, home, methods, instance_for(home), min_lead,
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
    instance = instance_for(home)
    result = materialize_lineage(instance, dataset, home, profile)
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
