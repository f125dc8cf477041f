"""The results page (``xc results`` / ``make results``, Dagster assets ``<data set>/results`` and ``results_page``):
every method on every data set at one profile, compared and costed, written as ``RESULTS.md`` + ``results.json`` and
logged to one MLflow run of the ``xc-results`` experiment. Every number in the page comes from the records it names.

This module tabulates; it trains nothing. What is trained and evaluated is the Dagster layer's business
(``xc_assets.results``): it materializes every method partition that is missing or stale (its code version or its
lineage changed) through the same assets ``xc run`` runs, then these tables are built from the records: metrics with
bootstrap 95% CIs (RAMEN Table 4, TextGNN Table 4) and the commits each model was trained and evaluated at, paired
differences against the references (the registry's ``references()`` and the PECOS peer where evaluated), ablation
and ``@set`` rows (RAMEN Table 6), subsets (seen / novel queries, novel labels, deciles: RAMEN Table 8), each
method's own tables (IRENE Table 7), simulated A/B tests where the data set has a world, and the costs (RAMEN
Table 5).
"""

from __future__ import annotations

import json
import logging
import os
import platform
from dataclasses import asdict, dataclass, field
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
from xc_core.training.record import TrainedModel

log = logging.getLogger(__name__)

DEFAULT_DATASETS: tuple[str, ...] = ("synthetic", "wikispeedia", "aol-1000")
METRICS = ("P@1", "P@5", "R@10", "PSP@1", "PSP@5")
HEADLINE = ("P@1", "PSP@1")  # the headline table's columns per data set (the first with its interval)
EXPERIMENT = "xc-results"
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
    from xc_core.classifier.linear import HYBRID_DIR

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


@dataclass
class DatasetResults:
    """Everything the page shows for one data set (``results.json`` holds it as is)."""

    dataset: str
    summary: dict[str, Any]
    methods: list[dict[str, Any]] = field(default_factory=list)  # metrics with CIs, reused or not, runs
    paired: list[dict[str, Any]] = field(default_factory=list)
    ablations: list[dict[str, Any]] = field(default_factory=list)
    subsets: list[dict[str, Any]] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)  # a method's own analyses (IRENE's settings)
    abtests: list[dict[str, Any]] = field(default_factory=list)
    costs: list[dict[str, Any]] = field(default_factory=list)
    seeds: list[dict[str, Any]] = field(default_factory=list)  # metrics over seeds (more than one seed asked)
    report: str = ""
    # analyses.untrained_positive_share of the test split: positive pairs ("pairs") and queries whose positives all
    # are ("rows") on labels without a training positive, which the linear peer cannot score
    untrained: dict[str, float] = field(default_factory=dict)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)  # each learned choice against its fallback
    graph_worth: dict[str, Any] = field(default_factory=dict)  # the graph-worth check as `xc anchors` recorded it
    graph_gain: list[dict[str, Any]] = field(default_factory=list)  # ramen − dual_encoder per query-frequency decile


    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2, default=str) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> DatasetResults:
        return cls(**json.loads(path.read_text()))


