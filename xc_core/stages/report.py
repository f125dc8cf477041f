"""``xc report`` and the ``eval_report`` asset: one HTML report per data set over every evaluated method (paired
differences, examples, the A/B tests), logged to each method's MLflow run."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.record import EvaluationRecord
from xc_core.evaluation.report import MethodResult, render_report
from xc_core.paths import eval_dir, eval_root, report_path, resolve_home
from xc_core.stages import Command, Markdown, Payload, StageAsset, register
from xc_core.stages.evaluate import PEERS
from xc_core.stages.options import add_dataset, add_profile

if TYPE_CHECKING:
    from xc_core.methods import Method

log = logging.getLogger(__name__)


def _method_result(record: EvaluationRecord) -> MethodResult:
    summary = record.summary
    return MethodResult(
        method=record.method, metrics=record.metrics, ci=record.ci(),
        index={key: summary.get(key, float("nan"))  # a peer (PECOS) has no label index
               for key in ("hnsw_recall@10", "ms_per_query", "exact_ms_per_query")},
        subsets=summary["subsets"], quantiles=record.quantiles().to_dicts(), mlflow_run_id=record.mlflow_run_id,
        tables=summary.get("tables", {}), seen=record.seen_metrics() or {}, seen_ci=record.seen_ci() or {},
        mismatch=record.mismatch() or {})


#: the paired table's view column: all predictions, or only those on labels with a training positive
FULL_VIEW, SEEN_VIEW = "all labels", "seen labels"


def _paired_rows(home: Path, dataset: str, profile: str, a: str, b: str) -> list[dict[str, Any]]:
    """a − b per metric on the same queries; against a peer also in the seen-label view (the rows after the full
    view's), so a lead that comes from labels the linear peer cannot score shows as the gap between the two."""
    from xc_core.evaluation import paired_metric_diff

    ra, rb = (EvaluationRecord.load(eval_dir(home, dataset, m, profile)) for m in (a, b))
    if ra is None or rb is None:
        return []
    views = [(FULL_VIEW, ra.per_row(), rb.per_row())]
    if b in PEERS:
        views.append((SEEN_VIEW, ra.seen_per_row(), rb.seen_per_row()))
    rows = []
    for view, rows_a, rows_b in views:
        if rows_a is None or rows_b is None:  # not saved (the seen-label view: an evaluation from before it)
            continue
        for key in ("P@1", "P@5", "R@10", "PSP@1", "PSP@5"):
            result = paired_metric_diff(rows_a, rows_b, key)
            if result is not None:
                diff, low, high, p = result
                rows.append({"comparison": f"{a} − {b}", "view": view, "metric": key, "diff": diff, "low": low,
                             "high": high, "p": p})
    return rows


def _examples(dataset: XCDataset, home: Path, profile: str, method: str, n: int = 6) -> list[dict[str, Any]]:
    record = EvaluationRecord.load(eval_dir(home, dataset.name, method, profile))
    if record is None:
        return []
    top, scores = record.top(), record.top_scores()
    rng = np.random.default_rng(0)
    picks = rng.choice(len(dataset.test_texts), min(n, len(dataset.test_texts)), replace=False)
    examples = []
    for i in picks:
        truth = set(dataset.y_test[i].indices.tolist())
        preds = [{"label": dataset.label_texts[j], "hit": int(j) in truth,
                  "score": None if scores is None else float(scores[i, r])}  # None: saved before scores were
                 for r, j in enumerate(top[i, :5]) if j >= 0]
        note = f"{method}; novel query" if dataset.test_novel[i] else method
        examples.append({"query": dataset.test_texts[i], "note": note, "predictions": preds})
    return examples


def build_report(dataset: XCDataset, profile: str, home: Path) -> dict[str, Any]:
    """Compare every evaluated method of the data set in one HTML file; log it to each method's MLflow run.

    Args:
        dataset: the data set whose evaluations (``<home>/eval/<data set>/*-<profile>``) are compared.
        profile: the profile of the evaluations to compare.
        home: the data root; the report goes to ``<home>/reports``.

    Returns:
        The data set, the profile, the report's path and its methods, the
        paired differences and the label-decile rows.
    """
    from xc_core.evaluation import diff_at_k

    root = eval_root(home, dataset.name)
    records = [r for r in (EvaluationRecord.load(p) for p in sorted(root.glob(f"*-{profile}"))) if r is not None]
    if not records:
        raise FileNotFoundError(f"{root}: nothing evaluated yet — run `xc eval` first")
    results = [_method_result(r) for r in records]
    methods = [r.method for r in results]
    pairs = report_pairs(methods)
    diffs = [row for a, b in pairs for row in _paired_rows(home, dataset.name, profile, a, b)]
    diff_table: list[dict[str, Any]] = []
    graph = next(((a, b) for a, b in pairs if _declares(a, b)), None)  # a method and its first baseline
    if graph is not None:
        by_method = {r.method: r for r in records}
        diff_table = diff_at_k(by_method[graph[1]].false_negatives(), by_method[graph[0]].false_negatives()).to_dicts()
    best = max(results, key=lambda r: r.metrics.get("P@1", float("-inf"))).method
    examples = _examples(dataset, home, profile, best)
    from xc_core.evaluation import trained_labels, untrained_positive_share

    untrained = untrained_positive_share(dataset.y_test, trained_labels(dataset.y_train))
    notes = {"profile": profile, "test documents": len(dataset.test_texts), "labels": dataset.n_labels,
             "PSP A": dataset.psp_constants[0], "PSP B": dataset.psp_constants[1],
             "test positives on labels without a training positive": f"{100 * untrained['pairs']:.2f}%",
             "test documents with only such positives": f"{100 * untrained['rows']:.2f}%"}
    tradeoffs = {r.method: r.folder / "tradeoff.png" for r in records if (r.folder / "tradeoff.png").is_file()}
    from xc_core.stages.abtest import report_section
    from xc_core.stages.label_deciles import label_decile_rows

    deciles = label_decile_rows(home, dataset, profile)
    path = render_report(dataset.name, results, report_path(home, dataset.name, profile), diff_table, examples, notes,
                         paired=diffs, tradeoffs=tradeoffs, diff_methods=graph,
                         abtests=report_section(home, dataset.name, profile), label_deciles=deciles)
    _attach(results, path, home)
    return {"dataset": dataset.name, "profile": profile, "report": str(path), "methods": methods,
            "paired_differences": diffs, "label_deciles": deciles}


def _method(name: str) -> Method | None:
    from xc_core.methods import get_method

    try:
        return get_method(name)
    except ValueError:  # a peer's folder (pecos), not a registered method
        return None


def _declares(method: str, baseline: str) -> bool:
    found = _method(method)
    return found is not None and found.baselines[:1] == (baseline,)


def report_pairs(methods: list[str]) -> list[tuple[str, str]]:
    """(a, b) pairs the report compares (a − b on the same queries), as the methods declare them: each method
    against its ``baselines``, each ablation's full method against it, and every method against the peers."""
    pairs: list[tuple[str, str]] = []
    for name in methods:
        method = _method(name)
        if method is None:
            continue
        pairs += [(name, b) for b in method.baselines if b in methods]
        if method.ablation_of in methods:
            pairs.append((method.ablation_of, name))
    pairs += [(m, peer) for peer in PEERS if peer in methods for m in methods if m != peer]
    return pairs


def _attach(results: list[MethodResult], path: Path, home: Path) -> None:
    """Log the report to each method's training run. A run this store does not hold (trained under another
    MLFLOW_TRACKING_URI, or by a `make run` before the store moved into the home) is skipped with a warning:
    the report stands without it."""
    import mlflow
    from mlflow.exceptions import MlflowException

    from xc_core.tracking.store import tracking_uri

    uri = tracking_uri(home)
    client = mlflow.MlflowClient(uri)
    for r in results:
        if not r.mlflow_run_id:
            continue
        try:
            client.get_run(r.mlflow_run_id)
        except MlflowException:
            log.warning("report not attached to %s's run %s: no such run in %s", r.method, r.mlflow_run_id, uri)
            continue
        client.log_artifact(r.mlflow_run_id, str(path), artifact_path="report")


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.stages.anchor_sets import load_with_anchors

    home = resolve_home(args.home)
    return build_report(load_with_anchors(home, args.dataset), args.profile, home)


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    add_profile(command)


class ReportOptions(BaseModel):
    profile: str = Field(default="demo", description="profile the encoders were trained with")


def materialize_report(home: Path, dataset: str, method: str | None, options: ReportOptions) -> dict[str, Any]:
    """The ``eval_report`` asset: the report, a P@1 / PSP@1 table of its methods, and the paired differences."""
    from xc_core.stages.anchor_sets import load_with_anchors

    out = build_report(load_with_anchors(home, dataset), options.profile, home)
    rows = ["| method | P@1 | PSP@1 |", "|---|---|---|"]
    for name in out["methods"]:
        record = EvaluationRecord.load(eval_dir(home, dataset, name, options.profile))
        m = record.metrics if record is not None else {}
        rows.append(f"| {name} | {100 * m.get('P@1', float('nan')):.2f} | {100 * m.get('PSP@1', float('nan')):.2f} |")
    return {"summary": Markdown("\n".join(rows)), "report": Path(out["report"]),
            "paired_differences": out["paired_differences"], "methods": out["methods"],
            "label_deciles": out["label_deciles"]}


COMMAND = register(Command(
    "report", "HTML report over every evaluated method", _arguments, _run,
    asset=StageAsset("eval_report", "One self-contained HTML report comparing every evaluated method, with their "
                                    "simulated A/B tests (logged to MLflow)", materialize_report,
                     deps=("offline_eval", "ab_vs_control", "peer_eval"), options=ReportOptions, kinds=("html",)),
    docs="docs/evaluation.md"))
