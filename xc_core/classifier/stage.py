"""The classifier stage for one trained encoder: cache embeddings, train W, choose alpha on validation, save.

Validation rows are the encoder trainer's own (``split_validation`` with the same seed): held out of the
encoder's training, of W's and of the lexical channel's voters, so alpha and the lexical weight are chosen on
documents no part has seen. A validation document's own labels (``XCDataset.own_label_pairs``: same id, or the
folder's train filter) are never scored, as the test filter removes a test document's own label. Every learned
fusion must beat the encoder alone on held-out validation rows (``evaluation/fallback.py``), or is not served.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.config import ClassifierConfig
from xc_core.classifier.fusion import LABEL_VECTORS, FusedClassifier, drop_pairs, rescore
from xc_core.classifier.lexical import LexicalChannel
from xc_core.classifier.shortlist import union_ids
from xc_core.classifier.train import train_classifier
from xc_core.datasets.container import XCDataset
from xc_core.seeds import Stream

log = logging.getLogger(__name__)


def label_vectors_path(classifier_dir: Path) -> Path:
    """Where the stage caches the label embeddings it trained from: the index reuses them instead of
    encoding every label again; outside the folder that becomes the MLflow model."""
    return classifier_dir.parent / LABEL_VECTORS


class FusionGrid:
    """The validation rows' exact shortlist (label text ∪ W ∪ the lexical channel's top labels, ``search_k``
    each), re-ranked under any (alpha, lexical weight, untrained-label offset); a row's own label never counts, as
    in the test filter. ``untrained``: labels without a positive in W's training rows (the offset's labels)."""

    def __init__(self, queries: np.ndarray, truth: sp.csr_matrix, label_vecs: np.ndarray, weights: np.ndarray,
                 search_k: int, exclude: np.ndarray, inv_propensity: np.ndarray,
                 lexical: LexicalChannel | None = None, texts: list[str] | None = None,
                 untrained: np.ndarray | None = None) -> None:
        from xc_core.index import IndexConfig, LabelIndex

        flat = IndexConfig(kind="flat")
        self.depth = search_k + 1  # room for the dropped self pair
        self.queries, self.truth, self.label_vecs, self.weights = queries, truth, label_vecs, weights
        self.search_k, self.exclude, self.inv_propensity = search_k, exclude, inv_propensity
        _, enc_ids = LabelIndex.build(label_vecs, None, flat).search(queries, self.depth)
        _, clf_ids = LabelIndex.build(weights, None, flat).search(queries, self.depth)
        self.candidates, self.lexical_scores = union_ids(enc_ids, clf_ids), None
        self.has_lexical = lexical is not None
        self.untrained = np.zeros(len(label_vecs), bool) if untrained is None else np.asarray(untrained, bool)
        if lexical is not None:
            self.candidates, self.lexical_scores = lexical.shortlist(texts or [], self.depth, self.candidates)

    def ranked(self, alpha: float, weight: float, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the top ``search_k`` per validation row under this fusion, own labels dropped."""
        offsets = np.where(self.untrained, np.float32(offset), np.float32(0.0)) if offset else None
        scores, ids = drop_pairs(*rescore(self.queries, self.candidates, self.label_vecs, self.weights, alpha,
                                          self.depth, lexical=self.lexical_scores, lexical_weight=weight,
                                          offsets=offsets), self.exclude)
        return scores[:, : self.search_k], ids[:, : self.search_k]

    def top(self, fusion: dict[str, float]) -> np.ndarray:
        """Each validation row's top-5 label ids under ``fusion`` (alpha, lexical weight, offset), −1 padded."""
        return self.ranked(fusion["alpha"], fusion["lexical_weight"], fusion.get("untrained_offset", 0.0))[1][:, :5]

    def metrics(self, alpha: float, weight: float, rows: np.ndarray | None = None,
                offset: float = 0.0) -> dict[str, float]:
        """Validation metrics of one fusion, over ``rows`` of the validation rows (default: all)."""
        from xc_core.evaluation.metrics import evaluate, to_csr

        scores, ids = self.ranked(alpha, weight, offset)
        truth = self.truth
        if rows is not None:
            scores, ids, truth = scores[rows], ids[rows], truth[rows]
        found = evaluate(truth, to_csr(scores, ids, truth.shape[1]), k=5, inv_propensity=self.inv_propensity)
        return {key: float(v) for key, v in found.items()}

    def curve(self, alphas: tuple[float, ...], weights: tuple[float, ...]) -> list[dict[str, float]]:
        """Validation metrics of every (alpha, lexical weight); only weight 0 without a lexical channel."""
        weights = weights if self.has_lexical else (0.0,)
        return [{"alpha": float(a), "lexical_weight": float(w), **self.metrics(a, w)} for w in weights for a in alphas]


ENCODER_ONLY = {"alpha": 1.0, "lexical_weight": 0.0}  # the do-nothing fallback of every fusion


