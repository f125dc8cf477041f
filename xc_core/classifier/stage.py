"""The classifier stage for one trained encoder: cache embeddings, choose the fusion out of fold, train W, save.

The fusion (α, each registered channel's weight — ``channels.py`` — and the two label offsets) is chosen on
*out-of-fold* training documents (``classifier/folds.py``): W and every channel are refit ``folds`` times, each
without the rows it then scores — by blocks of days for event logs (rolling origin: a repeated query meets W as in
the test period), by document folds elsewhere — so thousands of rows decide, not a small validation split. The
whole choice is tested once against the encoder alone (α = 1, every channel and offset 0), cross-fitted over those
folds (:func:`~xc_core.evaluation.fallback.cross_fitted`); the final W and the channels the fusion uses are then fit
on every training document and served with the chosen settings, or the encoder alone is. A scored document's own
labels (``XCDataset.own_label_pairs``: same id, or the folder's train filter) are never ranked, as the test filter
removes a test document's own label; documents the encoder trained on are never scored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from xc_core.classifier import channels as registry
from xc_core.classifier.channel import Channel, ChannelSpec, FitData
from xc_core.classifier.channel import proposals as propose_all
from xc_core.classifier.channels import (
    ALPHA,
    ENCODER_ONLY,
    KNOWS_QUERIES,
    TAIL_OFFSET,
    UNTRAINED_OFFSET,
    Fusion,
)
from xc_core.classifier.config import ClassifierConfig
from xc_core.classifier.folds import Fold
from xc_core.classifier.fusion import LABEL_VECTORS, FusedClassifier, lift_top
from xc_core.classifier.shortlist import best_first, union_ids
from xc_core.classifier.train import train_classifier
from xc_core.datasets.container import XCDataset
from xc_core.evaluation.analyses import TAIL_BIN, TAIL_P5, TAIL_PREFIX, tail_truth
from xc_core.seeds import Stream

if TYPE_CHECKING:
    from xc_core.evaluation.fallback import Decision, RowTerms

log = logging.getLogger(__name__)


#: ranks the fusion grid keeps per row: every metric a fusion is chosen, guarded or recorded on is @1..5
#: (``config.SELECTABLE``), so the rest of the shortlist never needs an order
GRID_DEPTH = 5


def label_vectors_path(classifier_dir: Path) -> Path:
    """Where the stage caches the label embeddings it trained from: the index reuses them instead of
    encoding every label again; outside the folder that becomes the MLflow model."""
    return classifier_dir.parent / LABEL_VECTORS


class FusionGrid:
    """Scored rows' exact shortlist (label text ∪ W ∪ every channel's proposed labels, ``search_k`` each) with each
    score of every candidate computed once (the encoder's, W's, each channel's), so any fusion re-ranks them by a
    weighted sum; a row's own label (``exclude``) never counts, as in the test filter. ``channels``: the fitted
    channels by registry name (from W's training rows). ``untrained``: labels without a positive in W's training
    rows (the offset's labels). ``bins``: the labels' frequency bins over W's training rows (the tail offset's
    labels and the tail guard's)."""

    def __init__(self, queries: np.ndarray, truth: sp.csr_matrix, label_vecs: np.ndarray, weights: np.ndarray,
                 search_k: int, exclude: np.ndarray, inv_propensity: np.ndarray,
                 channels: dict[str, Channel] | None = None, texts: list[str] | None = None,
                 untrained: np.ndarray | None = None, bins: np.ndarray | None = None, tail_depth: int = 0) -> None:
        from xc_core.index import IndexConfig, LabelIndex

        flat = IndexConfig(kind="flat")
        depth = search_k + 1  # room for the dropped self pair
        self.truth, self.search_k, self.inv_propensity = sp.csr_matrix(truth), search_k, inv_propensity
        _, enc_ids = LabelIndex.build(label_vecs, None, flat).search(queries, depth)
        _, clf_ids = LabelIndex.build(weights, None, flat).search(queries, depth)
        self.untrained = np.zeros(len(label_vecs), bool) if untrained is None else np.asarray(untrained, bool)
        channels = channels or {}
        self.candidates, proposals = propose_all({s.name: channels[s.name] for s in registry.present(channels)},
                                                 texts or [], queries, depth, union_ids(enc_ids, clf_ids))
        #: per row: does the click memory know its query (None without a memory)
        self.remembered: np.ndarray | None = (proposals[KNOWS_QUERIES].rows_with_labels()
                                              if KNOWS_QUERIES in proposals else None)
        #: each channel's score of every candidate, in registry order (the order the served search adds them)
        self.channel_scores = {name: p.scores_on(self.candidates) for name, p in proposals.items()}
        safe = np.maximum(self.candidates, 0)
        self.encoder_scores = _cosines(queries, label_vecs, safe)
        self.classifier_scores = _cosines(queries, weights, safe)
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
        #: the tail offset lifts only each row's first ``tail_depth`` candidates (0: all), as the served search does
        self.tail_depth = tail_depth
        self._views: dict[Fusion, _TailView] = {}
        self._id_places: tuple[np.ndarray, np.ndarray] | None = None

    def has(self, channel: str) -> bool:
        return channel in self.channel_scores

    @classmethod
    def stacked(cls, parts: list[FusionGrid]) -> FusionGrid:
        """One grid over every part's rows, each row ranked exactly as in its own part: the candidates padded to the
        widest part (pads blocked), a channel a part lacks scoring 0 there. The selection ranks thousands of
        fusions; one ranking of all rows saves a pass per part (most of a small grid's time)."""
        width = max(p.candidates.shape[1] for p in parts)
        if len({p.search_k for p in parts}) > 1 or len({p.tail_depth for p in parts}) > 1:
            raise ValueError("the parts of a stacked grid share search_k and tail_depth")

        def pad(arrays: list[np.ndarray], value: Any) -> np.ndarray:
            return np.concatenate([np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=value)
                                   for a in arrays])

        grid = cls.__new__(cls)
        grid.truth = sp.csr_matrix(sp.vstack([p.truth for p in parts]))
        grid.search_k, grid.inv_propensity, grid.tail_depth = parts[0].search_k, parts[0].inv_propensity, \
            parts[0].tail_depth
        grid.untrained = np.zeros(0, bool)  # per part: what each row takes from it is ``on_untrained``
        grid.candidates = pad([p.candidates for p in parts], -1)
        grid.remembered = (np.concatenate([p.remembered for p in parts])
                           if all(p.remembered is not None for p in parts) else None)
        names = [s.name for s in registry.present({n: None for p in parts for n in p.channel_scores})]
        grid.channel_scores = {name: pad([p.channel_scores.get(name, np.zeros(p.candidates.shape, np.float32))
                                          for p in parts], 0.0) for name in names}
        grid.encoder_scores = pad([p.encoder_scores for p in parts], 0.0)
        grid.classifier_scores = pad([p.classifier_scores for p in parts], 0.0)
        grid.blocked = pad([p.blocked for p in parts], True)
        grid.on_untrained = pad([p.on_untrained for p in parts], False)
        grid.on_tail = pad([p.on_tail if p.on_tail is not None else np.zeros(p.candidates.shape, bool)
                            for p in parts], False) if any(p.on_tail is not None for p in parts) else None
        grid.tail_truth = (sp.csr_matrix(sp.vstack([p.tail_truth for p in parts]))
                           if all(p.tail_truth is not None for p in parts) else None)
        grid._views, grid._id_places = {}, None
        return grid

    def ranked(self, fusion: Fusion, seen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the top :data:`GRID_DEPTH` per row under ``fusion``, own labels dropped (−1 pads);
        ``seen``: labels without a training positive dropped too (the seen-label view)."""
        tail, tail_offset = self.on_tail, fusion[TAIL_OFFSET]
        if tail is not None and 0 < self.tail_depth < self.candidates.shape[1] and not seen:
            # the selection reads most fusions at several tail offsets: the rest of the score is summed once
            return self._tail_view(fusion.replace(tail_offset=0.0)).ranked(np.float32(tail_offset))
        score = self._untailed(fusion)
        if tail is not None and tail_offset:
            lift = np.float32(tail_offset) * tail
            if self.tail_depth > 0:
                # the served search ranks its candidates with the row's own label among them (dropped after it):
                # the depth counts them here too, pads excluded
                score = lift_top(np.where(self.candidates < 0, -np.inf, score).astype(np.float32),
                                 lift.astype(np.float32), self.tail_depth)
            else:
                score = score + lift
        score = np.where(self.blocked | (self.on_untrained if seen else False), -np.inf, score).astype(np.float32)
        # best first, equal scores by the lower label id, as the test's metrics order them
        return best_first(score, self.candidates, self._width())

    def _width(self) -> int:
        return min(GRID_DEPTH, self.search_k)

    def _untailed(self, fusion: Fusion) -> np.ndarray:
        """Every candidate's score under ``fusion`` but its tail offset."""
        alpha = fusion.alpha
        score = alpha * self.encoder_scores + (1 - alpha) * self.classifier_scores
        for spec in registry.present(self.channel_scores):
            weight = fusion[spec.weight_key]
            if weight > 0:
                score = score + np.float32(weight) * self.channel_scores[spec.name]
        if offset := fusion[UNTRAINED_OFFSET]:
            score = score + np.float32(offset) * self.on_untrained
        return score

    def _id_order(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's columns in label-id order, and each column's place in that order (computed once): a ranking by
        (score, place) breaks ties by the lower label id, as the metrics do, and names the column it picked."""
        if self._id_places is None:
            by_id = np.argsort(self.candidates, axis=1, kind="stable")
            place = np.empty_like(by_id)
            np.put_along_axis(place, by_id, np.broadcast_to(np.arange(by_id.shape[1]), by_id.shape), axis=1)
            self._id_places = (by_id, place)
        return self._id_places

    def _tail_view(self, untailed: Fusion) -> _TailView:
        """The :class:`_TailView` of a fusion without its tail offset (the last few kept: the selection reads one
        fusion's offsets in a row)."""
        view = self._views.pop(untailed, None)
        if view is None:
            assert self.on_tail is not None, "a tail view needs the labels' bins"
            padded = np.where(self.candidates < 0, -np.inf, self._untailed(untailed)).astype(np.float32)
            view = _TailView(padded, self.candidates, self.blocked, self.on_tail, self.tail_depth, self._width(),
                             *self._id_order())
        self._views[untailed] = view  # most recent last
        while len(self._views) > _TAIL_VIEWS_KEPT:
            del self._views[next(iter(self._views))]
        return view


#: the tail views a grid keeps (the selection reads a fusion's tail offsets one after another)
_TAIL_VIEWS_KEPT = 4


class _TailView:
    """One fusion's ranking under any tail offset τ ≥ 0 lifting its first ``depth`` candidates, exactly as
    :meth:`FusionGrid.ranked` ranks them, from ``depth + width`` candidates per row instead of all.

    Why these suffice: τ only raises the tail labels among the first ``depth`` candidates by the rest of the score,
    so a candidate outside them that makes the top ``width`` after the lift was already beaten by fewer than
    ``width`` open candidates before it (every candidate that beat it still does): it is among the top ``width``
    open ones without τ. The first ``depth`` and that top ``width`` are all a row needs, whatever τ."""

    def __init__(self, padded: np.ndarray, candidates: np.ndarray, blocked: np.ndarray, on_tail: np.ndarray,
                 depth: int, width: int, by_id: np.ndarray, id_rank: np.ndarray) -> None:
        from xc_core.classifier.fusion import first_by_score

        first = first_by_score(padded, depth)  # exactly ``depth`` per row (depth < candidates)
        first_columns = np.nonzero(first)[1].reshape(len(first), depth)
        _, places = best_first(np.where(blocked, -np.inf, padded).astype(np.float32), id_rank, width)
        open_columns = np.take_along_axis(by_id, np.maximum(places, 0), axis=1)
        # an open top candidate already among the first (or none: fewer open candidates than ``width``) is masked
        repeated = (places < 0) | np.take_along_axis(first, open_columns, axis=1)
        columns = np.concatenate([first_columns, open_columns], axis=1)
        self.score = np.take_along_axis(padded, columns, axis=1)
        self.ids = np.take_along_axis(candidates, columns, axis=1)
        self.lifted = np.concatenate([np.take_along_axis(on_tail, first_columns, axis=1),
                                      np.zeros(open_columns.shape, bool)], axis=1)  # τ lifts only the first
        self.blocked = np.concatenate([np.take_along_axis(blocked, first_columns, axis=1), repeated], axis=1)
        self.width = width

    def ranked(self, tail_offset: np.float32) -> tuple[np.ndarray, np.ndarray]:
        score = np.where(self.lifted, self.score + tail_offset, self.score) if tail_offset else self.score
        return best_first(np.where(self.blocked, -np.inf, score).astype(np.float32), self.ids, self.width)


def _cosines(queries: np.ndarray, vectors: np.ndarray, ids: np.ndarray, chunk: int = 512) -> np.ndarray:
    """(rows, candidates) inner products of each query with the vectors of its candidate ids."""
    out = np.empty(ids.shape, np.float32)
    for start in range(0, len(ids), chunk):
        out[start: start + chunk] = np.einsum("rcd,rd->rc", vectors[ids[start: start + chunk]],
                                              queries[start: start + chunk])
    return out


class OutOfFoldGrid:
    """The scored rows of every fold (a :class:`FusionGrid` each, over its own W and lexical channel), stacked: a
    fusion's ranking of all of them, its metrics on any subset, and the folds as row blocks for cross-fitting."""

    def __init__(self, parts: list[FusionGrid]) -> None:
        self.parts = parts
        #: every part's rows in one grid (ranked in one pass; its truth and tail truth are the stacked parts')
        self.rows = FusionGrid.stacked(parts) if parts else None
        self.truth = self.rows.truth if self.rows is not None else sp.csr_matrix((0, 0))
        self.inv_propensity = parts[0].inv_propensity if parts else None
        sizes = np.cumsum([0, *(p.truth.shape[0] for p in parts)])
        self.blocks = [np.arange(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        #: the channels some fold's grid holds (by registry name)
        self.channels = {name for p in parts for name in p.channel_scores}
        #: per row: does its fold's click memory know its query (None unless every fold has a memory)
        self.remembered = (np.concatenate([p.remembered for p in parts]) if parts and all(
            p.remembered is not None for p in parts) else None)
        self.untrained_any = any(p.on_untrained.any() for p in parts)
        self.has_tail = bool(parts) and all(p.tail_truth is not None for p in parts)
        self.tail_truth = self.rows.tail_truth if self.rows is not None and self.has_tail else None
        self._ranked: dict[tuple[Fusion, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._terms: dict[tuple[Fusion, str, bool], dict[str, np.ndarray]] = {}
        self._row_terms: RowTerms | None = None
        self._ideal_weights: np.ndarray | None = None

    def has(self, channel: str) -> bool:
        return channel in self.channels

    def ranked(self, fusion: Fusion, seen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        if (fusion, seen) not in self._ranked:
            if self.rows is None:
                raise ValueError("an out-of-fold grid without parts ranks nothing")
            self._ranked[fusion, seen] = self.rows.ranked(fusion, seen=seen)
        return self._ranked[fusion, seen]

    def top(self, fusion: Fusion, seen: bool = False) -> np.ndarray:
        """Each row's top-5 label ids under ``fusion`` (in the seen-label view with ``seen``), −1 padded."""
        ids = self.ranked(fusion, seen)[1][:, :GRID_DEPTH]
        return np.pad(ids, ((0, 0), (0, GRID_DEPTH - ids.shape[1])), constant_values=-1)  # a search_k under 5

    def value(self, fusion: Fusion, metric: str, rows: np.ndarray, seen: bool = False) -> float:
        """``metric`` of ``fusion`` over ``rows`` (a mean of per-row terms, or a ratio of their sums: PSP); ``seen``:
        with predictions restricted to labels with a training positive, against the same truth."""
        from xc_core.evaluation.fallback import RowTerms

        key = (fusion, metric, seen)
        if key not in self._terms:
            if self._row_terms is None:
                self._row_terms = RowTerms(self.truth, self.inv_propensity, self.tail_truth, self._best_gains())
            self._terms[key] = self._row_terms(metric, self.top(fusion, seen))
        terms = self._terms[key]
        if metric in terms:
            return float(terms[metric][rows].mean()) if len(rows) else 0.0
        den = float(terms[f"{metric}/denominator"][rows].sum())
        return float(terms[f"{metric}/numerator"][rows].sum()) / den if den > 0 else 0.0

    def paired_se(self, fusion: Fusion, metric: str, rows: np.ndarray) -> float:
        """The standard error of ``metric``'s mean per-row difference between ``fusion`` and the encoder alone over
        ``rows``; 0 for a metric that is a ratio of sums (PSP) or for fewer than 2 rows."""
        self.value(fusion, metric, rows)
        self.value(ENCODER_ONLY, metric, rows)
        ours, theirs = self._terms[(fusion, metric, False)], self._terms[(ENCODER_ONLY, metric, False)]
        if metric not in ours or len(rows) < 2:
            return 0.0
        return float(np.std(ours[metric][rows] - theirs[metric][rows], ddof=1) / np.sqrt(len(rows)))

    def _best_gains(self) -> np.ndarray | None:
        """The rows' propensity-scored best gains at the grid's depth, computed once: every fusion's PSP terms
        share them (recomputing them per fusion and guard was a fifth of the selection's time)."""
        if self._ideal_weights is None and self.inv_propensity is not None:
            from xc_core.evaluation.metrics import ideal_weights

            self._ideal_weights = ideal_weights(self.truth, self.inv_propensity, GRID_DEPTH)
        return self._ideal_weights

    def metrics(self, fusion: Fusion) -> dict[str, float]:
        """P/nDCG/PSP/PSnDCG@1..5 of ``fusion`` over every scored row (the curve the record keeps): the test's
        :func:`~xc_core.evaluation.metrics.evaluate` on the grid's ranking, read from its ids directly."""
        from xc_core.evaluation.metrics import aggregate, metric_terms

        return aggregate(metric_terms(self.truth, self.top(fusion), self.inv_propensity, self._best_gains()))


def choose_fusion(grid: FusionGrid | OutOfFoldGrid, cfg: ClassifierConfig,
                  seed: int = 0) -> tuple[dict[str, float], dict[str, Any], list[dict[str, float]]]:
    """The fusion to serve (its metrics and weights), the record of its one test against the encoder alone, and
    the curve over α and the joint channels' weights.

    The selection procedure, run on any set of rows: among the fusions that keep every guard metric of the policy
    (PSP@1, PSP@5 and the tail bin's P@5: what the registry gate checks) at least at the encoder's on those rows,
    α and the ``joint`` channels' weights (lexical, hybrid) best on ``select_metric``, then each ``each`` channel's
    weight in registry order (the click memory's, then the names'), then the per-label priors' weights (popularity)
    best in the seen-label view (a prior orders the labels with clicks; the view ranks only those), then the
    untrained-label offset best for them on all labels, all under the same constraint (ties prefer less weight on
    the later channel, a smaller offset, then more encoder). A fusion keeps the constraint with some tail offset τ
    (the whole tail bin's calibration, untrained labels included, tried from 0 up): each step reads a fusion at its
    first τ that keeps every guard, and τ is chosen last, best on ``select_metric`` among those that keep them — so a
    fusion that lifts the head while pushing the tail down is repaired, not discarded, and the stage never builds a
    model the gate's tail guard must reject.
    Cross-fitted (:func:`~xc_core.evaluation.fallback.cross_fitted`) over the grid's folds — each fold ranked by the
    procedure run on the other folds — it is served only when it beats the encoder alone on every row; one test for
    the whole family of candidates, so no multiplicity correction is needed. A single grid (no data folds) is cut
    into the policy's seeded row folds.

    Args:
        grid: the scored rows (one :class:`FusionGrid`, or every fold's stacked).
        cfg: the weight grids, the select metric and the fallback policy with its guards.
        seed: draws the row folds of a single grid.

    Returns:
        (best, decisions, curve): ``best`` is the served fusion's weights (every :func:`~channels.fusion_keys`
        entry; the encoder alone when the chosen fusion lost its test) with its out-of-fold metrics and
        ``new_queries_encoder``; ``decisions`` the test records by name (``fusion``, and ``new_queries`` when that
        rule applies); ``curve`` one row per α and joint-channel weights with their out-of-fold metrics.
    """
    from xc_core.evaluation.fallback import cross_fitted, row_folds

    oof = grid if isinstance(grid, OutOfFoldGrid) else OutOfFoldGrid([grid])
    metric = cfg.select_metric
    select = fusion_selector(oof, cfg)
    folds = oof.blocks if len(oof.blocks) > 1 else row_folds(oof.truth.shape[0], cfg.fallback.folds, seed,
                                                             Stream.FUSION_HALVES)
    decision, served = cross_fitted("fusion", select, oof.top, oof.top(ENCODER_ONLY), oof.truth, oof.inv_propensity,
                                    metric, cfg.fallback, folds, describe=Fusion.changed, tail=oof.tail_truth)
    log.info("classifier: fusion %s vs the encoder alone: %s", decision.candidate, decision.reason)
    chosen = served or ENCODER_ONLY
    record = {**decision.as_dict(), "fallback": ENCODER_ONLY.changed(), "served": chosen.changed(),
              "tail_guard": _tail_record(oof, chosen)}
    joint = _joint(oof)
    curve = [{**{k: fusion[k] for k in (ALPHA, *(s.weight_key for s in joint))}, **oof.metrics(fusion)}
             for fusion in _joint_grid(oof, cfg)]
    best = {**oof.metrics(chosen), **chosen}
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

    if not cfg.new_query_fallback or oof.remembered is None or chosen.weight(KNOWS_QUERIES) <= 0:
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


def _tail_record(oof: OutOfFoldGrid, chosen: Fusion) -> dict[str, float]:
    """The served fusion's tail-bin P@5 against the encoder alone's on every out-of-fold row (the record shows what
    the tail guard saw; empty without tail bins)."""
    if not oof.has_tail:
        return {}
    rows = np.arange(oof.truth.shape[0])
    return {"served": oof.value(chosen, TAIL_P5, rows), "encoder": oof.value(ENCODER_ONLY, TAIL_P5, rows),
            TAIL_OFFSET: chosen[TAIL_OFFSET]}


def _joint(oof: OutOfFoldGrid) -> list[ChannelSpec]:
    return [s for s in registry.registered() if s.step == "joint" and oof.has(s.name)]


def _joint_grid(oof: OutOfFoldGrid, cfg: ClassifierConfig) -> list[Fusion]:
    """Every α with every weight of the ``joint`` channels ``oof`` holds (the later channel's weights outermost)."""
    import itertools

    joint = _joint(oof)[::-1]
    return [Fusion({ALPHA: float(values[-1]), **{s.weight_key: float(w) for s, w in zip(joint, values, strict=False)}})
            for values in itertools.product(*(s.grid(cfg) for s in joint), cfg.alphas)]


def fusion_selector(oof: OutOfFoldGrid, cfg: ClassifierConfig) -> Callable[[np.ndarray], Fusion]:
    """The selection procedure of :func:`choose_fusion` over ``oof``'s rows: ``select(rows)`` is the fusion it picks
    from those rows alone (so a caller can cross-fit it, as the stage does, or pair two grids' procedures)."""
    import itertools

    metric = cfg.select_metric
    joint = _joint(oof)
    candidates = _joint_grid(oof, cfg)
    each = [s for s in registry.registered() if s.step == "each" and oof.has(s.name)]
    priors = [s for s in registry.registered() if s.prior and oof.has(s.name)]
    prior_grid = list(itertools.product(*(s.grid(cfg) for s in priors)))
    offsets = sorted({0.0, *cfg.untrained_offsets}, key=abs) if oof.untrained_any else [0.0]
    tails = sorted({0.0, *cfg.tail_offsets}) if oof.has_tail else [0.0]
    guards = [g for g in cfg.fallback.guards if g != metric
              and (oof.has_tail or not g.startswith(TAIL_PREFIX))
              and (oof.inv_propensity is not None or not g.startswith("PS"))]

    def select(rows: np.ndarray) -> Fusion:
        # only fusions that keep every guard metric at least at the encoder's on these rows are candidates: a pick
        # by P@1 alone may buy head labels with the tail, which the gate's guards then reject
        # (docs/results/issue-63.md)
        floor = {g: oof.value(ENCODER_ONLY, g, rows) for g in guards}
        margins = {g: cfg.tail_guard_margin for g in guards if g.startswith(TAIL_PREFIX) and cfg.tail_guard_margin}

        def keeps(fusion: Fusion) -> bool:
            return all(oof.value(fusion, g, rows) >= floor[g] + (margins[g] * oof.paired_se(fusion, g, rows)
                                                                 if g in margins else 0.0) for g in guards)

        def value(fusion: Fusion, seen: bool = False) -> float:
            return oof.value(fusion, metric, rows, seen=seen)

        def settled(fusion: Fusion) -> Fusion | None:
            """``fusion`` at the first tail offset (from 0 up) with which it keeps every guard; None: at none."""
            return next((f for t in tails if keeps(f := fusion.replace(tail_offset=t))), None)

        def best(found: list[Fusion], order: Callable[[Fusion], tuple[float, ...]], default: Fusion) -> Fusion:
            """The candidate best on the metric at its settled tail offset (ties by ``order``); ``default`` when
            none keeps the guards."""
            kept = [(f, s) for f in found if (s := settled(f)) is not None]
            return max(kept, key=lambda pair: (value(pair[1]), *order(pair[0])))[0] if kept else default

        base = best(candidates, lambda f: (*(-f[s.weight_key] for s in joint[::-1]), f.alpha), ENCODER_ONLY)
        for spec in each:
            base = base.replace(**{spec.weight_key: _best_weight(best, base, spec, cfg)})

        def shifted(weights: tuple[float, ...], offset: float) -> Fusion:
            return base.replace(untrained_offset=offset, **{s.weight_key: w for s, w in zip(priors, weights,
                                                                                              strict=True)})

        shifts = [(ws, b) for ws in prior_grid for b in offsets if settled(shifted(ws, b)) is not None] or [
            ((0.0,) * len(priors), 0.0)]
        # a prior orders the labels with clicks among themselves, so its weight is chosen where only they rank (the
        # seen-label view, where the offset moves nothing); the offset then places the untrained labels among them,
        # on all labels. Chosen together on all labels, the pair traded the one against the other (the same
        # all-label P@1, less in the seen view)
        prior = max({ws for ws, _ in shifts}, key=lambda ws: (value(shifted(ws, 0.0), seen=True), *(-w for w in ws)))
        offset = max((b for ws, b in shifts if ws == prior), key=lambda b: (value(shifted(prior, b)), -abs(b)))
        chosen = shifted(prior, offset)
        kept = [f for t in tails if keeps(f := chosen.replace(tail_offset=t))]
        return max(kept, key=lambda f: (value(f), -f[TAIL_OFFSET])) if kept else ENCODER_ONLY

    return select


def _best_weight(best: Callable[..., Fusion], base: Fusion, spec: ChannelSpec, cfg: ClassifierConfig) -> float:
    """``spec``'s weight best for ``base`` (ties: the smaller weight)."""
    key = spec.weight_key

    def less(fusion: Fusion) -> tuple[float, ...]:
        return (-fusion[key],)

    return best([base.replace(**{key: w}) for w in spec.grid(cfg)], less, base)[key]


def fit_channels(data: FitData, cfg: ClassifierConfig, names: list[str] | None = None
                 ) -> tuple[dict[str, Channel], dict[str, float]]:
    """Fit the registered channels on ``data``.

    Args:
        data: the fit documents and the catalogue's label texts.
        cfg: the stage's settings (each channel reads its own part and its weight grid).
        names: the channels to fit; None: every channel with a weight > 0 to try.

    Returns:
        (the fitted channels by name, in registry order; each fit's seconds by name).
    """
    import time

    fitted, seconds = {}, {}
    for spec in registry.registered():
        if (spec.name in names) if names is not None else spec.tried(cfg):
            started = time.perf_counter()
            fitted[spec.name] = spec.fit(data, cfg)
            seconds[spec.name] = time.perf_counter() - started
    return fitted, seconds


def fold_grid(dataset: XCDataset, fold: Fold, doc_vecs: np.ndarray, label_vecs: np.ndarray,
              inv_propensity: np.ndarray, cfg: ClassifierConfig) -> tuple[FusionGrid, dict[str, float]]:
    """W and the channels refit on the fold's fit rows, its scored rows' grid, and the refits' seconds (W's and
    each channel's)."""
    y_fit = sp.csr_matrix(fold.y_fit[fold.fit_rows])
    fit = train_classifier(label_vecs, doc_vecs[fold.fit_rows], y_fit, cfg)
    data = FitData([dataset.train_texts[i] for i in fold.fit_rows], doc_vecs[fold.fit_rows], y_fit, fold.fit_clicks,
                   dataset.label_texts)
    channels, seconds = fit_channels(data, cfg)
    grid = FusionGrid(doc_vecs[fold.score_rows], fold.truth, label_vecs, fit.weights, cfg.search_k,
                      dataset.own_label_pairs(fold.score_rows), inv_propensity, channels,
                      [dataset.train_texts[i] for i in fold.score_rows], fold.untrained, fold.label_bins,
                      cfg.tail_offset_depth)
    log.info("classifier: %s — W and the channels refit on %d documents, %d scored out of fold", fold.name,
             len(fold.fit_rows), len(fold.score_rows))
    return grid, {"W": fit.seconds, **seconds}


def _fold_grids(dataset: XCDataset, folds: list[Fold], doc_vecs: np.ndarray, label_vecs: np.ndarray,
                inv_propensity: np.ndarray, cfg: ClassifierConfig) -> list[tuple[FusionGrid, dict[str, float]]]:
    """Every fold's :func:`fold_grid`, in fold order, ``cfg.fold_workers`` at a time: the refits are independent
    and each seeded on its own, so the grids are those of one fold at a time."""
    def one(fold: Fold) -> tuple[FusionGrid, dict[str, float]]:
        return fold_grid(dataset, fold, doc_vecs, label_vecs, inv_propensity, cfg)

    if cfg.fold_workers == 1 or len(folds) < 2:
        return [one(fold) for fold in folds]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(cfg.fold_workers, len(folds)), thread_name_prefix="xc-fold") as pool:
        return list(pool.map(one, folds))


def out_of_fold_grids(dataset: XCDataset, doc_vecs: np.ndarray, label_vecs: np.ndarray, cfg: ClassifierConfig,
                      encoder_rows: np.ndarray | None = None) -> tuple[list[Fold], list[FusionGrid], dict[str, float]]:
    """The stage's folds of ``dataset`` (:func:`~xc_core.classifier.folds.out_of_fold` under ``cfg``), each fold's
    :func:`fold_grid` and the refits' seconds summed by name (W's and each channel's): what the fusion is chosen on.
    ``encoder_rows``: training rows no fold scores."""
    from xc_core.classifier.folds import out_of_fold
    from xc_core.evaluation.metrics import propensity

    inv_propensity = propensity(dataset)
    folds = out_of_fold(dataset, cfg.folds, cfg.oof_max_rows, cfg.seed, cfg.fold_kind, cfg.temporal_span,
                        encoder_rows, cfg.time_blocks, cfg.oof_min_rows, cfg.max_time_blocks)
    parts: list[FusionGrid] = []
    refit_seconds: dict[str, float] = {}
    for grid, fit_seconds in _fold_grids(dataset, folds, doc_vecs, label_vecs, inv_propensity, cfg):
        parts.append(grid)
        refit_seconds = {key: refit_seconds.get(key, 0.0) + value for key, value in fit_seconds.items()}
    return folds, parts, refit_seconds


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
    """Train the classifier of the encoder in ``encoder_dir`` and choose its fusion out of fold.

    Args:
        dataset: the data set (its training side only is read).
        encoder_dir: the encoder's folder (read by ``encoders.text.encoder_for``).
        max_length: the encoder's token limit.
        cfg: the stage's settings.
        out_dir: the classifier folder written (``weights.npy``, ``fusion.json``, the served channels' files); the
            label vectors go beside it (:func:`label_vectors_path`).
        encoder_rows: the training documents the encoder was trained on (never scored; None: an untrained
            encoder).
        progress: draw the encoding and training bars.
        vector_cache: where the encoder's vectors are stored (the labels' are usually there already: the base
            method's label index encoded them with the same weights).

    Returns:
        The saved model: W, the served fusion (the encoder alone when the chosen one did not beat it out of fold)
        and the channels it uses; ``info`` holds the out-of-fold record.
    """
    import time

    from xc_core.classifier.folds import fold_kind
    from xc_core.encoders.text import encoder_for
    from xc_core.evaluation.analyses import label_quantiles

    started = time.perf_counter()
    encoder = encoder_for(encoder_dir, max_length, vector_cache)
    label_vecs = encoder.encode(dataset.label_texts, progress=progress, desc="labels")
    doc_vecs = encoder.encode(dataset.train_texts, progress=progress, desc="train documents")
    encoded = time.perf_counter()
    folds, parts, refit_seconds = out_of_fold_grids(dataset, doc_vecs, label_vecs, cfg, encoder_rows)
    best, decisions, curve = choose_fusion(OutOfFoldGrid(parts), cfg, seed=cfg.seed)
    chosen = time.perf_counter()
    fusion = Fusion({k: best[k] for k in registry.fusion_keys()})
    y = sp.csr_matrix(dataset.y_train)
    labelled = np.flatnonzero(np.diff(y.indptr) > 0)
    fit = train_classifier(label_vecs, doc_vecs[labelled], y[labelled], cfg, progress=progress)
    data = FitData([dataset.train_texts[i] for i in labelled], doc_vecs[labelled], y[labelled],
                   dataset.click_days()[labelled], dataset.label_texts)
    # only the channels the fusion uses are fit again (the hybrid's fit is minutes on a large log)
    channels, final_seconds = fit_channels(data, cfg, [s.name for s in registry.registered()
                                                       if fusion[s.weight_key] > 0])
    untrained = np.diff(y.tocsc().indptr) == 0  # W kept their text vectors
    tail = label_quantiles(y[labelled]) == TAIL_BIN  # the labels the tail offset lifts (the untrained ones too)
    log.info("classifier: %s served after %d out-of-fold rows (%s %.4f on them)",
             ", ".join(f"{k} {v:.2f}" for k, v in fusion.items()), sum(len(f.score_rows) for f in folds),
             cfg.select_metric, best[cfg.select_metric])
    stage_seconds = {"encode": round(encoded - started, 2), "out_of_fold": round(chosen - encoded, 2),
                     "out_of_fold_refits": round(sum(refit_seconds.values()), 2),
                     **{f"out_of_fold_{name}_refits": round(v, 2) for name, v in refit_seconds.items() if name != "W"},
                     "final_fit": round(time.perf_counter() - chosen, 2),
                     **{f"final_{name}_fit": round(v, 2) for name, v in final_seconds.items()}}
    records = {name: r for name, c in channels.items() if (r := c.record()) is not None}
    fused = FusedClassifier(fit.weights, fusion, cfg.search_k, {
        "select_metric": cfg.select_metric, "fold_kind": folds[0].kind if folds else fold_kind(dataset, cfg.fold_kind),
        "folds": [{"name": f.name, "fit_documents": len(f.fit_rows), "scored_rows": len(f.score_rows)}
                  for f in folds],
        "out_of_fold_rows": sum(len(f.score_rows) for f in folds), "alpha_curve": curve,
        "fallback_tests": decisions, "history": fit.history, "train_seconds": fit.seconds,
        "stage_seconds": stage_seconds,
        "train_pairs": fit.pairs, "labels_trained": fit.labels_trained, "labels": len(dataset.label_texts),
        "config": cfg.model_dump(), "encoder_rows_not_scored": 0 if encoder_rows is None else len(encoder_rows),
        **records},
        channels, untrained,
        tail if fusion[TAIL_OFFSET] != 0 else None, new_queries_encoder=bool(best.get("new_queries_encoder", 0.0)),
        tail_depth=cfg.tail_offset_depth)
    fused.save(out_dir)
    np.save(label_vectors_path(out_dir), label_vecs)
    return fused
