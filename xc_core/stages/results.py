"""The results page (``xc results`` / ``make results``, Dagster assets ``<data set>/results`` and ``results_page``):
every method on every data set at one profile, compared and costed, written as ``RESULTS.md`` + ``results.json`` and
logged to one MLflow run of the ``xc-results`` experiment. Every number in the page comes from the records it names.

This module gathers the records and writes the page; ``results_page.py`` lays out its Markdown. It trains nothing.
What is trained and evaluated is the Dagster layer's business (``xc_assets.results``): it materializes every method
partition that is missing or stale (its code version or its lineage changed) through the same assets ``xc run``
runs, then these tables are built from the records: metrics with bootstrap 95% CIs (RAMEN Table 4, TextGNN Table 4)
and the commits each model was trained and evaluated at, paired differences against the references (the registry's
``references()`` and the PECOS peer where evaluated), ablation and ``@set`` rows (RAMEN Table 6), subsets (seen /
novel queries, novel labels, deciles: RAMEN Table 8), each method's own tables (IRENE Table 7), simulated A/B tests
where the data set has a world, and the costs (RAMEN Table 5).
"""

from __future__ import annotations

import json
import logging
import os
import platform
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.costs import (
    TIMED_QUERIES,
    MethodCost,
    base_run,
    inference_split,
    parameter_count,
    time_scorer,
    train_cost,
    with_ratios,
)
from xc_core.evaluation.fallback import FALLBACK_TABLE, fallback_rows
from xc_core.evaluation.record import EvaluationRecord
from xc_core.methods.roles import cost_reference
from xc_core.paths import eval_dir, eval_root, model_dir
from xc_core.provenance import git_commit
from xc_core.stages.results_page import EXPERIMENT, METRICS, DatasetResults, render_markdown
from xc_core.training.record import TrainedModel

log = logging.getLogger(__name__)

DEFAULT_DATASETS: tuple[str, ...] = ("synthetic", "wikispeedia", "aol-1000")
AB_QUERIES = 10_000  # as xc run's ab_vs_control


class UnknownMethodError(LookupError, ValueError):
    """A method the registry does not know (a LookupError: the CLI prints one line and exits 2)."""


