"""``xc results`` / ``make results``: the results page through Dagster, as ``xc run`` runs a data set.

Per data set: its lineage (the ``xc run`` lineage run, with the same blocking checks) unless the home's anchor
sets are current; per seed and method, in the order the registry's ``requires`` gives, the method partition's
steps that are missing or stale (:mod:`xc_assets.defs.freshness`: a changed code version of the method or stage,
another lineage, a retrained model it builds on or serves against); then ``<data set>/results`` and, over all data
sets, ``results_page``. A run cut off anywhere resumes from the home: every finished step is a materialization the
next run finds current.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, TextIO

import dagster as dg

from xc_assets.defs.assets.results_assets import results_page
from xc_assets.defs.constants import METHOD_STEPS, op_name, prefix
from xc_assets.defs.freshness import Found, latest, lineage, lineage_code_version
from xc_assets.launch import (
    dataset_family,
    execute,
    instance_for,
    job_name,
    materialize_lineage,
    method_run_config,
    named_job,
    run_failure,
)
from xc_assets.progress import StepProgress, watcher
from xc_core.evaluation.costs import TIMED_QUERIES
from xc_core.provenance import home_key
from xc_core.stages.results import (
    AB_QUERIES,
    DEFAULT_DATASETS,
    default_command,
    seed_home,
    share_data,
    validate_methods,
)

log = logging.getLogger(__name__)

#: a method partition's steps in order; a stale step re-runs every later one
STEPS = METHOD_STEPS


class BlockedError(LookupError):
    """A blocking check stopped a data set's lineage, as it stops ``xc run`` (the CLI prints one line)."""


class StepFailedError(RuntimeError):
    """A training, evaluation or results step failed: its error, not a traceback of Dagster's."""


def _lineage_current(instance: dg.DagsterInstance, dataset: str, home: Path, profile: str) -> str | None:
    """Why the home's lineage of ``dataset`` must be built at ``profile``, or None when it is current."""
    found = lineage(instance, dataset, home)
    if found is None:
        return "no anchor sets materialized in this home"
    return found.stale(profile=profile, code_version=lineage_code_version())


def ensure_lineage(instance: dg.DagsterInstance, dataset: str, home: Path, profile: str,
                   progress: StepProgress | None = None) -> int:
    """The anchor sets' materialization the trainings read, built first when missing or stale, through the same
    lineage run as ``xc run`` (a failed blocking check stops here with :class:`BlockedError`)."""
    why = _lineage_current(instance, dataset, home, profile)
    if why is not None:
        log.warning("%s: building the data lineage (%s)", dataset, why)
        result = materialize_lineage(instance, dataset, home, profile, tags={"xc/job": "results"},
                                     watch=watcher(progress, instance, dataset))
        failed = [e.asset_check_key.to_user_string() for e in result.get_asset_check_evaluations()
                  if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]  # a WARN check only advises
        if failed or not result.success:
            raise BlockedError(f"{dataset}: the data lineage stopped ({', '.join(failed) or run_failure(result)}); "
                               f"a blocking check stops `xc run` here too — fix the data, or see the Dagster run "
                               f"{result.run_id}")
    found = lineage(instance, dataset, home)
    assert found is not None  # materialized above or before
    return found.storage_id


def _current_models(instance: dg.DagsterInstance, dataset: str, home: Path, profile: str,
                    seed: int) -> dict[str, Found]:
    """Every method's latest training record in ``home`` at ``profile`` and ``seed`` (to compare A/B arms)."""
    from xc_core.methods import method_names

    found = {m: latest(instance, [prefix(dataset), "encoder"], m, home=home_key(home), profile=profile, seed=seed)
             for m in method_names()}
    return {m: f for m, f in found.items() if f is not None}