def dataset_results(data: XCDataset, home: Path, profile: str, methods: tuple[str, ...], abtests: bool = True,
                    timed_queries: int = TIMED_QUERIES, seeds: tuple[int, ...] = ()) -> DatasetResults:
    """The tables of every method on ``data`` from the records in ``home`` (each model and evaluation must be
    there: :class:`MissingRecordError`), its HTML report rebuilt; more ``seeds``: the seed table too."""
    from xc_core.evaluation import trained_labels, untrained_positive_share
    from xc_core.stages.report import build_report

    name = data.name
    trained, records = load_records(home, name, profile, methods)
    out = DatasetResults(dataset=name, summary={k: v for k, v in data.summary().items() if not isinstance(v, dict)})
    out.report = str(build_report(data, profile, home)["report"])
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
    dual_encoder (issue #43): {} / [] where the anchor stage recorded no check or the pair was not evaluated."""
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


# ---- the page -----------------------------------------------------------------------------------------------

def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"


def _with_ci(cell: list[float | None] | None, signed: bool = False) -> str:
    if not cell or cell[0] is None:
        return "–"
    if cell[1] is None:
        return _pct(cell[0], signed)
    return f"{_pct(cell[0], signed)} [{_pct(cell[1], signed)}, {_pct(cell[2], signed)}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows), ""]


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _costs_table(costs: list[dict[str, Any]]) -> list[str]:
    rows = []
    for c in costs:
        split, ratios = c["split_ms"], c["ratios"]
        total = _num(c["train_seconds"], 1) + (f" (with {c['base']})" if c["base"] else "")
        rows.append([c["method"], total, _num(c["epochs"]), _num(c["seconds_per_epoch"], 1), _num(ratios["train"]),
                     _num(c["ms_per_query"], 3), *(_num(split.get(p), 3) if p in split else "–"
                                                   for p in ("encoder", "graph", "search")),
                     _num(ratios["predict"]), _num(c["parameters"]), c["parameters_from"] or "–",
                     _num(ratios["size"])])
    n = costs[0]["timed_queries"] if costs else 0
    unit = cost_reference()
    return _table(["method", "train s", "epochs", "train s/epoch", f"train × {unit}",
                   f"ms/query (total, {n} queries)", "encoder ms", "graph ms", "search ms", f"predict × {unit}",
                   "parameters", "counted", f"size × {unit}"], rows)


def _short_commit(commit: str | None) -> str:
    """A recorded ``git_commit`` in a table cell: its first 7 hex digits, ``+`` when it had uncommitted changes."""
    if not commit or commit == "unknown":
        return "–"
    return commit[:7] + ("+" if commit.endswith("(with uncommitted changes)") else "")


def _commits_cell(commits: dict[str, str | None] | None) -> str:
    commits = commits or {}
    return f"{_short_commit(commits.get('training'))} / {_short_commit(commits.get('evaluation'))}"


def _row_label(method: dict[str, Any]) -> str:
    """A method's name in the tables, the linear peer marked as such."""
    return method["method"] + (" (peer)" if method["peer"] else "")


def _generic_table(rows: list[dict[str, Any]]) -> list[str]:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return _table(keys, [[_num(r.get(k)) for k in keys] for r in rows])


def _candidate(candidate: dict[str, Any] | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (candidate or {}).items()) or "–"


def _dataset_section(r: DatasetResults) -> list[str]:
    s = r.summary
    lines = [f"## {r.dataset}", "",
             f"{_num(s.get('train_documents'))} training and {_num(s.get('test_documents'))} test documents "
             f"({_num(s.get('novel_test_documents'))} novel), {_num(s.get('labels'))} labels "
             f"({_num(s.get('novel_labels'))} novel). HTML report: `{r.report}`.", "",
             "### Test-split metrics (RAMEN Table 4, TextGNN Table 4)", "",
             "%, with the 95% bootstrap interval over test queries. Trained / evaluated at: the commit the model "
             "was trained at and the one it was evaluated at (7 digits; +: with uncommitted changes); a model "
             "whose code has not changed since is kept, so its commit can be older than the page's.", ""]
    lines += _table(["method", *METRICS, "trained / evaluated at"],
                    [[_row_label(m), *(_with_ci(m.get(k)) for k in METRICS), _commits_cell(m.get("commits"))]
                     for m in r.methods])
    lines += ["### Paired differences", "",
              "method − reference in points, 95% paired bootstrap interval on the same test queries.", ""]
    lines += _table(["method", "vs", *(f"Δ{k}" for k in METRICS)],
                    [[p["method"], p["vs"], *(_with_ci(p.get(k), True) for k in METRICS)]
                     for p in r.paired if not p.get("peer")])
    lines += _peer_section(r)
    if r.fallbacks:
        lines += ["### Learned choices against their do-nothing fallback", "",
                  "The selection procedure is cross-fitted: each fold's rows are ranked by the candidate picked on "
                  "the other folds, and the candidate is served only when that paired 95% interval lies above 0 and "
                  "P@1 / PSP@1 are not lost (xc_core/evaluation/fallback.py). Gain in points over the tested rows "
                  "(the classifier stage's are out-of-fold training documents); *detectable P@1*: the half-width of "
                  "the test's P@1 interval, the smallest P@1 gain it could have told from 0.", ""]
        lines += _table(["method", "choice", "candidate", "served", "metric", "gain", "tested rows",
                         "detectable P@1"],
                        [[f["method"], str(f["choice"]), _candidate(f.get("candidate")),
                          "candidate" if f["kept"] else "fallback", str(f["metric"]),
                          _with_ci([f.get("gain"), f.get("low"), f.get("high")], True), _num(f.get("tested_on_rows")),
                          "–" if f.get("detectable_P@1") is None else f"±{_pct(f['detectable_P@1'])}"]
                         for f in r.fallbacks])
    lines += _graph_section(r)
    if r.ablations:
        lines += ["### Ablations and anchor-set restrictions (RAMEN Table 6)", "",
                  "full − ablation in points, paired 95% interval; evaluated at: the ablation's commit.", ""]
        lines += _table(["ablation", "of", *(f"{k}" for k in METRICS), *(f"Δ{k}" for k in METRICS), "evaluated at"],
                        [[a["method"], a["of"], *(_pct(a["metrics"].get(k)) for k in METRICS),
                          *(_with_ci(a.get(k), True) for k in METRICS), _short_commit(a.get("evaluated_at"))]
                         for a in r.ablations])
    if r.subsets:
        keys = [k for k in ("P@1", "P@5", "PSP@1", "PSP@5", "R@10") if any(k in x for x in r.subsets)]
        lines += ["### Subsets: seen / novel queries, novel labels, deciles (RAMEN Table 8)", "",
                  "%; rows: test queries in the subset.", ""]
        lines += _table(["method", "subset", "rows", *keys],
                        [[x["method"], x["subset"], _num(int(x["rows"]) if "rows" in x else None),
                          *(_pct(x.get(k)) for k in keys)] for x in r.subsets])
    if r.tables:
        lines += ["### Method analyses (IRENE Table 7)", ""]
    for t in r.tables:
        lines += [f"#### {t['method']}: {t['title']}", ""] + _generic_table(t["rows"])
    if r.abtests:
        metrics = list(dict.fromkeys(k for a in r.abtests for k in a["headline"]))
        designs = "; ".join(dict.fromkeys(f"{a['mode']}, {a['design']}" for a in r.abtests))
        lines += ["### Simulated A/B tests", "", f"{designs}: %Δ treatment vs control [95% CI] (p).", ""]
        lines += _table(["treatment", "control", *metrics],
                        [[a["treatment"], a["control"], *(a["headline"].get(k, "–") for k in metrics)]
                         for a in r.abtests])
    if r.seeds:
        lines += [f"### Over seeds {', '.join(map(str, r.seeds[0]['seeds']))}", "",
                  "%, mean ± standard deviation over the training seeds (the tables above: the first seed).", ""]
        lines += _table(["method", *METRICS], [[x["method"], *(f"{_pct(x[k]['mean'])} ± {_pct(x[k]['sd'])}"
                                                               for k in METRICS)] for x in r.seeds])
    lines += ["### Costs (RAMEN Table 5)", "",
              "Training seconds from the training records (with the run whose encoder a method reuses or builds "
              "on), per epoch (n/a: no epoch trained); ms/query timed with each method's serving scorer over the "
              "same test queries, model loaded and warmed up (encoder / graph / search: what the method's "
              "predictions recorded); parameters recorded by the method or counted from the weights it serves; "
              f"× {cost_reference()}: the ratio to {cost_reference()}'s.", ""]
    return lines + _costs_table(r.costs)


def _graph_section(r: DatasetResults) -> list[str]:
    """Will this graph help? The check's table, its prediction and the measured ramen − dual_encoder."""
    if not r.graph_worth and not r.graph_gain:
        return []
    lines = ["### Will this graph help? (the graph-worth check against the measured gain)", ""]
    worth = r.graph_worth
    if worth:
        rows = worth["table"]
        lines += [f"From training and validation rows only ({_num(worth['validation'].get('rows'))} "
                  f"{worth['validation'].get('kind', '')} validation rows; xc_core/graphs/worth.py). Novelty: held-out "
                  "positives reached through the set beyond the documents' own training labels; chance: the same "
                  "with another document's positives; redundancy: edges restating a training pair; agreement: cosine "
                  "of the set's regularizer gradient (training batches) with the task gradient on validation batches "
                  f"at the starting encoder. Prediction: **{worth['prediction']}**"
                  f"{' (' + ', '.join(worth['kept']) + ')' if worth['kept'] else ''}; ramen starts every other set "
                  "at λ = 0. Served encoders: "
                  f"{'; '.join(f'{m} → {e}' for m, e in worth.get('served', {}).items()) or 'n/a'}.", ""]
        lines += _table(list(rows[0]), [["–" if v is None else str(v) for v in row.values()]  # rounded by the table
                                        for row in rows]) if rows else []
    if r.graph_gain:
        lines += [f"Measured on the test split, {r.graph_gain[0]['basis']} deciles (0 = head); P@1 difference in "
                  "points, 95% paired bootstrap interval.", ""]
        lines += _table(["method", "vs", "subset", "rows", "ΔP@1"],
                        [[g["method"], g["vs"], g["subset"], _num(g["rows"]), _with_ci(g["P@1"], True)]
                         for g in r.graph_gain])
    return lines


def _peer_section(r: DatasetResults) -> list[str]:
    """The methods against the linear peer in both views: all labels, and seen labels only (predictions restricted
    to labels with a training positive, ``analyses.seen_label_view``), with the test split's share on the others."""
    against = [p for p in r.paired if p.get("peer")]
    if not against:
        return []
    share = r.untrained
    lines = ["### Against the linear peer: all labels and seen labels", "",
             f"{_pct(share.get('pairs'))}% of the test positives (query, label pairs) are on labels without a training "
             f"positive, and {_pct(share.get('rows'))}% of the test queries have only such positives. A linear "
             "one-vs-all peer cannot score those labels. The seen-label view restricts every method's predictions to "
             "labels with a training positive (each query re-ranked over them) and keeps the same queries and "
             "positives: a query with only untrained positives counts 0, R@k still divides by all of a query's "
             "positives, PSP@k keeps their weights in its denominator. A lead that holds in it does not come from "
             "labels the peer cannot score. %, 95% bootstrap interval over test queries.", ""]
    lines += _table(["method", *(f"{k} seen labels" for k in METRICS)],
                    [[_row_label(m), *(_with_ci((m.get("seen_labels") or {}).get(k)) for k in METRICS)]
                     for m in r.methods])
    lines += ["method − peer in points, 95% paired bootstrap interval on the same test queries, in each view.", ""]
    return lines + _table(["method", "vs", "view", *(f"Δ{k}" for k in METRICS)],
                          [[p["method"], p["vs"], view, *(_with_ci(cells.get(k), True) for k in METRICS)]
                           for p in against for view, cells in (("all labels", p), ("seen labels", p["seen_labels"]))])


def _headline_cell(method: dict[str, Any] | None, metric: str, with_ci: bool) -> str:
    if method is None or not method.get(metric):
        return "–"
    return _with_ci(method[metric]) if with_ci else _pct(method[metric][0])


def headline(results: list[DatasetResults]) -> list[str]:
    """Method × data set: P@1 with its 95% interval and PSP@1 — the headline table of docs/results/index.md — and,
    for a data set whose evaluations hold the seen-label view, P@1 in it (predictions restricted to labels with a
    training positive: what sets a method against the linear peer without the labels the peer cannot score)."""
    cells = {(r.dataset, _row_label(m)): m for r in results for m in r.methods}
    order = list(dict.fromkeys(_row_label(m) for r in results for m in r.methods))
    seen = {r.dataset for r in results if any(m.get("seen_labels") for m in r.methods)}
    header, rows = ["method"], [[method] for method in order]
    for r in results:
        header += [f"{r.dataset} {k}" for k in HEADLINE] + ([f"{r.dataset} {HEADLINE[0]} seen labels"]
                                                          if r.dataset in seen else [])
        for method, row in zip(order, rows, strict=True):
            found = cells.get((r.dataset, method))
            row += [_headline_cell(found, k, k == HEADLINE[0]) for k in HEADLINE]
            if r.dataset in seen:
                row.append(_headline_cell((found or {}).get("seen_labels"), HEADLINE[0], False))
    return _table(header, rows)


def render_markdown(header: dict[str, Any], results: list[DatasetResults]) -> str:
    lines = ["# Results", "",
             "Written by the `results` job (`xc results` / Dagster job `results`: the assets `<data set>/results` and "
             "`results_page`); every number below comes from the records this header's run read. Its git commit is "
             "the page's; each method's model and evaluation carry their own, in the metrics tables (the job "
             "retrains and re-evaluates a method whose code or data changed, and keeps the others).", ""]
    lines += _table(["", ""], [["command", f"`{header['command']}`"], ["git commit", header["git_commit"]],
                               ["profile", header["profile"]], ["seeds", ", ".join(map(str, header["seeds"]))],
                               ["machine", header["machine"]["text"]],
                               ["date", header["date"]], ["data sets", ", ".join(header["datasets"])],
                               ["methods", ", ".join(header["methods"])], ["seconds", _num(header["seconds"], 0)],
                               ["MLflow", f"run {header.get('mlflow_run_id', '')} of experiment {EXPERIMENT}"]])
    lines += ["## Headline", "", f"Test {HEADLINE[0]} (%, 95% bootstrap interval) and {HEADLINE[1]} (%) of every "
              "method on every data set; the sections below hold the other metrics, the paired differences and the "
              "costs.", ""] + headline(results)
    for r in results:
        lines += _dataset_section(r)
    return "\n".join(lines).rstrip() + "\n"


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
    found = {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "torch_threads": torch.get_num_threads(),
             "platform": platform.platform()}
    found["text"] = (f"{cpu}, {found['cores']} cores ({found['torch_threads']} torch threads); GPU: {gpu}; "
                     f"{found['platform']}")
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
