"""The classifier stage for one trained encoder: cache embeddings, choose the fusion out of fold, train W, save.

The fusion (α, the lexical weight γ, the offset β on untrained labels, the hybrid channel's weight δ, the click
memory's weight μ and the label popularity's ρ — ``memory.py`` — and the name channel's ν — ``names.py``) is chosen
on
*out-of-fold* training documents (``classifier/folds.py``): W, the lexical and the hybrid channel
(``linear.py``) are refit ``folds`` times, each without the rows it then scores — by blocks of days for
event logs (rolling origin: a repeated query meets W as in the test period), by document folds elsewhere — so
thousands of rows decide, not a small validation split. The whole choice is tested
once against the encoder alone (α = 1, γ = β = δ = 0), cross-fitted over those folds
(:func:`~xc_core.evaluation.fallback.cross_fitted`); the final W and text channels are then fit on every training
document and served with the chosen settings, or the encoder alone is. A scored document's own labels
(``XCDataset.own_label_pairs``: same id, or the folder's train filter) are never ranked, as the test filter removes
a test document's own label; documents the encoder trained on are never scored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.config import ClassifierConfig
from xc_core.classifier.folds import Fold
from xc_core.classifier.fusion import LABEL_VECTORS, FusedClassifier
from xc_core.classifier.lexical import LexicalChannel
from xc_core.classifier.linear import LinearChannel
from xc_core.classifier.memory import ClickMemory, click_days, label_popularity
from xc_core.classifier.names import LabelNames
from xc_core.classifier.shortlist import best_first, scores_on, union_ids
from xc_core.classifier.train import train_classifier
from xc_core.datasets.container import XCDataset
from xc_core.evaluation.analyses import TAIL_BIN, TAIL_P5, TAIL_PREFIX, tail_truth
from xc_core.seeds import Stream

if TYPE_CHECKING:
    from xc_core.evaluation.fallback import Decision

log = logging.getLogger(__name__)


#: ranks the fusion grid keeps per row: every metric a fusion is chosen, guarded or recorded on is @1..5
#: (``config.SELECTABLE``), so the rest of the shortlist never needs an order
GRID_DEPTH = 5


def label_vectors_path(classifier_dir: Path) -> Path:
    """Where the stage caches the label embeddings it trained from: the index reuses them instead of
    encoding every label again; outside the folder that becomes the MLflow model."""
    return classifier_dir.parent / LABEL_VECTORS


class FusionGrid:
    """Scored rows' exact shortlist (label text ∪ W ∪ the lexical channel's ∪ the hybrid channel's top labels,
    ``search_k`` each) with each channel's score of every candidate computed once, so any fusion (alpha, lexical
    weight, untrained-label offset, hybrid weight) re-ranks them by a weighted sum; a row's own label (``exclude``)
    never counts, as in the test filter. ``untrained``: labels without a positive in W's training rows (the offset's
    labels). ``memory`` / ``popularity``: the click memory (its remembered labels join the shortlist) and the labels'
    popularity, both from W's training rows. ``names``: the labels' names (the labels a row names join the
    shortlist)."""

    def __init__(self, queries: np.ndarray, truth: sp.csr_matrix, label_vecs: np.ndarray, weights: np.ndarray,
                 search_k: int, exclude: np.ndarray, inv_propensity: np.ndarray,
                 lexical: LexicalChannel | None = None, texts: list[str] | None = None,
                 untrained: np.ndarray | None = None, linear: LinearChannel | None = None,
                 memory: ClickMemory | None = None, popularity: np.ndarray | None = None,
                 names: LabelNames | None = None, bins: np.ndarray | None = None) -> None:
        from xc_core.index import IndexConfig, LabelIndex

        flat = IndexConfig(kind="flat")
        depth = search_k + 1  # room for the dropped self pair
        self.truth, self.search_k, self.inv_propensity = sp.csr_matrix(truth), search_k, inv_propensity
        _, enc_ids = LabelIndex.build(label_vecs, None, flat).search(queries, depth)
        _, clf_ids = LabelIndex.build(weights, None, flat).search(queries, depth)
        self.candidates, lexical_scores = union_ids(enc_ids, clf_ids), None
        self.has_lexical, self.has_linear = lexical is not None, linear is not None
        self.untrained = np.zeros(len(label_vecs), bool) if untrained is None else np.asarray(untrained, bool)
        if linear is not None:
            linear_scores, linear_ids = linear.search(texts or [], queries, depth)
            self.candidates = union_ids(self.candidates, linear_ids)
        #: per row: does the click memory know its query (None without a memory)
        self.remembered: np.ndarray | None = None
        if memory is not None:
            memory_scores, memory_ids = memory.search(texts or [], depth)
            self.candidates = union_ids(self.candidates, memory_ids)
            self.remembered = np.asarray((memory_ids >= 0).any(axis=1))
        if names is not None:
            self.candidates = union_ids(self.candidates, names.search(texts or [], depth)[1])
        if lexical is not None:
            self.candidates, lexical_scores = lexical.shortlist(texts or [], depth, self.candidates)
        self.name_scores = names.scores_on(texts or [], self.candidates) if names is not None else None
        self.linear_scores = scores_on(linear_ids, linear_scores, self.candidates) if linear is not None else None
        self.memory_scores = scores_on(memory_ids, memory_scores, self.candidates) if memory is not None else None
        safe = np.maximum(self.candidates, 0)
        self.popularity = popularity[safe] if popularity is not None else None
        self.encoder_scores = _cosines(queries, label_vecs, safe)
        self.classifier_scores = _cosines(queries, weights, safe)
        self.lexical_scores = lexical_scores
        self.blocked = self.candidates < 0  # pads and each row's own labels
        for row, label in np.asarray(exclude, np.int64).reshape(-1, 2):
            self.blocked[row] |= self.candidates[row] == label
        self.on_untrained = self.untrained[safe]
        # the tail bin of W's training rows (with every label they hold no positive for): its labels take the tail
        # offset, and the tail guard counts the rows' hits on them, as the gate's tail_P@5 does on the test split.
        # The bin's untrained labels take it too: lifting only the trained ones pushed the untrained ones down (on
        # synthetic's out-of-fold rows the served fusion kept the tail only with both lifted; experiments/tail_fusion)
        self.on_tail = bins[safe] == TAIL_BIN if bins is not None else None
        self.tail_truth = tail_truth(self.truth, bins) if bins is not None else None

    def ranked(self, alpha: float, weight: float, offset: float = 0.0, linear_weight: float = 0.0,
               memory_weight: float = 0.0, popularity_weight: float = 0.0, name_weight: float = 0.0,
               tail_offset: float = 0.0, seen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the top :data:`GRID_DEPTH` per row under this fusion, own labels dropped (−1 pads);
        ``seen``: labels without a training positive dropped too (the seen-label view)."""
        score = alpha * self.encoder_scores + (1 - alpha) * self.classifier_scores
        for channel, channel_weight in ((self.lexical_scores, weight), (self.linear_scores, linear_weight),
                                        (self.memory_scores, memory_weight), (self.popularity, popularity_weight),
                                        (self.name_scores, name_weight)):
            if channel is not None and channel_weight > 0:
                score = score + np.float32(channel_weight) * channel
        if offset:
            score = score + np.float32(offset) * self.on_untrained
        if tail_offset and self.on_tail is not None:
            score = score + np.float32(tail_offset) * self.on_tail
        score = np.where(self.blocked | (self.on_untrained if seen else False), -np.inf, score).astype(np.float32)
        # best first, equal scores by the lower label id, as the test's metrics order them
        return best_first(score, self.candidates, min(GRID_DEPTH, self.search_k))