def stale_steps(instance: dg.DagsterInstance, dataset: str, method: str, home: Path, profile: str, seed: int,
                lineage_id: int, retrained: set[str], methods: tuple[str, ...], with_ab: bool,
                retrain: bool = False) -> tuple[tuple[str, ...], str]:
    """The steps of ``method``'s partition to run (from the first stale one on) and why; ((), "") when current."""
    from xc_core.methods import control_method, get_method
    from xc_core.methods.versions import method_code_version, required

    p, where = prefix(dataset), {"home": home_key(home), "profile": profile}
    steps = STEPS if with_ab else STEPS[:-1]
    model = latest(instance, [p, "encoder"], method, seed=seed, **where)
    why = ("--retrain" if retrain else "not trained in this home" if model is None
           else model.stale(code_version=method_code_version(method, "train"), lineage=lineage_id)
           or next((f"{r}, which it builds on, was retrained" for r in required(method) if r in retrained), None))
    if why or model is None:
        return steps, f"training: {why}"
    evaluation = latest(instance, [p, "offline_eval"], method, **where)
    why = ("not evaluated" if evaluation is None else evaluation.stale(
        code_version=method_code_version(method, "evaluate"), mlflow_run_id=model.metadata.get("mlflow_run_id")))
    if why:
        return steps[1:], f"evaluation: {why}"
    if not with_ab:
        return (), ""
    ab = latest(instance, [p, "ab_vs_control"], method, **where)
    if ab is None:
        return steps[-1:], "A/B test: not run"
    why = ab.stale(code_version=method_code_version(method, "abtest"))
    current = _current_models(instance, dataset, home, profile, seed)
    arms = ab.metadata.get("arms") or {}
    controls = [c for c in (control_method(), *get_method(method).baselines) if c in methods and c != method]
    why = why or next((f"A/B arm {name} was retrained" for name, uri in arms.items()
                       if name in current and current[name].metadata.get("model_uri") != uri), None)
    why = why or next((f"no A/B test against {c} yet" for c in controls if c in current and c not in arms), None)
    return (steps[-1:], f"A/B test: {why}") if why else ((), "")


def _materialize(job: str, steps: list[dg.AssetsDefinition], run_config: dict[str, Any], home: Path,
                 instance: dg.DagsterInstance, tags: dict[str, str], partition: str | None = None,
                 progress: StepProgress | None = None) -> None:
    """``steps`` as the named ``job`` (the UI filters by it); ``progress`` follows its steps."""
    dataset = tags.get("xc/dataset", "")
    watch = watcher(progress, instance, dataset or "results", partition)
    result = execute(named_job(job, steps, home), instance, partition_key=partition, run_config=run_config,
                     tags=tags, watch=watch)
    if not result.success:
        what = "/".join(filter(None, (tags.get("xc/dataset"), partition)))
        raise StepFailedError(f"{what}: {run_failure(result).removeprefix('error before the gate: ')} "
                              f"(Dagster run {result.run_id})")


def run_method(instance: dg.DagsterInstance, dataset: str, method: str, home: Path, profile: str, seed: int,
               steps: tuple[str, ...], ab_queries: int, progress: StepProgress | None = None) -> None:
    """Materialize ``steps`` of the method partition in ``home`` (the training at ``seed``)."""
    chosen = [a for a in dataset_family(dataset, home).method_steps if a.key.path[-1] in steps]
    _materialize(job_name(dataset, "method"), chosen, method_run_config(dataset, profile, steps, seed, ab_queries),
                 home, instance, partition=method, progress=progress,
                 tags={"xc/dataset": dataset, "xc/profile": profile, "xc/method": method, "xc/job": "results"})


def refresh_dataset(instance: dg.DagsterInstance, dataset: str, home: Path, profile: str, methods: tuple[str, ...],
                    seeds: tuple[int, ...], abtests: bool, ab_queries: int, retrain: bool,
                    progress: StepProgress | None = None) -> dict[str, Any]:
    """Lineage, then every stale step of every method at every seed (seeds after the first in their own home);
    what ran and why, per seed and method."""
    from xc_core.methods import dependency_order

    lineage_id = ensure_lineage(instance, dataset, home, profile, progress)
    ran: dict[str, Any] = {}
    for index, seed in enumerate(seeds):
        where = home if index == 0 else seed_home(home, seed)
        if index:
            share_data(home, where)
        retrained: set[str] = set()
        for method in dependency_order(methods):  # a method after those it builds on
            steps, why = stale_steps(instance, dataset, method, where, profile, seed, lineage_id, retrained, methods,
                                     with_ab=abtests and index == 0, retrain=retrain)
            if not steps:
                continue
            log.warning("%s/%s seed %d: running %s (%s)", dataset, method, seed, ", ".join(steps), why)
            run_method(instance, dataset, method, where, profile, seed, steps, ab_queries, progress)
            retrained.update([method] if "encoder" in steps else [])
            ran.setdefault(f"seed {seed}", {})[method] = {"steps": list(steps), "why": why}
    return ran


