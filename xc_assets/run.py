"""``xc run``: materialize one data set's asset graph in-process, on the instance of ``$DAGSTER_HOME``.

    what a data set's registry entry says it ingests (``DatasetSpec.raw``), then its graphs … anchor_sets:
    synthetic:   world → simulated_events → raw_events → quarantine → synthetic/*
    aol-1000:    raw_events (the aol archive, over the days its events fall on) → quarantine → aol_1000/*
    wikispeedia: wikispeedia/* (nothing to ingest)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import dagster as dg

from xc_assets.defs.assets import abtest_assets
from xc_assets.defs.constants import op_name
from xc_assets.launch import (
    dataset_family,
    execute,
    instance_for,
    job_name,
    lineage_job,
    materialize_lineage,
    method_run_config,
    named_job,
    promotion_run_config,
    run_failure,
    step_names,
)
from xc_assets.progress import STEP_TIMES, StepProgress, step_label, watcher
from xc_core.datasets.registry import get_dataset_spec
from xc_core.profiles import get_profile

SUMMARY_KEYS = ("rows_read", "rows_accepted", "rows_rejected", "events_stored", "documents", "labels",
                "train_documents", "test_documents", "leaked_test_nodes", "proxy_edges", "reachable_train_labels")


DEFAULT_CONTROL = abtest_assets.ABTestConfig().control  # make run prints each method's A/B lifts against it


@dataclass
class RunJobs:
    """The named jobs one ``xc run`` launches on a data set (each built once): the lineage, a method partition's
    steps, the report (the linear ``peers`` scored first, when asked for), one promotion. ``progress`` follows every
    run's steps (None: nothing printed)."""

    dataset: str
    home: Path
    progress: StepProgress | None = None
    peers: tuple[str, ...] = ()
    seed: int | None = None  # every method's training seed (None: the profile's)
    _built: dict[str, dg.JobDefinition] = field(default_factory=dict)

    def job(self, role: str) -> dg.JobDefinition:
        if role not in self._built:
            family = dataset_family(self.dataset, self.home)
            report = [family.declared["peer_eval"]] if self.peers else []
            assets = {"method": family.method_steps, "report": [*report, family.eval_report],
                      "promotion": family.promotion}
            self._built[role] = (lineage_job(self.dataset, self.home) if role == "lineage"
                                 else named_job(job_name(self.dataset, role), assets[role], self.home))
        return self._built[role]

    def steps(self, role: str, method: str | None = None) -> list[str]:
        """The steps of one ``role`` run, named as :class:`StepProgress` prints them."""
        return [step_label(self.dataset, name, method) for name in step_names(self.job(role))]

    def plan(self, methods: tuple[str, ...], lineage: bool = True) -> list[str]:
        """Every step ``xc run`` takes: the lineage, each method's steps, the report, each promotion."""
        return [*(self.steps("lineage") if lineage else []), *(s for m in methods for s in self.steps("method", m)),
                *self.steps("report"), *(s for m in methods for s in self.steps("promotion", m))]

    def watcher(self, instance: dg.DagsterInstance, method: str | None = None) -> Callable[[str], None] | None:
        return watcher(self.progress, instance, self.dataset, method)


def _method_run(jobs: RunJobs, profile: str, method: str, instance: dg.DagsterInstance,
                dask_address: str | None = None) -> dg.ExecuteInProcessResult | dg.JobExecutionResult:
    """One method partition's run (encoder → label_index → offline_eval → ab_vs_control): in this process, or its
    steps on the dask cluster at ``dask_address`` (:mod:`xc_assets.distributed`); the same config either way."""
    dataset, home = jobs.dataset, jobs.home
    run_config = method_run_config(dataset, profile, seed=jobs.seed)
    tags = {"xc/dataset": dataset, "xc/profile": profile, "xc/method": method}
    if dask_address:
        from xc_assets.distributed import materialize_on_dask  # dagster-dask: the optional extra `scale`

        events = get_dataset_spec(dataset, home).from_events
        return materialize_on_dask(dask_address, dataset, events, home, method, instance, run_config, tags)
    return execute(jobs.job("method"), instance, partition_key=method, run_config=run_config, tags=tags,
                   watch=jobs.watcher(instance, method))