def validate_methods(methods: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The methods, each known to the registry (``ramen@links`` included), or one error naming every unknown."""
    from xc_core.methods import get_method, method_names

    unknown = []
    for name in methods:
        try:
            get_method(name)
        except ValueError:
            unknown.append(name)
    if unknown or not methods:
        raise UnknownMethodError(f"unknown method(s) {', '.join(unknown) or '(none given)'}: the results job runs "
                                 f"registered methods ({', '.join(method_names())})")
    return tuple(methods)


# ---- the records a page is built from --------------------------------------------------------------------

class MissingRecordError(LookupError):
    """A method on the page has no model or evaluation in the home (a LookupError: the CLI prints one line)."""


class MixedRecordError(LookupError):
    """A method's evaluation scored another model than the one on disk (a LookupError: the CLI prints one line)."""


def load_records(home: Path, dataset: str, profile: str, methods: tuple[str, ...],
                 ) -> tuple[dict[str, TrainedModel], dict[str, EvaluationRecord]]:
    """Each method's trained model and evaluation at ``profile`` in ``home``, or one error naming every one
    missing and the command that makes them — or every evaluation that scored another training run than the model
    on disk (:class:`MixedRecordError`: never a page mixing a new model with an old evaluation)."""
    trained, records, missing, mixed = {}, {}, [], []
    for method in methods:
        folder = model_dir(home, dataset, method, profile)
        record = EvaluationRecord.load(eval_dir(home, dataset, method, profile))
        try:
            trained[method] = TrainedModel.load(folder)
        except FileNotFoundError:
            missing.append(f"{method} (not trained)")
            continue
        if record is None:
            missing.append(f"{method} (not evaluated)")
        elif record.mlflow_run_id and record.mlflow_run_id != trained[method].mlflow_run_id:
            # e.g. `xc train` after the results job: a page must never pair a new model with an old evaluation
            mixed.append(f"{method} (its evaluation scored run {record.mlflow_run_id[:8]}, the model on disk is run "
                         f"{trained[method].mlflow_run_id[:8]})")
        else:
            records[method] = record
    if mixed:
        raise MixedRecordError(f"{dataset} in {home} at {profile}: {', '.join(mixed)}; `xc eval --dataset {dataset} "
                               f"--method <method> --profile {profile} --home {home}` scores the model now on disk")
    if missing:
        raise MissingRecordError(f"{dataset} in {home} at {profile}: {', '.join(missing)}; `xc results --profile "
                                 f"{profile} --datasets {dataset} --home {home}` trains and evaluates what is missing")
    return trained, records


# ---- tables ---------------------------------------------------------------------------------------------------

def _ci_rows(records: dict[str, EvaluationRecord]) -> list[dict[str, Any]]:
    """One row per method: metric → [value, low, high] (fractions) from its bootstrap intervals."""
    rows = []
    for name, record in records.items():
        ci = record.ci()
        cells = {k: list(ci[k]) if k in ci else [record.metrics[k], None, None]
                 for k in METRICS if k in ci or k in record.metrics}
        seen = record.seen_ci()  # the seen-label view's intervals; None for an evaluation saved before it
        rows.append({"method": name, **cells,
                     "seen_labels": {k: list(seen[k]) for k in METRICS if k in seen} if seen is not None else None})
    return rows


def paired_rows(a: EvaluationRecord, b: EvaluationRecord, seen: bool = False) -> dict[str, list[float]]:
    """metric → [a − b, low, high, p] (fractions), paired bootstrap on the same test queries; {} when the two were
    scored on different test splits or lack per-query terms. ``seen``: in the seen-label view (both methods'
    predictions restricted to labels with a training positive; {} when either evaluation predates it)."""
    from xc_core.evaluation import paired_metric_diff

    rows_a, rows_b = (a.seen_per_row(), b.seen_per_row()) if seen else (a.per_row(), b.per_row())
    if rows_a is None or rows_b is None or a.test_split != b.test_split:
        return {}
    out = {}
    for key in METRICS:
        found = paired_metric_diff(rows_a, rows_b, key)
        if found is not None:
            out[key] = [float(v) for v in found]
    return out


def _references(records: dict[str, EvaluationRecord], peers: dict[str, EvaluationRecord]) -> list[dict[str, Any]]:
    """Every method against every reference and peer it is not; two references are paired once, the one listed
    ranked first by the registry (``references()``) as the method (a − b, not both signs). A row against a peer is
    marked ``peer`` and holds the same differences in the seen-label view under ``seen_labels``: the linear peer
    cannot score labels without a training positive, and that view shows how much of a lead is left without them."""
    from xc_core.methods import references

    ranked = references()
    refs = {**{r: records[r] for r in ranked if r in records}, **peers}
    rank = {r: i for i, r in enumerate(ranked)}
    return [{"method": m, "vs": ref, **paired_rows(records[m], refs[ref]),
             **({"peer": True, "seen_labels": paired_rows(records[m], refs[ref], seen=True)} if ref in peers else {})}
            for m in records for ref in refs if ref != m and rank.get(m, -1) < rank.get(ref, len(rank))]


def _ablations(home: Path, dataset: str, profile: str, records: dict[str, EvaluationRecord]) -> list[dict[str, Any]]:
    """Every evaluated ablation or ``@set`` restriction of this profile (run or not), paired full − ablation."""
    from xc_core.methods import get_method

    rows = []
    for folder in sorted(eval_root(home, dataset).glob(f"*-{profile}")):
        record = EvaluationRecord.load(folder)
        if record is None or record.summary.get("profile") != profile:
            continue
        try:
            method = get_method(record.method)
        except ValueError:  # a peer's folder
            continue
        full = method.ablation_of or (record.method.partition("@")[0] if "@" in record.method else None)
        if full is None:
            continue
        full_record = records.get(full) or EvaluationRecord.load(eval_dir(home, dataset, full, profile))
        diffs = paired_rows(full_record, record) if full_record is not None else {}
        rows.append({"method": record.method, "of": full, "metrics": {k: record.metrics.get(k) for k in METRICS},
                     "evaluated_at": record.summary.get("git_commit"), **diffs})
    return rows


def _peers(home: Path, dataset: str, profile: str) -> dict[str, EvaluationRecord]:
    from xc_core.stages.evaluate import PEERS

    found = {p: EvaluationRecord.load(eval_dir(home, dataset, p, profile)) for p in PEERS}
    return {p: r for p, r in found.items() if r is not None}


def _abtests(dataset: str, home: Path, profile: str, trained: dict[str, TrainedModel]) -> list[dict[str, Any]]:
    """Each method against the control and its declared baselines, as the ``ab_vs_control`` step saved them for
    exactly these models (none without a simulated world; a pair whose models changed since is not shown: the
    results job re-runs the step)."""
    from xc_core.abtest.report import headline
    from xc_core.methods import control_method, get_method
    from xc_core.stages.abtest import ground_truth, saved_results

    if ground_truth(dataset, home) is None:
        return []
    saved = saved_results(home, dataset, profile)
    rows = []
    for method, model in trained.items():
        for control in dict.fromkeys((control_method(), *get_method(method).baselines)):
            if control == method or control not in trained:
                continue
            uris = (trained[control].model_uri, model.model_uri)
            result = next((r for r in saved if (r.get("control_arm", {}).get("model_uri"),
                                                r.get("treatment_arm", {}).get("model_uri")) == uris), None)
            if result is None:
                log.warning("%s on %s: no A/B test of %s against %s for these models", method, dataset, method,
                            control)
                continue
            rows.append({"treatment": method, "control": control, "mode": result["mode"],
                         "design": result.get("design", ""), "headline": headline(result),
                         "delta_pct": result["delta_pct"], "ci95": result["ci95"], "p_value": result["p_value"]})
    return rows


def _trained_runs(home: Path, dataset: str, profile: str) -> dict[str, TrainedModel]:
    """Every model of the data set trained at ``profile`` in ``home``, by MLflow run (a reused encoder's run)."""
    folders = (model_dir(home, dataset, "*", profile).parent).glob(f"*-{profile}/train_summary.json")
    found = (TrainedModel.load(path.parent) for path in sorted(folders))
    return {t.mlflow_run_id: t for t in found if t.profile == profile}


def _served_weights(summary: dict[str, Any]) -> dict[str, Path]:
    """The weight files of the model a method serves, as its train summary names them (encoder, classifier W, the
    hybrid channel's layers when the served fusion uses it)."""
    from xc_core.classifier.fusion import WEIGHTS_FILE
    from xc_core.classifier.xrlinear import HYBRID_DIR

    found = {}
    if summary.get("encoder_dir"):
        found["encoder"] = Path(str(summary["encoder_dir"]))
    if summary.get("classifier_dir"):
        found["classifier W"] = Path(str(summary["classifier_dir"])) / WEIGHTS_FILE
        if (hybrid := Path(str(summary["classifier_dir"])) / HYBRID_DIR).is_dir():
            found["hybrid"] = hybrid
    return found


def _own_seconds(model: TrainedModel, runs: dict[str, TrainedModel]) -> float | None:
    """Training seconds of ``model`` from scratch: its own and, recursively, those of the run it builds on."""
    base = runs.get(base_run(model.summary) or "")
    return train_cost(model.summary, _own_seconds(base, runs) if base and base is not model else None)[0]


def _costs(dataset: XCDataset, home: Path, trained: dict[str, TrainedModel], records: dict[str, EvaluationRecord],
           queries: int) -> list[dict[str, Any]]:
    """Costs per method (``xc_core.evaluation.costs``): the total ms/query timed with the method's serving scorer
    over the same first ``queries`` test queries for every method."""
    from xc_core.methods import Served, get_method
    from xc_core.tracking.store import activate, tracking_uri

    activate(tracking_uri(home))
    runs = _trained_runs(home, dataset.name, next(iter(trained.values())).profile) if trained else {}
    texts = list(dataset.test_texts[:queries])
    rows = []
    for name, model in trained.items():
        base = runs.get(base_run(model.summary) or "")
        seconds, epochs, per_epoch = train_cost(model.summary, _own_seconds(base, runs) if base else None)
        parameters, counted = parameter_count(model.summary, _served_weights(model.summary))
        try:
            scorer = get_method(name).scorer(Served(model.model_uri, home, dataset.name, model.profile))
            ms: float | None = time_scorer(scorer, texts)
        except (LookupError, FileNotFoundError, NotImplementedError) as error:  # a method that cannot serve yet
            log.warning("%s on %s: query time not measured (%s)", name, dataset.name, error)
            ms = None
        rows.append(MethodCost(method=name, dataset=dataset.name, train_seconds=seconds, epochs=epochs,
                               base=base.method if base else "", seconds_per_epoch=per_epoch, ms_per_query=ms,
                               split_ms=inference_split(records[name].summary), timed_queries=len(texts),
                               parameters=parameters, parameters_from=counted))
    return [c.to_dict() for c in with_ratios(rows, reference=cost_reference())]


#: what a seed home shares with the home it is a seed of: the data lineage and the home's settings, so a method that
#: reads its data set's provenance (TextGNN's relevance head: the simulated world) finds the same data in either
SHARED_WITH_SEEDS = ("simulate", "events", "graphs", "datasets", "anchor_sets", "xc.yaml")


def share_data(home: Path, seed_home: Path) -> None:
    """Link ``home``'s data lineage into ``seed_home`` (models, indexes, evaluations and the MLflow store stay its
    own); an entry the seed home already has is left as it is."""
    seed_home.mkdir(parents=True, exist_ok=True)
    for name in SHARED_WITH_SEEDS:
        source = home / name
        if not (source.is_dir() or source.is_file()):  # the home has none to share
            continue
        try:
            (seed_home / name).symlink_to(source.resolve(), target_is_directory=source.is_dir())
        except FileExistsError:  # the seed home's own entry (or an earlier link) stays
            pass


def seed_home(home: Path, seed: int) -> Path:
    """Where a training seed other than the page's first is trained: its own home, the lineage linked."""
    return home / "seeds" / f"s{seed}"


def seed_rows(dataset: str, home: Path, profile: str, methods: tuple[str, ...], seeds: tuple[int, ...],
              first: dict[str, EvaluationRecord]) -> list[dict[str, Any]]:
    """Each method's metrics over ``seeds``: the first seed's evaluation (``first``), each other seed's from its
    home :func:`seed_home` (the same data set, its lineage linked from ``home``: :func:`share_data`); per metric
    the values, their mean and standard deviation (fractions)."""
    per_seed = [first] + [load_records(seed_home(home, seed), dataset, profile, methods)[1] for seed in seeds[1:]]
    values = {m: {k: [float(r[m].metrics.get(k, float("nan"))) for r in per_seed] for k in METRICS} for m in methods}
    return [{"method": m, "seeds": list(seeds),
             **{k: {"values": v, "mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0}
                for k, v in values[m].items()}} for m in methods]


def dataset_results(data: XCDataset, home: Path, profile: str, methods: tuple[str, ...], abtests: bool = True,
                    timed_queries: int = TIMED_QUERIES, seeds: tuple[int, ...] = ()) -> DatasetResults:
    """The tables of every method on ``data`` from the records in ``home`` (each model and evaluation must be
    there: :class:`MissingRecordError`), its HTML report rebuilt; more ``seeds``: the seed table too."""
    from xc_core.evaluation import trained_labels, untrained_positive_share
    from xc_core.stages.report import build_report

    name = data.name
    trained, records = load_records(home, name, profile, methods)
    out = DatasetResults(dataset=name, summary={k: v for k, v in data.summary().items() if not isinstance(v, dict)})
    built = build_report(data, profile, home)
    out.report, out.label_deciles = str(built["report"]), built["label_deciles"]
    peers = _peers(home, name, profile)
    shown = {**records, **peers}
    for row in _ci_rows(shown):
        model = trained.get(row["method"])
        commits = {"training": model.summary.get("git_commit") if model else None,
                   "evaluation": shown[row["method"]].summary.get("git_commit")}
        out.methods.append({**row, "peer": model is None, "commits": commits,
                            "mlflow_run_id": model.mlflow_run_id if model else ""})
    out.paired = _references(records, peers)
    out.ablations = _ablations(home, name, profile, records)
    out.subsets = [{"method": m, "subset": s, **v} for m, r in records.items()
                   for s, v in r.summary.get("subsets", {}).items()]
    out.untrained = untrained_positive_share(data.y_test, trained_labels(data.y_train))
    out.tables = [{"method": m, "title": t, "rows": rows} for m, r in records.items()  # fallbacks: own section
                  for t, rows in r.summary.get("tables", {}).items() if t != FALLBACK_TABLE]
    out.fallbacks = [row for m, model in trained.items() for row in fallback_rows(m, model.summary)]
    out.graph_worth, out.graph_gain = _graph(data, home, records, trained)
    out.abtests = _abtests(name, home, profile, trained) if abtests else []
    out.costs = _costs(data, home, trained, records, timed_queries)
    if len(seeds) > 1:
        out.seeds = seed_rows(name, home, profile, methods, seeds, records)
    return out


def _graph(data: XCDataset, home: Path, records: dict[str, EvaluationRecord],
           trained: dict[str, TrainedModel]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The graph-worth check of ``data``'s anchor sets (its table and what it predicts) and the measured ramen −
    dual_encoder: {} / [] where the anchor stage recorded no check or the pair was not evaluated."""
    from xc_core.evaluation.graph_gain import gain_rows
    from xc_core.graphs.worth import kept_sets, worth_table
    from xc_core.paths import anchors_dir

    path = anchors_dir(home, data.name) / "graph_worth.json"
    worth: dict[str, Any] = {}
    if path.exists():
        record = json.loads(path.read_text())
        kept = kept_sets(record)
        served = {m: t.summary.get("served_encoder") for m, t in trained.items() if t.summary.get("served_encoder")}
        worth = {"table": worth_table(record), "kept": kept, "validation": record.get("validation", {}),
                 "prediction": "adds information" if kept else "no set adds information", "served": served}
    per_row = {m: rows for m, r in records.items() if (rows := r.per_row()) is not None}
    return worth, gain_rows(data, per_row)


# ---- provenance ---------------------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    """CPU model and cores, GPU (or none), torch threads: what the timings ran on."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:  # not Linux
        lines = []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), cpu)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    # the kernels torch picks (AVX2, AVX512): one model name can hide either, and they round differently
    found = {"cpu": cpu, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cores": os.cpu_count(),
             "gpu": gpu, "torch_threads": torch.get_num_threads(), "platform": platform.platform()}
    found["text"] = (f"{cpu} ({found['cpu_capability']}), {found['cores']} cores ({found['torch_threads']} torch "
                     f"threads); GPU: {gpu}; {found['platform']}")
    return found


def default_command(profile: str, datasets: tuple[str, ...], methods: tuple[str, ...], out: Path, home: Path,
                    seeds: tuple[int, ...] = (0,)) -> str:
    """The ``xc results`` command line that runs the same thing (every option spelled out)."""
    return (f"xc results --profile {profile} --datasets {','.join(datasets)} --methods {','.join(methods)} "
            f"--seeds {','.join(map(str, seeds))} --out {out} --home {home}")


def _run_metrics(results: list[DatasetResults]) -> dict[str, float]:
    """``<data set>/<method>/<metric>``: the headline metrics and the costs, as MLflow metrics."""
    metrics: dict[str, float] = {}
    for r in results:
        for m in r.methods:
            metrics.update({f"{r.dataset}/{m['method']}/{k.replace('@', '_at_')}": float(m[k][0])
                            for k in METRICS if m.get(k) and m[k][0] is not None})
            seen = m.get("seen_labels") or {}
            metrics.update({f"{r.dataset}/{m['method']}/seen_labels/{k.replace('@', '_at_')}": float(v[0])
                            for k, v in seen.items()})
        for c in r.costs:
            metrics.update({f"{r.dataset}/{c['method']}/{key}": float(c[key])
                            for key in ("seconds_per_epoch", "ms_per_query", "parameters") if c[key] is not None})
    return {k.replace("+", "_"): v for k, v in metrics.items()}  # '+' of ramen@a+b is no metric-name character


def _write_and_log(home: Path, header: dict[str, Any], results: list[DatasetResults], out: Path) -> dict[str, Any]:
    """Open the ``xc-results`` run, write ``RESULTS.md`` and ``results.json`` (its id in their header) into
    ``out``, log the metrics and both files as its artifacts; the JSON written."""
    import mlflow

    from xc_core.tracking.store import ensure_experiment

    experiment = ensure_experiment(EXPERIMENT, home)
    tags = {"profile": header["profile"], "git_commit": header["git_commit"], "datasets": ",".join(header["datasets"]),
            "methods": ",".join(header["methods"]), "command": header["command"][:5000]}
    with mlflow.start_run(experiment_id=experiment, run_name=f"results/{header['profile']}", tags=tags) as run:
        header["mlflow_run_id"] = run.info.run_id
        body = {"header": header, "datasets": [asdict(r) for r in results]}
        out.mkdir(parents=True, exist_ok=True)
        page, data = out / "RESULTS.md", out / "results.json"
        data.write_text(json.dumps(body, indent=2, default=str) + "\n")
        page.write_text(render_markdown(header, results))
        mlflow.log_metrics(_run_metrics(results))
        for path in (page, data):
            mlflow.log_artifact(str(path), artifact_path="results")
    return {**body, "results": str(page), "json": str(data)}


def page_header(profile: str, datasets: tuple[str, ...], methods: tuple[str, ...], seeds: tuple[int, ...],
                home: Path, command: str, seconds: float) -> dict[str, Any]:
    """The page's provenance: the command, the checkout's commit, the machine, the date, what it covers."""
    return {"command": command, "git_commit": git_commit(), "profile": profile, "seeds": list(seeds),
            "machine": machine(), "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "datasets": list(datasets), "methods": list(methods), "home": str(home), "seconds": round(seconds, 1)}


def write_page(home: Path, header: dict[str, Any], results: list[DatasetResults], out: Path) -> dict[str, Any]:
    """``RESULTS.md`` and ``results.json`` in ``out`` and their MLflow run (:func:`_write_and_log`)."""
    return _write_and_log(home, header, results, Path(out))
