"""The evaluation stage as the CLI and Dagster both run it: index → predictions → metrics → analyses,
then one HTML report per data set over every evaluated method."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.fallback import FALLBACK_TABLE, fallback_rows
from xc_core.evaluation.metrics import evaluate, filter_predictions, propensity, top_k
from xc_core.evaluation.record import MISMATCH, EvaluationRecord, fingerprint_test_split
from xc_core.evaluation.report import MethodResult, render_report
from xc_core.methods import Method, Predictions, get_method
from xc_core.paths import eval_dir, eval_root, index_dir, report_path
from xc_core.provenance import code_stamp
from xc_core.training.record import TrainedModel

log = logging.getLogger(__name__)


def index_method(dataset: XCDataset, method: str, profile: str, home: Path, progress: bool = False) -> Predictions:
    """The index stage of a trained method (``xc index`` and the Dagster ``label_index`` asset): the method
    scores the test queries anew and saves what it needs in its index folder; returns the predictions."""
    trained = TrainedModel.of(home, dataset.name, method, profile)
    return get_method(method).predict(dataset, trained, index_dir(home, dataset.name, method, profile),
                                      progress=progress)


#: what ``xc eval --split`` scores: the test split (read once, for results) or the validation rows the stages select
#: on (for deciding what to build: never the test split)
SPLITS = ("test", "validation")


class SplitUnavailableError(LookupError, ValueError):
    """A split a method cannot be scored on (a LookupError: the CLI prints one line and exits 2)."""



def validation_split(dataset: XCDataset, trained: TrainedModel) -> XCDataset:
    """The model's validation rows as a test split (:meth:`XCDataset.validation_view`): the seeded split of the
    training documents its trainer and classifier stage held out (the profile's sizes, the model's seed), scored
    with the test protocol — their own labels filtered, the same label space."""
    from xc_core.profiles import get_profile, train_settings
    from xc_core.training.trainer import split_validation

    cfg = train_settings(get_profile(trained.profile))
    cfg = cfg.model_copy(update={"seed": int(trained.summary.get("seed", cfg.seed))})
    train_rows, val_rows = split_validation(len(dataset.train_texts), cfg)
    return dataset.validation_view(train_rows, val_rows)


def split_dirs(home: Path, dataset: str, method: str, profile: str, split: str) -> tuple[Path, Path]:
    """(index folder, evaluation folder) of a split: the validation ones sit in a ``validation/`` sub-folder, so
    they never mix with the test split's (reports and seed tables read only the latter)."""
    index, out = index_dir(home, dataset, method, profile), eval_dir(home, dataset, method, profile)
    if split == "test":
        return index, out
    if split not in SPLITS:
        raise SplitUnavailableError(f"split {split!r}: choose one of {', '.join(SPLITS)}")
    return index.parent / split / index.name, out.parent / split / out.name


def evaluate_method(dataset: XCDataset, method: str, profile: str, home: Path,
                    progress: bool = False, split: str = "test") -> dict[str, Any]:
    """Score the full test split with the method (reusing the index stage's predictions when still valid),
    save metrics, per-row arrays and the method's own analyses; log the metrics to its training run.

    ``split="validation"`` scores the model's validation rows instead (:func:`validation_split`), into their own
    folders, logged as ``validation/…``: what experiments about what to build read, so they never read the test
    split. A method whose final fit saw those rows (a ``fits_on_validation = True`` attribute) refuses: its number
    would be in-sample."""
    started = time.perf_counter()
    found = get_method(method)
    index, out = split_dirs(home, dataset.name, method, profile, split)
    if split == "validation" and getattr(found, "fits_on_validation", False):
        raise SplitUnavailableError(f"{method}: its final fit trains on every training document, validation rows "
                                    "included, so its validation score would be in-sample; evaluate it with "
                                    "--split test")
    trained = TrainedModel.of(home, dataset.name, method, profile)
    if split == "validation":
        dataset = validation_split(dataset, trained)
    preds = found.predict(dataset, trained, index, reuse=True, progress=progress)
    analyses = found.analyse(dataset, trained, preds, out)
    choices = fallback_rows(method, trained.summary)
    if choices:  # the report shows how each learned choice fared against its fallback, beside the method's tables
        analyses["tables"] = {**analyses.get("tables", {}), FALLBACK_TABLE: choices}
    info = {"dataset": dataset.name, "method": method, "profile": profile, **preds.index_metrics(),
            "test_split": preds.test_split, "mlflow_run_id": trained.mlflow_run_id, **code_stamp(),
            "split": split, **analyses}
    summary, metrics = evaluate_scores(dataset, preds.scores, out, info, started)
    recall = preds.index_recall_at_10  # a method without an ANN index has none to log
    _log_to_run(trained, metrics if recall is None else {**metrics, "hnsw_recall@10": recall}, split)
    return summary