def _train_and_evaluate(jobs: RunJobs, profile: str, methods: tuple[str, ...], instance: dg.DagsterInstance,
                        min_lead: float = 0.0, dask_address: str | None = None) -> dict[str, Any]:
    """One run per method partition, then the report run (in this process) and the promotions."""
    dataset, home = jobs.dataset, jobs.home
    out: dict[str, Any] = {"methods": {}}
    for method in methods:
        result = _method_run(jobs, profile, method, instance, dask_address)
        metrics: dict[str, Any] = {}
        for event in result.get_asset_materialization_events():
            m = event.step_materialization_data.materialization
            if m.asset_key.path[-1] == "offline_eval":
                metrics.update({k: m.metadata[k].value for k in ("P@1", "PSP@1", "P@5", "PSP@5", "R@10",
                                                                 "hnsw_recall@10") if k in m.metadata})
            if m.asset_key.path[-1] == "ab_vs_control" and m.metadata["tests"].value:
                metrics["ab_vs_control"] = _ab_headline(dataset, profile, home, method)
        out["methods"][method] = {"success": result.success, **metrics}
    report = execute(jobs.job("report"), instance, tags={"xc/dataset": dataset, "xc/profile": profile},
                     run_config=_report_config(dataset, profile, jobs.peers), watch=jobs.watcher(instance))
    for event in report.get_asset_materialization_events():
        metadata = event.step_materialization_data.materialization.metadata
        if "peers" in metadata:  # the linear peers' test metrics, shown beside the methods (never registered)
            out["peers"] = metadata["peers"].value
            continue
        out["report"] = metadata["report"].value
        if "label_deciles" in metadata:  # the tail in view: P@5 by label-frequency decile
            out["label_deciles"] = metadata["label_deciles"].value
    out["success"] = report.success and all(m["success"] for m in out["methods"].values())
    out["promotion"] = _promote_each(jobs, profile, methods, instance, min_lead)
    return out


def _report_config(dataset: str, profile: str, peers: tuple[str, ...]) -> dict[str, Any]:
    """The report run's config: the profile, and the peers to score before the report reads every evaluation."""
    ops: dict[str, Any] = {op_name(dataset, "eval_report"): {"config": {"profile": profile}}}
    if peers:
        ops[op_name(dataset, "peer_eval")] = {"config": {"profile": profile, "peers": list(peers)}}
    return {"ops": ops}


def _ab_headline(dataset: str, profile: str, home: Path, method: str) -> dict[str, str]:
    """The method's A/B lifts against the control, as ``make run`` prints them."""
    from xc_core.abtest.report import headline
    from xc_core.stages.abtest import saved_results

    found = [r for r in saved_results(home, dataset, profile)
             if r["treatment"] == method and r["control"] == DEFAULT_CONTROL]
    return {"control": found[0]["control"], "mode": found[0]["mode"], **headline(found[0])} if found else {}


def _promote_each(jobs: RunJobs, profile: str, methods: tuple[str, ...], instance: dg.DagsterInstance,
                  min_lead: float = 0.0) -> list[dict[str, Any]]:
    """Register every evaluated method in turn; the blocking check decides whether it becomes champion."""
    decisions = []
    for method in methods:
        result = execute(jobs.job("promotion"), instance, watch=jobs.watcher(instance, method),
                         run_config=promotion_run_config(jobs.dataset, method, profile, min_lead, jobs.home),
                         tags={"xc/dataset": jobs.dataset, "xc/profile": profile, "xc/method": method})
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


def _progress(jobs: RunJobs, methods: tuple[str, ...], out: TextIO | None, lineage: bool = True) -> None:
    """Follow the run's steps on ``out`` (None: print nothing), with the plan's size and where the log is."""
    if out is None:
        return
    planned = jobs.plan(methods, lineage)
    jobs.progress = StepProgress(planned, out, jobs.home / STEP_TIMES)
    print(f"{len(planned)} steps on {jobs.dataset}: " + ", ".join(
        part for part in ("lineage" if lineage else "", f"{len(methods)} method(s) {', '.join(methods)}" if methods
                          else "", "report", "promotion") if part), file=out, flush=True)