def tabulate_dataset(instance: dg.DagsterInstance, dataset: str, home: Path, profile: str, methods: tuple[str, ...],
                     seeds: tuple[int, ...], abtests: bool, timed_queries: int,
                     progress: StepProgress | None = None) -> None:
    """The data set's HTML report and its ``results`` asset (the tables), from the records just made current."""
    family = dataset_family(dataset, home)
    config = {"profile": profile, "methods": list(methods), "seeds": list(seeds), "abtests": abtests,
              "timed_queries": timed_queries}
    _materialize(job_name(dataset, "results"), [family.eval_report, family.results],
                 {"ops": {op_name(dataset, "eval_report"): {"config": {"profile": profile}},
                          op_name(dataset, "results"): {"config": config}}},
                 home, instance, tags={"xc/dataset": dataset, "xc/profile": profile, "xc/job": "results"},
                 progress=progress)


def run_results(home: Path, profile: str, datasets: tuple[str, ...] | list[str] = DEFAULT_DATASETS,
                methods: tuple[str, ...] | list[str] | None = None, seeds: tuple[int, ...] = (0,),
                out: Path | None = None, command: str | None = None, retrain: bool = False, abtests: bool = True,
                ab_queries: int = AB_QUERIES, timed_queries: int = TIMED_QUERIES,
                instance: dg.DagsterInstance | None = None, progress: TextIO | None = None) -> dict[str, Any]:
    """Every method on every data set at ``profile``: what is missing or stale is trained and evaluated (Dagster
    runs on the home's instance), then ``<out>/RESULTS.md`` and ``<out>/results.json`` are written and logged to
    one MLflow run of ``xc-results``; returns the JSON with the files' paths and, under ``ran``, what each data set
    had to run and why. ``retrain``: train every method anew. Unknown methods or data sets raise before anything
    is built or written. ``instance``: the Dagster instance the runs go to (default: the configured one, else one
    under ``home``). ``progress``: where a line per step start and end goes (None: nowhere)."""
    from xc_core.datasets.registry import DATASETS, get_dataset_spec
    from xc_core.methods import result_methods

    started = time.perf_counter()
    methods = validate_methods(tuple(result_methods() if methods is None else methods))
    datasets = tuple(datasets)
    for name in datasets:
        if name not in DATASETS or home.exists():  # a home's definitions are read from it (which creates it)
            get_dataset_spec(name, home)  # an unknown name raises UnknownDatasetError naming the choices
    if not seeds:
        raise ValueError("seeds: give at least one training seed")
    out = Path(out) if out is not None else Path.cwd() / "docs"
    instance = instance if instance is not None else instance_for(home)
    steps = None if progress is None else StepProgress(None, progress)
    ran = {}
    for dataset in datasets:
        ran[dataset] = refresh_dataset(instance, dataset, home, profile, methods, tuple(seeds), abtests, ab_queries,
                                       retrain, steps)
        tabulate_dataset(instance, dataset, home, profile, methods, tuple(seeds), abtests, timed_queries, steps)
    page = {"profile": profile, "datasets": list(datasets), "methods": list(methods), "seeds": list(seeds),
            "out": str(out), "command": command or default_command(profile, datasets, methods, out, home,
                                                                     tuple(seeds)),
            "seconds": round(time.perf_counter() - started, 1)}
    _materialize("results_page", [results_page(datasets)], {"ops": {"results_page": {"config": page}}}, home,
                 instance, tags={"xc/profile": profile, "xc/job": "results"}, progress=steps)
    body = json.loads((out / "results.json").read_text())
    return {**body, "results": str(out / "RESULTS.md"), "json": str(out / "results.json"), "ran": ran}