def evaluate_scores(dataset: XCDataset, raw_scores: Any, out: Path, info: dict[str, Any],
                    started: float | None = None) -> tuple[dict[str, Any], dict[str, float]]:
    """Score a test document × label matrix (any method's, or a peer's) with xc's metrics and analyses and
    save them in ``out`` as the report and the seed tables read them: (summary, headline metrics).

    Beside the full view it saves the seen-label view (``seen_label_view``: predictions restricted to labels with
    a training positive, all the linear peer can score): its metrics in ``summary["seen_labels"]``, its per-query
    terms and intervals in the record, its query-decile rows as ``decile <d>, seen labels`` subsets, and the test
    split's ``untrained_positive_share`` and ``untrained_only_rows``.

    On a data set whose labels carry item metadata (``XCDataset.label_attributes``: brand, location) it also
    saves the brand / location mismatch in the top-k of the test queries naming one
    (:func:`~xc_core.evaluation.mismatch.mismatch_summary`) as ``summary["mismatch"]``; elsewhere there is none."""
    from xc_core.evaluation import (
        confidence_intervals,
        false_negatives_at_k,
        label_quantiles,
        per_row_metrics,
        quantile_contributions,
        seen_label_view,
        subset_metrics,
    )

    started = time.perf_counter() if started is None else started
    scores = filter_predictions(raw_scores, dataset.filter_pairs)
    inv = propensity(dataset)
    metrics = {**evaluate(dataset.y_test, scores, k=5, inv_propensity=inv)}
    wide = evaluate(dataset.y_test, scores, k=100)
    metrics.update({"R@10": wide["R@10"], "R@100": wide["R@100"]})
    top = top_k(scores, 100)
    per_row = per_row_metrics(dataset.y_test, top, inv)
    ci = confidence_intervals(per_row)
    bins = label_quantiles(dataset.y_train)
    quantiles = quantile_contributions(dataset.y_test, top, bins, 5)
    fn = false_negatives_at_k(dataset.y_test, top, bins)
    subsets = {
        "seen queries": subset_metrics(dataset.y_test, scores, rows_mask=~dataset.test_novel, inv_propensity=inv),
        "novel queries": subset_metrics(dataset.y_test, scores, rows_mask=dataset.test_novel, inv_propensity=inv),
        "novel labels": subset_metrics(dataset.y_test, scores, labels_mask=dataset.label_novel, inv_propensity=inv),
    }
    seen = seen_label_view(dataset.y_test, scores, dataset.y_train, inv_propensity=inv)
    from xc_core.evaluation.mismatch import mismatch_summary

    mismatch = mismatch_summary(dataset.test_texts, top, dataset.label_attributes)  # {} without item metadata
    if dataset.test_decile is not None:
        from xc_core.evaluation import decile_metrics

        # each view's rows apart (the seen-label view's named so): a decile's gap to the peer, less what it cannot score
        for suffix, view_scores in (("", scores), (", seen labels", seen.scores)):
            deciles = decile_metrics(dataset.y_test, view_scores, dataset.test_decile, inv_propensity=inv)
            for row in deciles.iter_rows(named=True):
                subsets[f"decile {row['decile']}{suffix}"] = {k: v for k, v in row.items() if k != "decile"}
    summary = {"dataset": info.pop("dataset", dataset.name), "method": info.pop("method"),
               "profile": info.pop("profile"), **metrics, "test_documents": len(dataset.test_texts),
               "test_split": info.pop("test_split", None) or fingerprint_test_split(dataset), **info,
               "seen_labels": seen.metrics, "untrained_positive_share": seen.untrained_positive_share,
               "untrained_only_rows": seen.untrained_only_rows,
               **({MISMATCH: mismatch} if mismatch else {}),
               "subsets": subsets, "seconds": round(time.perf_counter() - started, 2)}
    EvaluationRecord.save(out, summary, top, per_row, quantiles, fn, ci, top_scores=_scores_of(scores, top),
                          seen_per_row=seen.per_row, seen_ci=confidence_intervals(seen.per_row))
    return summary, metrics


def _scores_of(scores: Any, top: np.ndarray) -> np.ndarray:
    """The score of each label in ``top`` (NaN where ``top`` pads with -1): the report shows them."""
    import scipy.sparse as sp

    matrix = sp.csr_matrix(scores)
    rows = np.repeat(np.arange(top.shape[0]), top.shape[1])
    cols = top.ravel()
    out = np.full(top.size, np.nan, dtype=np.float32)
    kept = cols >= 0
    out[kept] = np.asarray(matrix[rows[kept], cols[kept]]).ravel()
    return out.reshape(top.shape)


def _log_to_run(trained: TrainedModel, metrics: dict[str, float], split: str = "test") -> None:
    import mlflow

    client = mlflow.MlflowClient(trained.tracking_uri)
    for key, value in metrics.items():
        client.log_metric(trained.mlflow_run_id, f"{split}/{key.replace('@', '_at_')}", float(value))


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
    """Compare every evaluated method of the data set in one HTML file; log it to each method's MLflow run."""
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
    tradeoffs = {r.method: r.folder / "tradeoff.png" for r in records if (r.folder / "tradeoff.png").exists()}
    from xc_core.stages.abtest import report_section

    path = render_report(dataset.name, results, report_path(home, dataset.name, profile), diff_table, examples, notes,
                         paired=diffs, tradeoffs=tradeoffs, diff_methods=graph,
                         abtests=report_section(home, dataset.name, profile))
    _attach(results, path, home)
    return {"dataset": dataset.name, "profile": profile, "report": str(path), "methods": methods,
            "paired_differences": diffs}


PEERS = ("pecos",)  # scored by benchmarks/peer_eval.py into the same folders: every method is paired with them


def _method(name: str) -> Method | None:
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