def choose_fusion(grid: FusionGrid, curve: list[dict[str, float]], cfg: ClassifierConfig,
                  seed: int = 0) -> tuple[dict[str, float], dict[str, Any]]:
    """The (alpha, lexical weight) to serve and the record of how it was chosen.

    Two learned choices, each against its do-nothing fallback by the one rule of
    :mod:`xc_core.evaluation.fallback`: candidates are ranked by ``select_metric`` on one seeded half of the
    validation rows, and the best is served only when it beats the fallback on the other half (paired interval
    above 0, no guard lost significantly). First the dense fusion α < 1 against the encoder alone (α = 1), then
    the lexical channel γ > 0 against whichever of the two was served, then an offset β ≠ 0 on the labels W has no
    training positive for (their own calibration: a label whose clicks all fell in validation rows stands in for a
    novel label) against β = 0. The row served is the candidate that was tested, so the guarantee holds for what
    ships; ties prefer less lexical weight, a smaller offset, then more encoder."""
    from xc_core.evaluation.fallback import against_fallback, halves

    metric = cfg.select_metric
    pick, check = halves(grid.truth.shape[0], seed, Stream.FUSION_HALVES)

    def rank(row: dict[str, float]) -> tuple[float, float, float, float]:
        return row["pick"], -row["lexical_weight"], -abs(row.get("untrained_offset", 0.0)), row["alpha"]

    def test(choice: str, candidates: list[dict[str, float]], fallback: dict[str, float]) -> dict[str, Any]:
        best = max(candidates, key=rank)
        decision = against_fallback(choice, grid.top(best)[check], grid.top(fallback)[check], grid.truth[check],
                                    grid.inv_propensity, metric, cfg.fallback, len(pick), _pair(best))
        log.info("classifier: %s %s vs %s: %s", choice, _pair(best), _pair(fallback), decision.reason)
        return {**decision.as_dict(), "fallback": _pair(fallback), "served": _pair(best if decision.kept else fallback)}

    scored = [{**r, "pick": grid.metrics(r["alpha"], r["lexical_weight"], pick)[metric]} for r in curve]
    served, decisions = dict(ENCODER_ONLY), {}
    dense = [r for r in scored if r["lexical_weight"] == 0.0 and r["alpha"] < 1.0]
    if dense:
        decisions["alpha"] = test("fusion alpha", dense, served)
        served = decisions["alpha"]["served"]
    lexical = [r for r in scored if r["lexical_weight"] > 0]
    if lexical:
        decisions["lexical"] = test("lexical weight", lexical, served)
        served = decisions["lexical"]["served"]
    offsets = [{**served, "untrained_offset": b,
                "pick": grid.metrics(served["alpha"], served["lexical_weight"], pick, b)[metric]}
               for b in cfg.untrained_offsets if b != 0.0]
    if offsets and grid.untrained.any():
        decisions["untrained_offset"] = test("untrained-label offset", offsets, served)
        served = decisions["untrained_offset"]["served"]
    chosen = next((r for r in curve if _pair(r) == _pair(served)), None)
    offset = served.get("untrained_offset", 0.0)
    if chosen is None or offset:  # the encoder alone when the grid has no alpha = 1, or an offset is served
        chosen = grid.metrics(served["alpha"], served["lexical_weight"], offset=offset)
    return {**chosen, **served, "untrained_offset": offset}, decisions


def _pair(row: dict[str, float]) -> dict[str, float]:
    pair = {"alpha": row["alpha"], "lexical_weight": row["lexical_weight"]}
    return {**pair, "untrained_offset": row["untrained_offset"]} if row.get("untrained_offset") else pair


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
    from xc_core.encoders.text import encoder_for
    from xc_core.evaluation.metrics import propensity
    from xc_core.training.validation import split_validation

    encoder = encoder_for(encoder_dir, max_length)
    label_vecs = encoder.encode(dataset.label_texts, progress=progress, desc="labels")
    doc_vecs = encoder.encode(dataset.train_texts, progress=progress, desc="train documents")
    train_rows, val_rows = split_validation(len(dataset.train_texts), split_seed_cfg)
    y = sp.csr_matrix(dataset.y_train)
    fit = train_classifier(label_vecs, doc_vecs[train_rows], y[train_rows], cfg, progress=progress)
    lexical = _fit_lexical(dataset, train_rows, y, cfg)
    untrained = np.diff(y[train_rows].tocsc().indptr) == 0  # W kept their text vectors
    grid = FusionGrid(doc_vecs[val_rows], y[val_rows], label_vecs, fit.weights, cfg.search_k,
                      dataset.own_label_pairs(val_rows), propensity(dataset), lexical,
                      [dataset.train_texts[i] for i in val_rows], untrained)
    curve = grid.curve(cfg.alphas, cfg.lexical.weights)
    best, decisions = choose_fusion(grid, curve, cfg, seed=cfg.seed)
    log.info("classifier: alpha %.2f, lexical weight %.2f, untrained offset %.2f served after %d validation rows "
             "(%s %.4f on all of them)", best["alpha"], best["lexical_weight"], best["untrained_offset"],
             len(val_rows), cfg.select_metric, best[cfg.select_metric])
    fused = FusedClassifier(fit.weights, best["alpha"], cfg.search_k, {
        "select_metric": cfg.select_metric, "validation_rows": len(val_rows), "alpha_curve": curve,
        "fallback_tests": decisions, "lexical_test": decisions.get("lexical", {}),
        "history": fit.history, "train_seconds": fit.seconds, "train_pairs": fit.pairs,
        "labels_trained": fit.labels_trained, "labels": len(dataset.label_texts), "config": cfg.model_dump(),
        "validation_positives_on_untrained_labels": int(y[val_rows][:, np.flatnonzero(untrained)].nnz)},
        lexical, best["lexical_weight"], best["untrained_offset"], untrained)
    fused.save(out_dir)
    np.save(label_vectors_path(out_dir), label_vecs)
    return fused