def _cosines(queries: np.ndarray, vectors: np.ndarray, ids: np.ndarray, chunk: int = 512) -> np.ndarray:
    """(rows, candidates) inner products of each query with the vectors of its candidate ids."""
    out = np.empty(ids.shape, np.float32)
    for start in range(0, len(ids), chunk):
        out[start: start + chunk] = np.einsum("rcd,rd->rc", vectors[ids[start: start + chunk]],
                                              queries[start: start + chunk])
    return out


#: (alpha, lexical weight, untrained offset, hybrid weight, memory weight, popularity weight, name weight, tail offset)
Fusion = tuple[float, float, float, float, float, float, float, float]
ENCODER_ONLY: Fusion = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # the do-nothing fallback of every fusion
FUSION_KEYS = ("alpha", "lexical_weight", "untrained_offset", "linear_weight", "memory_weight", "popularity_weight",
               "name_weight", "tail_offset")


class OutOfFoldGrid:
    """The scored rows of every fold (a :class:`FusionGrid` each, over its own W and lexical channel), stacked: a
    fusion's ranking of all of them, its metrics on any subset, and the folds as row blocks for cross-fitting."""

    def __init__(self, parts: list[FusionGrid]) -> None:
        self.parts = parts
        self.truth = sp.csr_matrix(sp.vstack([p.truth for p in parts])) if parts else sp.csr_matrix((0, 0))
        self.inv_propensity = parts[0].inv_propensity if parts else None
        sizes = np.cumsum([0, *(p.truth.shape[0] for p in parts)])
        self.blocks = [np.arange(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        self.has_lexical = any(p.has_lexical for p in parts)
        self.has_linear = any(p.has_linear for p in parts)
        self.has_memory = any(p.memory_scores is not None for p in parts)
        #: per row: does its fold's click memory know its query (None unless every fold has a memory)
        self.remembered = (np.concatenate([p.remembered for p in parts]) if parts and all(
            p.remembered is not None for p in parts) else None)
        self.has_popularity = any(p.popularity is not None for p in parts)
        self.has_names = any(p.name_scores is not None for p in parts)
        self.untrained_any = any(p.on_untrained.any() for p in parts)
        self.has_tail = bool(parts) and all(p.tail_truth is not None for p in parts)
        self.tail_truth = sp.csr_matrix(sp.vstack([p.tail_truth for p in parts])) if self.has_tail else None
        self._ranked: dict[tuple[Fusion, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._terms: dict[tuple[Fusion, str, bool], dict[str, np.ndarray]] = {}

    def ranked(self, fusion: Fusion, seen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        if (fusion, seen) not in self._ranked:
            found = [p.ranked(*fusion, seen=seen) for p in self.parts]
            self._ranked[fusion, seen] = (np.concatenate([f[0] for f in found]),
                                          np.concatenate([f[1] for f in found]))
        return self._ranked[fusion, seen]

    def top(self, fusion: Fusion, seen: bool = False) -> np.ndarray:
        """Each row's top-5 label ids under ``fusion`` (in the seen-label view with ``seen``), −1 padded."""
        ids = self.ranked(fusion, seen)[1][:, :GRID_DEPTH]
        return np.pad(ids, ((0, 0), (0, GRID_DEPTH - ids.shape[1])), constant_values=-1)  # a search_k under 5

    def value(self, fusion: Fusion, metric: str, rows: np.ndarray, seen: bool = False) -> float:
        """``metric`` of ``fusion`` over ``rows`` (a mean of per-row terms, or a ratio of their sums: PSP); ``seen``:
        with predictions restricted to labels with a training positive, against the same truth."""
        from xc_core.evaluation.fallback import per_row

        key = (fusion, metric, seen)
        if key not in self._terms:
            self._terms[key] = per_row(metric, self.truth, self.top(fusion, seen), self.inv_propensity,
                                       self.tail_truth)
        terms = self._terms[key]
        if metric in terms:
            return float(terms[metric][rows].mean()) if len(rows) else 0.0
        den = float(terms[f"{metric}/denominator"][rows].sum())
        return float(terms[f"{metric}/numerator"][rows].sum()) / den if den > 0 else 0.0

    def metrics(self, fusion: Fusion) -> dict[str, float]:
        """P/nDCG/PSP/PSnDCG@1..5 of ``fusion`` over every scored row (the curve the record keeps): the test's
        :func:`~xc_core.evaluation.metrics.evaluate` on the grid's ranking, read from its ids directly."""
        from xc_core.evaluation.metrics import aggregate, metric_terms

        return aggregate(metric_terms(self.truth, self.top(fusion), self.inv_propensity))


def choose_fusion(grid: FusionGrid | OutOfFoldGrid, cfg: ClassifierConfig,
                  seed: int = 0) -> tuple[dict[str, float], dict[str, Any], list[dict[str, float]]]:
    """The fusion to serve, the record of its one test against the encoder alone, and the curve over α × γ.

    The selection procedure, run on any set of rows: among the fusions that keep every guard metric of the policy
    (PSP@1, PSP@5 and the tail bin's P@5: what the registry gate checks) at least at the encoder's on those rows,
    the (α, γ, δ) best on ``select_metric``, then the click memory's weight μ best for it, then the name channel's
    ν, then the label popularity's weight ρ best in the seen-label view (it orders the labels with clicks; the view
    ranks only those), then the untrained-label offset β best for it on all labels, all under the same constraint
    (ties prefer less hybrid weight, less lexical weight, less memory, less name weight, less popularity, a smaller
    offset, then more encoder). A fusion keeps the constraint with some tail offset τ (the whole tail bin's
    calibration, untrained labels included, tried from 0 up): each step reads a fusion at its first τ that keeps
    every guard, and τ is chosen last, best on ``select_metric`` among those that keep them — so a fusion that lifts
    the head while pushing the tail down is repaired, not discarded, and the stage never builds a model the gate's
    tail guard must reject.
    Cross-fitted (:func:`~xc_core.evaluation.fallback.cross_fitted`) over the grid's folds — each fold ranked by the
    procedure run on the other folds — it is served only when it beats the encoder alone on every row; one test for
    the whole family of candidates, so no multiplicity correction is needed. A single grid (no data folds) is cut
    into the policy's seeded row folds."""
    from xc_core.evaluation.fallback import cross_fitted, row_folds

    oof = grid if isinstance(grid, OutOfFoldGrid) else OutOfFoldGrid([grid])
    metric = cfg.select_metric
    select = fusion_selector(oof, cfg)
    folds = oof.blocks if len(oof.blocks) > 1 else row_folds(oof.truth.shape[0], cfg.fallback.folds, seed,
                                                             Stream.FUSION_HALVES)
    decision, served = cross_fitted("fusion", select, oof.top, oof.top(ENCODER_ONLY), oof.truth, oof.inv_propensity,
                                    metric, cfg.fallback, folds, describe=lambda f: _pair(_as_row(f)),
                                    tail=oof.tail_truth)
    log.info("classifier: fusion %s vs the encoder alone: %s", decision.candidate, decision.reason)
    chosen = served or ENCODER_ONLY
    record = {**decision.as_dict(), "fallback": _pair(_as_row(ENCODER_ONLY)), "served": _pair(_as_row(chosen)),
              "tail_guard": _tail_record(oof, chosen)}
    curve = [{"alpha": a, "lexical_weight": w, **({"linear_weight": d} if oof.has_linear else {}),
              **oof.metrics(_fusion(a, w, linear=d))} for a, w, d in _triples(oof, cfg)]
    best = {**oof.metrics(chosen), **_as_row(chosen)}
    decisions = {"fusion": record}
    new_queries = _new_queries_test(oof, cfg, select, folds, chosen) if served is not None else None
    if new_queries is not None:
        decisions["new_queries"] = new_queries.as_dict()
    best["new_queries_encoder"] = float(new_queries is not None and new_queries.kept)
    return best, decisions, curve


def _new_queries_test(oof: OutOfFoldGrid, cfg: ClassifierConfig, select: Callable[[np.ndarray], Fusion],
                      folds: list[np.ndarray], chosen: Fusion) -> Decision | None:
    """Whether to rank the queries the click memory does not know by the encoder alone: a learned choice against
    the one fusion for every query (its fallback), tested on the out-of-fold rows of such queries, each ranked by
    the fusion the procedure picks without its fold (as the fusion's own test ranks them), under the same policy
    and guards. None when it does not apply (the rule off, no memory in the served fusion, too few such rows)."""
    from xc_core.evaluation.fallback import against_fallback

    if not cfg.new_query_fallback or oof.remembered is None or chosen[4] <= 0:
        return None
    new = np.flatnonzero(~oof.remembered)
    if len(new) < cfg.new_query_min_rows:
        return None
    everything = np.arange(oof.truth.shape[0])
    procedure = oof.top(ENCODER_ONLY).copy()
    for fold in folds:
        rest = np.setdiff1d(everything, fold, assume_unique=True) if len(folds) > 1 else everything
        procedure[fold] = oof.top(select(rest))[fold]
    tail = oof.tail_truth[new] if oof.tail_truth is not None else None
    decision = against_fallback("encoder alone for new queries", oof.top(ENCODER_ONLY)[new], procedure[new],
                                oof.truth[new], oof.inv_propensity, cfg.select_metric, cfg.fallback,
                                picked_on_rows=len(everything), candidate={"new_queries": "encoder alone"},
                                tail=tail)
    log.info("classifier: the encoder alone on %d out-of-fold rows of new queries vs the fusion: %s", len(new),
             decision.reason)
    return decision


def _fusion(alpha: float, weight: float, offset: float = 0.0, linear: float = 0.0, memory: float = 0.0,
            popularity: float = 0.0, name: float = 0.0, tail: float = 0.0) -> Fusion:
    return alpha, weight, offset, linear, memory, popularity, name, tail


def _tail_record(oof: OutOfFoldGrid, chosen: Fusion) -> dict[str, float]:
    """The served fusion's tail-bin P@5 against the encoder alone's on every out-of-fold row (the record shows what
    the tail guard saw; empty without tail bins)."""
    if not oof.has_tail:
        return {}
    rows = np.arange(oof.truth.shape[0])
    return {"served": oof.value(chosen, TAIL_P5, rows), "encoder": oof.value(ENCODER_ONLY, TAIL_P5, rows),
            "tail_offset": chosen[7]}


def fusion_selector(oof: OutOfFoldGrid, cfg: ClassifierConfig) -> Callable[[np.ndarray], Fusion]:
    """The selection procedure of :func:`choose_fusion` over ``oof``'s rows: ``select(rows)`` is the fusion it picks
    from those rows alone (so a caller can cross-fit it, as the stage does, or pair two grids' procedures)."""
    metric = cfg.select_metric
    triples = _triples(oof, cfg)
    offsets = sorted({0.0, *cfg.untrained_offsets}, key=abs) if oof.untrained_any else [0.0]
    memory_weights = cfg.memory_weights if oof.has_memory else (0.0,)
    popularity_weights = cfg.popularity_weights if oof.has_popularity else (0.0,)
    name_weights = cfg.name_weights if oof.has_names else (0.0,)
    tails = sorted({0.0, *cfg.tail_offsets}) if oof.has_tail else [0.0]
    guards = [g for g in cfg.fallback.guards if g != metric
              and (oof.has_tail or not g.startswith(TAIL_PREFIX))
              and (oof.inv_propensity is not None or not g.startswith("PS"))]

    def select(rows: np.ndarray) -> Fusion:
        # only fusions that keep every guard metric at least at the encoder's on these rows are candidates: a pick
        # by P@1 alone may buy head labels with the tail, which the gate's guards then reject
        # (docs/results/issue-63.md)
        floor = {g: oof.value(ENCODER_ONLY, g, rows) for g in guards}

        def keeps(fusion: Fusion) -> bool:
            return all(oof.value(fusion, g, rows) >= floor[g] for g in guards)

        def value(fusion: Fusion, seen: bool = False) -> float:
            return oof.value(fusion, metric, rows, seen=seen)

        def settled(fusion: Fusion) -> Fusion | None:
            """``fusion`` at the first tail offset (from 0 up) with which it keeps every guard; None: at none."""
            return next((f for t in tails if keeps(f := (*fusion[:7], t))), None)

        def best(candidates: list[Fusion], order: Callable[[Fusion], tuple[float, ...]], default: Fusion) -> Fusion:
            """The candidate best on the metric at its settled tail offset (ties by ``order``); ``default`` when
            none keeps the guards."""
            found = [(f, s) for f in candidates if (s := settled(f)) is not None]
            return max(found, key=lambda pair: (value(pair[1]), *order(pair[0])))[0] if found else default

        alpha, weight, _, linear, *_ = best([_fusion(a, w, linear=d) for a, w, d in triples],
                                            lambda f: (-f[3], -f[1], f[0]), ENCODER_ONLY)
        base = _fusion(alpha, weight, linear=linear)
        memory = best([_fusion(alpha, weight, linear=linear, memory=m) for m in memory_weights],
                      lambda f: (-f[4],), base)[4]
        base = _fusion(alpha, weight, linear=linear, memory=memory)
        name = best([_fusion(alpha, weight, linear=linear, memory=memory, name=n) for n in name_weights],
                    lambda f: (-f[6],), base)[6]
        shifts = [(p, b) for p in popularity_weights for b in offsets
                  if settled(_fusion(alpha, weight, b, linear, memory, p, name)) is not None] or [(0.0, 0.0)]
        # popularity orders the labels with clicks among themselves, so its weight is chosen where only they rank
        # (the seen-label view, where the offset moves nothing); the offset then places the untrained labels among
        # them, on all labels. Chosen together on all labels, the pair traded the one against the other (the same
        # all-label P@1, less in the seen view)
        popularity = max({p for p, _ in shifts}, key=lambda p: (
            value(_fusion(alpha, weight, 0.0, linear, memory, p, name), seen=True), -p))
        offset = max((b for p, b in shifts if p == popularity),
                     key=lambda b: (value(_fusion(alpha, weight, b, linear, memory, popularity, name)), -abs(b)))
        chosen = _fusion(alpha, weight, offset, linear, memory, popularity, name)
        kept = [f for t in tails if keeps(f := (*chosen[:7], t))]
        return max(kept, key=lambda f: (value(f), -f[7])) if kept else ENCODER_ONLY

    return select


def _triples(oof: OutOfFoldGrid, cfg: ClassifierConfig) -> list[tuple[float, float, float]]:
    """Every (α, lexical weight, hybrid weight) of the grid, the text channels' weights only where ``oof`` has them."""
    weights = cfg.lexical.weights if oof.has_lexical else (0.0,)
    linear_weights = cfg.linear_weights if oof.has_linear else (0.0,)
    return [(float(a), float(w), float(d)) for d in linear_weights for w in weights for a in cfg.alphas]


def _as_row(fusion: Fusion) -> dict[str, float]:
    return dict(zip(FUSION_KEYS, fusion, strict=True))


def _pair(row: dict[str, float]) -> dict[str, float]:
    """The fusion as recorded: alpha and the lexical weight always, the other weights where not 0."""
    pair = {"alpha": row["alpha"], "lexical_weight": row["lexical_weight"]}
    return {**pair, **{key: row[key] for key in FUSION_KEYS[2:] if row.get(key)}}


def _fit_lexical(texts: list[str], y: sp.csr_matrix, cfg: ClassifierConfig) -> LexicalChannel | None:
    """The lexical channel over ``texts`` and their labels (None when no weight > 0 is to be tried)."""
    if not any(w > 0 for w in cfg.lexical.weights):
        return None
    return LexicalChannel.fit(texts, y, cfg.lexical)


def _fit_linear(texts: list[str], vectors: np.ndarray, y: sp.csr_matrix, cfg: ClassifierConfig
                ) -> LinearChannel | None:
    """The hybrid channel over ``texts`` and their labels (None when no weight > 0 is to be tried)."""
    if not any(w > 0 for w in cfg.linear_weights):
        return None
    return LinearChannel.fit(texts, vectors, y, cfg.linear.model_copy(update={"seed": cfg.seed}))


def _fit_clicks(texts: list[str], clicks: sp.csr_matrix, cfg: ClassifierConfig
                ) -> tuple[ClickMemory | None, np.ndarray | None]:
    """The click memory and the label popularity of these documents (each None when no weight > 0 is to be
    tried)."""
    memory = ClickMemory.fit(texts, clicks) if any(w > 0 for w in cfg.memory_weights) else None
    popularity = label_popularity(clicks) if any(w > 0 for w in cfg.popularity_weights) else None
    return memory, popularity


def _fit_names(dataset: XCDataset, cfg: ClassifierConfig) -> LabelNames | None:
    """The labels' names (None when no name weight > 0 is to be tried)."""
    return LabelNames.fit(dataset.label_texts) if any(w > 0 for w in cfg.name_weights) else None


def fold_grid(dataset: XCDataset, fold: Fold, doc_vecs: np.ndarray, label_vecs: np.ndarray,
              inv_propensity: np.ndarray, cfg: ClassifierConfig) -> tuple[FusionGrid, dict[str, float]]:
    """W and the text channels refit on the fold's fit rows, its scored rows' grid, and the refits' seconds."""
    import time

    y_fit = sp.csr_matrix(fold.y_fit[fold.fit_rows])
    fit = train_classifier(label_vecs, doc_vecs[fold.fit_rows], y_fit, cfg)
    fit_texts = [dataset.train_texts[i] for i in fold.fit_rows]
    lexical = _fit_lexical(fit_texts, y_fit, cfg)
    started = time.perf_counter()
    linear = _fit_linear(fit_texts, doc_vecs[fold.fit_rows], y_fit, cfg)
    linear_seconds = time.perf_counter() - started
    memory, popularity = _fit_clicks(fit_texts, fold.fit_clicks, cfg)
    grid = FusionGrid(doc_vecs[fold.score_rows], fold.truth, label_vecs, fit.weights, cfg.search_k,
                      dataset.own_label_pairs(fold.score_rows), inv_propensity, lexical,
                      [dataset.train_texts[i] for i in fold.score_rows], fold.untrained, linear, memory, popularity,
                      _fit_names(dataset, cfg), fold.label_bins)
    log.info("classifier: %s — W and the text channels refit on %d documents, %d scored out of fold", fold.name,
             len(fold.fit_rows), len(fold.score_rows))
    return grid, {"W": fit.seconds, "hybrid": linear_seconds}


def _fold_grids(dataset: XCDataset, folds: list[Fold], doc_vecs: np.ndarray, label_vecs: np.ndarray,
                inv_propensity: np.ndarray, cfg: ClassifierConfig) -> list[tuple[FusionGrid, dict[str, float]]]:
    """Every fold's :func:`fold_grid`, in fold order, ``cfg.fold_workers`` at a time: the refits are independent
    and each seeded on its own, so the grids are those of one fold at a time (on synthetic's 4 blocks of a
    fine-tuned encoder: the same grid and fusion, 41.5 → 32.4 s on 2 cores)."""
    def one(fold: Fold) -> tuple[FusionGrid, dict[str, float]]:
        return fold_grid(dataset, fold, doc_vecs, label_vecs, inv_propensity, cfg)

    if cfg.fold_workers == 1 or len(folds) < 2:
        return [one(fold) for fold in folds]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(cfg.fold_workers, len(folds)), thread_name_prefix="xc-fold") as pool:
        return list(pool.map(one, folds))


def stage_key(dataset: XCDataset, encoder_dir: Path, max_length: int, cfg: ClassifierConfig,
              encoder_rows: np.ndarray | None) -> str:
    """A hash of everything the stage's output depends on besides the code: the encoder's files, the training side of
    the data set (texts, labels, click days, label texts), the settings and the rows never scored. Two stages with
    the same key (and code) build the same classifier — ``ramen-clf`` on the ``dual_encoder`` encoder its graph
    test fell back to is ``dual_encoder-clf`` — so one may copy the other's folder."""
    import hashlib

    from xc_core.provenance import hash_files

    digest = hashlib.sha256(json.dumps({"cfg": cfg.model_dump(mode="json"), "max_length": max_length}).encode())
    hash_files(digest, encoder_dir)
    y = sp.csr_matrix(dataset.y_train)
    for part in (y.indptr, y.indices, dataset.train_pair_days,
                 np.empty(0) if encoder_rows is None else np.asarray(encoder_rows)):
        digest.update(np.ascontiguousarray(part, dtype=np.int64).tobytes() + b"|")
    digest.update("\n".join([*dataset.train_texts, "|", *dataset.label_texts]).encode())
    return digest.hexdigest()[:16]


def fit_classifier_stage(dataset: XCDataset, encoder_dir: Path, max_length: int, cfg: ClassifierConfig,
                         out_dir: Path, encoder_rows: np.ndarray | None = None,
                         progress: bool = False, vector_cache: Path | None = None) -> FusedClassifier:
    """Train the classifier of the encoder in ``encoder_dir`` and choose its fusion out of fold; saved under
    ``out_dir``. ``encoder_rows``: the training documents the encoder was fine-tuned on (never scored; None: an
    untrained encoder). ``vector_cache``: where the encoder's vectors are stored (the labels' are usually there
    already: the base method's label index encoded them with the same weights)."""
    import time

    from xc_core.classifier.folds import fold_kind, out_of_fold
    from xc_core.encoders.text import encoder_for
    from xc_core.evaluation.analyses import label_quantiles
    from xc_core.evaluation.metrics import propensity

    started = time.perf_counter()
    encoder = encoder_for(encoder_dir, max_length, vector_cache)
    label_vecs = encoder.encode(dataset.label_texts, progress=progress, desc="labels")
    doc_vecs = encoder.encode(dataset.train_texts, progress=progress, desc="train documents")
    encoded = time.perf_counter()
    inv_propensity = propensity(dataset)
    folds = out_of_fold(dataset, cfg.folds, cfg.oof_max_rows, cfg.seed, cfg.fold_kind, cfg.temporal_span,
                        encoder_rows, cfg.time_blocks, cfg.oof_min_rows, cfg.max_time_blocks)
    parts, refit_seconds = [], {"W": 0.0, "hybrid": 0.0}
    for grid, fit_seconds in _fold_grids(dataset, folds, doc_vecs, label_vecs, inv_propensity, cfg):
        parts.append(grid)
        refit_seconds = {key: refit_seconds[key] + fit_seconds[key] for key in refit_seconds}
    best, decisions, curve = choose_fusion(OutOfFoldGrid(parts), cfg, seed=cfg.seed)
    chosen = time.perf_counter()
    y = sp.csr_matrix(dataset.y_train)
    labelled = np.flatnonzero(np.diff(y.indptr) > 0)
    fit = train_classifier(label_vecs, doc_vecs[labelled], y[labelled], cfg, progress=progress)
    texts = [dataset.train_texts[i] for i in labelled]
    lexical = _fit_lexical(texts, y[labelled], cfg)
    hybrid_started = time.perf_counter()
    linear = _fit_linear(texts, doc_vecs[labelled], y[labelled], cfg) if best["linear_weight"] > 0 else None
    hybrid_seconds = time.perf_counter() - hybrid_started
    memory, popularity = _fit_clicks(texts, click_days(dataset)[labelled], cfg)
    untrained = np.diff(y.tocsc().indptr) == 0  # W kept their text vectors
    tail = label_quantiles(y[labelled]) == TAIL_BIN  # the labels the tail offset lifts (the untrained ones too)
    log.info("classifier: alpha %.2f, lexical weight %.2f, untrained offset %.2f, hybrid weight %.2f, memory weight "
             "%.2f, popularity weight %.2f, name weight %.2f, tail offset %.2f served after %d out-of-fold rows (%s "
             "%.4f on them)", best["alpha"], best["lexical_weight"], best["untrained_offset"], best["linear_weight"],
             best["memory_weight"], best["popularity_weight"], best["name_weight"], best["tail_offset"],
             sum(len(f.score_rows) for f in folds), cfg.select_metric, best[cfg.select_metric])
    stage_seconds = {"encode": round(encoded - started, 2), "out_of_fold": round(chosen - encoded, 2),
                     "out_of_fold_refits": round(refit_seconds["W"] + refit_seconds["hybrid"], 2),
                     "out_of_fold_hybrid_refits": round(refit_seconds["hybrid"], 2),
                     "final_fit": round(time.perf_counter() - chosen, 2), "final_hybrid_fit": round(hybrid_seconds, 2)}
    fused = FusedClassifier(fit.weights, best["alpha"], cfg.search_k, {
        "select_metric": cfg.select_metric, "fold_kind": folds[0].kind if folds else fold_kind(dataset, cfg.fold_kind),
        "folds": [{"name": f.name, "fit_documents": len(f.fit_rows), "scored_rows": len(f.score_rows)}
                  for f in folds],
        "out_of_fold_rows": sum(len(f.score_rows) for f in folds), "alpha_curve": curve,
        "fallback_tests": decisions, "history": fit.history, "train_seconds": fit.seconds,
        "stage_seconds": stage_seconds,
        "train_pairs": fit.pairs, "labels_trained": fit.labels_trained, "labels": len(dataset.label_texts),
        "config": cfg.model_dump(), "encoder_rows_not_scored": 0 if encoder_rows is None else len(encoder_rows),
        **({"hybrid": linear.info} if linear is not None else {})},
        lexical, best["lexical_weight"], best["untrained_offset"], untrained, linear, best["linear_weight"],
        memory if best["memory_weight"] > 0 else None, best["memory_weight"],
        popularity if best["popularity_weight"] > 0 else None, best["popularity_weight"],
        _fit_names(dataset, cfg) if best["name_weight"] > 0 else None, best["name_weight"],
        best["tail_offset"], tail if best["tail_offset"] != 0 else None,
        new_queries_encoder=bool(best.get("new_queries_encoder", 0.0)))
    fused.save(out_dir)
    np.save(label_vectors_path(out_dir), label_vecs)
    return fused
