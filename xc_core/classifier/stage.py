"""The classifier stage for one trained encoder: cache embeddings, train W, choose alpha on validation, save.

Validation rows are the encoder trainer's own (``split_validation`` with the same seed): held out of the
encoder's training, of W's and of the lexical channel's voters, so alpha and the lexical weight are chosen on
documents no part has seen. A validation document's own label (same id) is never scored, as the test filter
removes a test document's own label.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.config import ClassifierConfig
from xc_core.classifier.fusion import FusedClassifier, drop_pairs, rescore, union_ids
from xc_core.classifier.lexical import LexicalChannel
from xc_core.classifier.train import train_classifier
from xc_core.datasets.container import XCDataset

log = logging.getLogger(__name__)
LABEL_VECTORS = "label_vectors.npy"  # the encoder's label embeddings, beside (not inside) the classifier folder


def label_vectors_path(classifier_dir: Path) -> Path:
    """Where the stage caches the label embeddings it trained from: the index reuses them instead of
    encoding every label again; outside the folder that becomes the MLflow model."""
    return classifier_dir.parent / LABEL_VECTORS


def alpha_curve(queries: np.ndarray, truth: sp.csr_matrix, label_vecs: np.ndarray, weights: np.ndarray,
                alphas: tuple[float, ...], search_k: int, exclude: np.ndarray, inv_propensity: np.ndarray,
                lexical: LexicalChannel | None = None, texts: list[str] | None = None,
                lexical_weights: tuple[float, ...] = (0.0,)) -> list[dict[str, float]]:
    """Validation metrics of every (alpha, lexical weight) over one exact shortlist (label text ∪ W ∪ the
    lexical channel's top labels, ``search_k`` each)."""
    from xc_core.evaluation.metrics import evaluate
    from xc_core.evaluation.predict import to_csr
    from xc_core.index import IndexConfig, LabelIndex

    flat = IndexConfig(kind="flat")
    depth = search_k + 1  # room for the dropped self pair
    _, enc_ids = LabelIndex.build(label_vecs, None, flat).search(queries, depth)
    _, clf_ids = LabelIndex.build(weights, None, flat).search(queries, depth)
    candidates, lexical_scores = union_ids(enc_ids, clf_ids), None
    if lexical is None:
        lexical_weights = (0.0,)
    else:
        candidates, lexical_scores = lexical.shortlist(texts or [], depth, candidates)
    curve = []
    for weight in lexical_weights:
        for alpha in alphas:
            scores, ids = drop_pairs(*rescore(queries, candidates, label_vecs, weights, alpha, depth,
                                              lexical=lexical_scores, lexical_weight=weight), exclude)
            metrics = evaluate(truth, to_csr(scores[:, :search_k], ids[:, :search_k], truth.shape[1]), k=5,
                               inv_propensity=inv_propensity)
            curve.append({"alpha": float(alpha), "lexical_weight": float(weight),
                          **{key: float(v) for key, v in metrics.items()}})
    return curve


def _fit_lexical(dataset: XCDataset, train_rows: np.ndarray, y: sp.csr_matrix,
                 cfg: ClassifierConfig) -> LexicalChannel | None:
    """The lexical channel over the classifier's training rows (None when no weight > 0 is to be tried)."""
    if not any(w > 0 for w in cfg.lexical.weights):
        return None
    return LexicalChannel.fit([dataset.train_texts[i] for i in train_rows], y[train_rows], cfg.lexical)


def fit_classifier_stage(dataset: XCDataset, encoder_dir: Path, max_length: int, cfg: ClassifierConfig,
                         split_seed_cfg: Any, out_dir: Path, progress: bool = False) -> FusedClassifier:
    """Train the classifier of the encoder in ``encoder_dir`` and pick alpha; saved under ``out_dir``.

    ``split_seed_cfg``: the method's TrainConfig, whose seed and validation sizes fix the validation rows."""
    from xc_core.evaluation.predict import encoder_for
    from xc_core.evaluation.stage import propensity
    from xc_core.training.trainer import split_validation

    encoder = encoder_for(encoder_dir, max_length)
    label_vecs = encoder.encode(dataset.label_texts, progress=progress, desc="labels")
    doc_vecs = encoder.encode(dataset.train_texts, progress=progress, desc="train documents")
    train_rows, val_rows = split_validation(len(dataset.train_texts), split_seed_cfg)
    y = sp.csr_matrix(dataset.y_train)
    fit = train_classifier(label_vecs, doc_vecs[train_rows], y[train_rows], cfg, progress=progress)
    lexical = _fit_lexical(dataset, train_rows, y, cfg)
    curve = alpha_curve(doc_vecs[val_rows], y[val_rows], label_vecs, fit.weights, cfg.alphas, cfg.search_k,
                        dataset.own_label_pairs(val_rows), propensity(dataset), lexical,
                        [dataset.train_texts[i] for i in val_rows], cfg.lexical.weights)
    # ties → no (or less) lexical channel, then more encoder: the cheaper, text-first model
    best = max(curve, key=lambda row: (row[cfg.select_metric], -row["lexical_weight"], row["alpha"]))
    encoder_only = [r[cfg.select_metric] for r in curve if r["alpha"] == 1.0 and r["lexical_weight"] == 0.0]
    log.info("classifier: alpha %.2f, lexical weight %.2f chosen on %d validation rows (%s %.4f; encoder only %s)",
             best["alpha"], best["lexical_weight"], len(val_rows), cfg.select_metric, best[cfg.select_metric],
             f"{encoder_only[0]:.4f}" if encoder_only else "not tried")
    fused = FusedClassifier(fit.weights, best["alpha"], cfg.search_k, {
        "select_metric": cfg.select_metric, "validation_rows": len(val_rows), "alpha_curve": curve,
        "history": fit.history, "train_seconds": fit.seconds, "train_pairs": fit.pairs,
        "labels_trained": fit.labels_trained, "labels": len(dataset.label_texts), "config": cfg.model_dump()},
        lexical, best["lexical_weight"])
    fused.save(out_dir)
    np.save(label_vectors_path(out_dir), label_vecs)
    return fused