def promote_methods(dataset: str, profile: str, home: Path, methods: tuple[str, ...],
                    min_lead: float = 0.0, progress: TextIO | None = None) -> dict[str, object]:
    """Register each evaluated method in turn and run the promotion gate (``xc promote``): the same Dagster
    runs as the end of ``xc run``, for models that are already trained and evaluated. ``min_lead``: the
    smallest primary-metric lead promoted (see :class:`xc_core.tracking.registry.PromotionPolicy`). ``progress``:
    where each step's line goes (None: nowhere)."""
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import eval_dir

    missing = [m for m in methods if EvaluationRecord.load(eval_dir(home, dataset, m, profile)) is None]
    if missing:
        raise FileNotFoundError(f"not evaluated in {home}: {', '.join(missing)}; run `xc eval --dataset {dataset} "
                                f"--method NAME --profile {profile} --home {home}` (or `xc run`) first")
    started = time.perf_counter()
    jobs = RunJobs(dataset, home)
    if progress is not None:
        planned = [step for m in methods for step in jobs.steps("promotion", m)]
        jobs.progress = StepProgress(planned, progress, home / STEP_TIMES)
    summary: dict[str, object] = {"dataset": dataset, "profile": profile, "success": True}
    _add_promotion(summary, _promote_each(jobs, profile, methods, instance_for(home), min_lead))
    _save_times(jobs)
    return _finish(summary, home, started)


def _save_times(jobs: RunJobs) -> None:
    if jobs.progress is not None:
        jobs.progress.save()


def _reuse_data(jobs: RunJobs, profile: str, methods: tuple[str, ...], started: float, min_lead: float,
                dask_address: str | None = None, progress: TextIO | None = None) -> dict[str, object]:
    from xc_core.paths import anchors_dir

    dataset, home = jobs.dataset, jobs.home
    folder = anchors_dir(home, dataset)
    if not (folder / "meta.json").exists():
        raise FileNotFoundError(f"--reuse-data: no anchor sets at {folder}; run `xc run --dataset {dataset} "
                                f"--profile {profile} --home {home}` once without --reuse-data")
    _progress(jobs, methods, progress, lineage=False)
    summary: dict[str, object] = {"dataset": dataset, "profile": profile, "reused_data": str(folder)}
    try:
        _add_training(summary, _train_and_evaluate(jobs, profile, methods, instance_for(home), min_lead,
                                                   dask_address))
    finally:
        _save_times(jobs)
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
                 reuse_data: bool = False, min_lead: float = 0.0, dask_address: str | None = None,
                 progress: TextIO | None = None, peers: tuple[str, ...] = (),
                 seed: int | None = None) -> dict[str, object]:
    """Data lineage in one run (with its checks), then training/evaluation per method and the report.

    ``reuse_data`` skips the lineage run when its anchor sets are already materialized in ``home`` (e.g. to
    train more methods on aol-1000 without re-ingesting); it refuses when they are missing. ``min_lead`` goes
    to the promotion gate (as in :func:`promote_methods`). ``methods``: default the registry's ``run_methods()``;
    each trains after the methods it builds on. ``dask_address``: run each method partition's steps on the dask
    cluster there (``xc run --executor dask``); None keeps every run in this process. ``progress``: where a line
    per step start and end goes (:class:`xc_assets.progress.StepProgress`; None: nowhere). ``peers``: the linear
    peers (``xc_core.stages.peer.PEERS``) scored on the same test split before the report, so that its tables and
    the summary show them beside the methods (``make run`` asks for PECOS). ``seed``: every method's training seed
    (None: the profile's), recorded in the summary."""
    from xc_core.methods import dependency_order, run_methods

    started = time.perf_counter()
    methods = tuple(dependency_order(run_methods() if methods is None else methods))
    jobs = RunJobs(dataset, home, peers=peers, seed=seed)
    if reuse_data:
        summary = _reuse_data(jobs, profile, methods, started, min_lead, dask_address, progress)
    else:
        _progress(jobs, methods, progress)
        try:
            summary = _run_all(jobs, profile, methods, started, min_lead, dask_address)
        finally:
            _save_times(jobs)
    summary["seed"] = get_profile(profile).seed if seed is None else seed
    return summary


def _run_all(jobs: RunJobs, profile: str, methods: tuple[str, ...], started: float, min_lead: float,
             dask_address: str | None) -> dict[str, object]:
    dataset, home = jobs.dataset, jobs.home
    instance = instance_for(home)
    result = materialize_lineage(instance, dataset, home, profile, watch=jobs.watcher(instance))
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
        _add_training(summary, _train_and_evaluate(jobs, profile, methods, instance, min_lead, dask_address))
    return _finish(summary, home, started)
