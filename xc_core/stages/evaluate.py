"""``xc eval`` and the ``offline_eval`` asset: a method's predictions on the test split (or its validation rows)
→ metrics with bootstrap intervals, per-row terms, subsets and the method's analyses, logged to its run."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.fallback import FALLBACK_TABLE, fallback_rows
from xc_core.evaluation.metrics import evaluate, filter_predictions, propensity, top_k
from xc_core.evaluation.record import MISMATCH, EvaluationRecord, fingerprint_test_split
from xc_core.index import RANKING
from xc_core.paths import eval_dir, index_dir, resolve_home
from xc_core.provenance import code_stamp
from xc_core.stages import Command, Payload, StageAsset, register
from xc_core.stages.options import add_dataset, add_method, add_profile
from xc_core.training.record import TrainedModel

log = logging.getLogger(__name__)

#: the linear peers, scored by xc_core.stages.peer into the same folders: every method is paired with them.
#: ``pecos``: XR-Linear on TF-IDF; ``pecos-xc``: XR-Linear on xc's own features, [TF-IDF ⊕ the untrained encoder's
#: vectors] (the XR-Transformer-style peer)
PEERS = ("pecos", "pecos-xc")


#: what ``xc eval --split`` scores: the test split (read once, for results) or the validation rows the stages select
#: on (for deciding what to build: never the test split)
SPLITS = ("test", "validation")


class SplitUnavailableError(LookupError, ValueError):
    """A split a method cannot be scored on (a LookupError: the CLI prints one line and exits 2)."""



def validation_split(dataset: XCDataset, trained: TrainedModel) -> XCDataset:
    """The model's validation rows as a test split (:meth:`XCDataset.validation_view`): the split its trainer held
    out, rebuilt from the settings the model *recorded* (``validation_split`` in its record: a model trained with
    ``--set val_fraction=…`` is scored on its own rows, not the profile's), scored with the test protocol — their own
    labels filtered, the same label space; a temporal split's rows against the clicks of the validation days."""
    from xc_core.training.validation import recorded_split_config
    from xc_core.training.validation import validation_split as rebuild

    found = rebuild(dataset, recorded_split_config(trained.summary, f"{trained.method} on {dataset.name}"))
    return dataset.validation_view(found.train_rows, found.val_rows, found.y_fit, found.y_val)


def split_dirs(home: Path, dataset: str, method: str, profile: str, split: str) -> tuple[Path, Path]:
    """(index folder, evaluation folder) of a split: the validation ones sit in a ``validation/`` sub-folder, so
    they never mix with the test split's (reports and seed tables read only the latter)."""
    index = index_dir(home, dataset, method, profile)
    if split == "test":
        return index, eval_dir(home, dataset, method, profile)
    if split not in SPLITS:
        raise SplitUnavailableError(f"split {split!r}: choose one of {', '.join(SPLITS)}")
    return index.parent / split / index.name, eval_dir(home, dataset, method, profile, split)


def evaluate_method(dataset: XCDataset, method: str, profile: str, home: Path,
                    progress: bool = False, split: str = "test") -> dict[str, Any]:
    """Score the full test split with the method (reusing the index stage's predictions when still valid),
    save metrics, per-row arrays and the method's own analyses; log the metrics to its training run.

    ``split="validation"`` scores the model's validation rows instead (:func:`validation_split`), into their own
    folders, logged as ``validation/…``: what experiments about what to build read, so they never read the test
    split.

    Args:
        dataset: the data set with its anchor sets, as the method was trained on it.
        method: a trained method of the home (a key of the method registry).
        profile: the profile it was trained at.
        home: the data root holding its model; the evaluation goes to ``<home>/eval/<data set>/…``.
        progress: show progress bars.
        split: ``"test"`` or ``"validation"``.

    Returns:
        The evaluation summary: each metric with its 95% interval, the subsets, the MLflow run id and the commits.

    Raises:
        SplitUnavailableError: an unknown split, or ``split="validation"`` for a method whose final fit saw those
            rows (its ``fits_on_validation(record)`` is true): its number would be in-sample.
    """
    from xc_core.methods import get_method
    from xc_core.methods.versions import method_stamp

    started = time.perf_counter()
    found = get_method(method)
    index, out = split_dirs(home, dataset.name, method, profile, split)
    trained = TrainedModel.of(home, dataset.name, method, profile)
    fits_on_validation = getattr(found, "fits_on_validation", None)
    if split == "validation" and fits_on_validation is not None and fits_on_validation(trained.summary):
        raise SplitUnavailableError(f"{method}: its final fit trained on every training document, validation rows "
                                    "included, so its validation score would be in-sample; retrain it with the "
                                    "classifier's hold_out_validation on (the default), or evaluate it with "
                                    "--split test")
    if split == "validation":
        dataset = validation_split(dataset, trained)
    preds = found.predict(dataset, trained, index, reuse=True, progress=progress)
    analyses = found.analyse(dataset, trained, preds, out)
    choices = fallback_rows(method, trained.summary)
    if choices:  # the report shows how each learned choice fared against its fallback, beside the method's tables
        analyses["tables"] = {**analyses.get("tables", {}), FALLBACK_TABLE: choices}
    # the metrics read an exact ranking (flat inner products over every label); a method with an ANN index has its
    # recall@10 against that ranking beside them
    info = {"dataset": dataset.name, "method": method, "profile": profile, **preds.index_metrics(), "ranking": RANKING,
            "test_split": preds.test_split, "mlflow_run_id": trained.mlflow_run_id, **code_stamp(),
            **method_stamp(method, "evaluate"),
            "split": split, **analyses}
    summary, metrics = evaluate_scores(dataset, preds.scores, out, info, started)
    recall = preds.index_recall_at_10  # a method without an ANN index has none to log
    _log_to_run(trained, metrics if recall is None else {**metrics, "hnsw_recall@10": recall}, split)
    return summary


def evaluate_promotion_split(home: Path, dataset: str, method: str, profile: str) -> dict[str, Any]:
    """Score the trained method on the promotion split the registry gate decides on (its validation rows:
    ``tracking.registry.PROMOTION_SPLIT``), as the ``challenger`` asset and ``xc promote`` do before registering it.
    Scored each time (a cheap pass over at most ``val_max`` rows), so the gate never reads a stale evaluation.

    Args:
        home: the data root holding the trained model.
        dataset: the data set's name.
        method: the trained method.
        profile: the profile it was trained at.

    Returns:
        The evaluation summary on the promotion split, as :func:`evaluate_method` returns it.
    """
    from xc_core.stages.anchor_sets import load_with_anchors
    from xc_core.tracking.registry import PROMOTION_SPLIT

    return evaluate_method(load_with_anchors(home, dataset), method, profile, home, split=PROMOTION_SPLIT)


def evaluate_scores(dataset: XCDataset, raw_scores: Any, out: Path, info: dict[str, Any],
                    started: float | None = None) -> tuple[dict[str, Any], dict[str, float]]:
    """Score a test document × label matrix (any method's, or a peer's) with xc's metrics and analyses and
    save them in ``out`` as the report and the seed tables read them.

    Beside the full view it saves the seen-label view (``seen_label_view``: predictions restricted to labels with
    a training positive, all the linear peer can score): its metrics in ``summary["seen_labels"]``, its per-query
    terms and intervals in the record, its query-decile rows as ``decile <d>, seen labels`` subsets, and the test
    split's ``untrained_positive_share`` and ``untrained_only_rows``.

    On a data set whose labels carry item metadata (``XCDataset.label_attributes``: brand, location) it also
    saves the brand / location mismatch in the top-k of the test queries naming one
    (:func:`~xc_core.evaluation.mismatch.mismatch_summary`) as ``summary["mismatch"]``; elsewhere there is none.

    Args:
        dataset: the data set whose test split the rows of ``raw_scores`` are.
        raw_scores: the (test documents × labels) score matrix, as a method's ``Predictions.scores`` or a peer's.
        out: the evaluation folder to write.
        info: what the record carries besides the metrics (method, profile, commits, run ids).
        started: ``time.perf_counter()`` at the start of the scoring, for the record's seconds.

    Returns:
        (summary, headline metrics): the saved summary, and each headline metric's point estimate.
    """
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
    bins = label_quantiles(dataset.y_train)
    per_row = per_row_metrics(dataset.y_test, top, inv, bins)  # with tail_P@5: the gate's tail guard is paired
    ci = confidence_intervals(per_row)
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


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    add_method(command)
    add_profile(command)
    command.add_argument("--split", default="test", choices=SPLITS,
                         help="test (read once, for results) or validation: the rows the stages select on, "
                              "scored with the test protocol — for deciding what to build")


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.stages.anchor_sets import load_with_anchors

    home = resolve_home(args.home)
    summary = evaluate_method(load_with_anchors(home, args.dataset), args.method, args.profile, home,
                              progress=not args.quiet, split=args.split)
    summary.pop("subsets", None)
    return summary


class EvaluateOptions(BaseModel):
    profile: str = Field(default="demo", description="profile the encoders were trained with")


#: the metrics an ``offline_eval`` materialization shows
SHOWN = ("P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@5", "R@10", "R@100", "hnsw_recall@10")


def materialize_evaluation(home: Path, dataset: str, method: str | None, options: EvaluateOptions) -> dict[str, Any]:
    """The ``offline_eval`` asset of one method partition, stamped for the results job's freshness rule.

    Args:
        home: the data root.
        dataset: the data set's name.
        method: the partition's method (never None: the asset is partitioned by method).
        options: the asset's config (its profile).

    Returns:
        The headline metrics rounded to 4 decimals, the MLflow run id, the subsets and the record's stamp.
    """
    from xc_core.methods.versions import RECORD_KEY  # the code the evaluation ran
    from xc_core.provenance import record_stamp
    from xc_core.stages.anchor_sets import load_with_anchors

    assert method is not None  # a per-method asset
    summary = evaluate_method(load_with_anchors(home, dataset), method, options.profile, home)
    shown = {k: round(float(v), 4) for k, v in summary.items() if k in SHOWN}
    log.info("%s: %s", method, shown)
    return {**shown, "mlflow_run_id": summary["mlflow_run_id"], "subsets": summary["subsets"],
            **record_stamp(home, options.profile, summary[RECORD_KEY])}


COMMAND = register(Command(
    "eval", "offline evaluation of one trained method on the test split", _arguments, _run,
    asset=StageAsset("offline_eval", "pyxclib-exact P/nDCG/PSP/PSnDCG/R on the full test split, bootstrap CIs, label "
                                     "quantiles, seen/novel subsets", materialize_evaluation, deps=("label_index",),
                     per_method=True, options=EvaluateOptions, kinds=("scipy",), code_stage="evaluate"),
    docs="docs/evaluation.md"))
