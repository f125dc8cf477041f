"""The one search path of a method with a classifier stage: eval, ``xc predict`` and the Dagster index asset.

Shortlist = top ``search_k`` of the label-embedding index ∪ top ``search_k`` of the classifier index (both
faiss) ∪ the labels each active channel proposes (``channel.py``, ``channels.py``), each candidate re-scored
exactly as ``alpha * cos(q, label text) + (1 - alpha) * cos(q, w_label)`` plus every active channel's weight times
its score, plus the per-label offsets. The union matters: a label whose text says little (``007.info``) is only in
the classifier's list, a label with no clicks only in the encoder's. ``alpha = 1`` ranks by the encoder alone,
``alpha = 0`` by W alone. The per-label offsets: ``untrained_offset`` on labels without a training positive (W is
their text vector, so they score by text alone whatever alpha), ``tail_offset`` on the labels of the tail
frequency bin of W's training documents (the channels that lift head labels push rare labels the encoder ranked
well down; the offset, chosen out of fold under the gate's tail guard, puts them back), and each per-label prior
(popularity) times its weight. With ``new_queries_encoder`` a query the click memory does not know (a text never
asked in the training window) is ranked by the encoder alone: the stage sets it (``ClassifierConfig.
new_query_fallback``, off by default) when, on the out-of-fold rows of such queries, the encoder alone beats the
fusion chosen for all rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.classifier import channels as registry
from xc_core.classifier.channel import Channel, ChannelSpec
from xc_core.classifier.channel import proposals as propose_all
from xc_core.classifier.channels import ALPHA, KNOWS_QUERIES, TAIL_OFFSET, UNTRAINED_OFFSET, Fusion
from xc_core.classifier.shortlist import union_ids

WEIGHTS_FILE, FUSION_FILE = "weights.npy", "fusion.json"
UNTRAINED_FILE = "untrained.npy"  # per label: no training positive when W was fit (only saved with an offset)
TAIL_FILE = "tail.npy"  # per label: in the tail frequency bin of W's training documents (saved with a tail offset)
LABEL_VECTORS = "label_vectors.npy"  # the encoder's label embeddings: beside a classifier folder and in an index folder
CLASSIFIER_INDEX = "classifier"  # sub-folder of a method's index folder: the HNSW index over its label vectors W


@dataclass
class FusedClassifier:
    weights: np.ndarray  # (n_labels, dim) unit rows: W
    fusion: Fusion = field(default_factory=Fusion)  # α, each channel's weight, the offsets
    search_k: int = 100
    info: dict[str, Any] = field(default_factory=dict)  # how the fusion was chosen (out-of-fold curve), training log
    channels: dict[str, Channel] = field(default_factory=dict)  # fitted channels by registry name
    untrained: np.ndarray | None = None  # (n_labels,) bool: no training positive when W was fit
    tail: np.ndarray | None = None  # (n_labels,) bool: in the tail bin of W's training documents (untrained ones too)
    #: rank a query the click memory does not know by the encoder alone (needs the memory channel)
    new_queries_encoder: bool = False
    #: the tail offset lifts the tail labels only among each query's first ``tail_depth`` candidates (0: everywhere)
    tail_depth: int = 0

    @property
    def alpha(self) -> float:
        return self.fusion.alpha

    def weight(self, channel: str) -> float:
        """The served weight of the channel named ``channel`` (0 when the model does not hold it)."""
        return self.fusion.weight(channel) if channel in self.channels else 0.0

    def active(self, channel: str) -> Channel | None:
        """The channel named ``channel`` when it takes part in the score (weight > 0), else None."""
        return self.channels[channel] if self.weight(channel) > 0 else None

    def active_specs(self) -> list[ChannelSpec]:
        """The registry entries of the channels that take part in the score, in registry order."""
        return [s for s in registry.present(self.channels) if self.weight(s.name) > 0]

    def label_offsets(self) -> np.ndarray | None:
        """Per-label additive score (the offsets on untrained and on tail labels, each weighted per-label prior),
        or None when there is none; the tail offset is in :meth:`tail_lift` instead when it has a depth."""
        parts = []
        if self.fusion[UNTRAINED_OFFSET] != 0.0 and self.untrained is not None:
            parts.append(np.where(self.untrained, np.float32(self.fusion[UNTRAINED_OFFSET]), np.float32(0.0)))
        if self.tail_depth == 0 and (lift := self._tail_offsets()) is not None:
            parts.append(lift)
        for spec in self.active_specs():
            if spec.prior:
                prior = self.channels[spec.name].label_scores()
                assert prior is not None, f"{spec.name}: a prior channel gives every label a score"
                parts.append(np.float32(self.weight(spec.name)) * prior)
        return np.sum(parts, axis=0).astype(np.float32) if parts else None

    def tail_lift(self) -> np.ndarray | None:
        """Per-label score added only among each query's first :attr:`tail_depth` candidates (the tail offset on
        the tail labels), or None when the tail offset applies at every rank (:meth:`label_offsets`) or is 0."""
        return self._tail_offsets() if self.tail_depth > 0 else None

    def _tail_offsets(self) -> np.ndarray | None:
        if self.fusion[TAIL_OFFSET] == 0.0 or self.tail is None:
            return None
        return np.where(self.tail, np.float32(self.fusion[TAIL_OFFSET]), np.float32(0.0))

    @property
    def routes_new_queries(self) -> bool:
        """Whether a query the click memory does not know is ranked by the encoder alone (the memory, which tells
        such queries apart, takes part in the score)."""
        return self.new_queries_encoder and self.active(KNOWS_QUERIES) is not None

    @property
    def uses_texts(self) -> bool:
        """Whether a search needs the query texts (a channel that reads them takes part)."""
        return any(self.channels[s.name].needs_texts for s in self.active_specs())

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / WEIGHTS_FILE, self.weights.astype(np.float32))
        offset = self.fusion[UNTRAINED_OFFSET] if self.untrained is not None else 0.0
        tail_offset = self.fusion[TAIL_OFFSET] if self.tail is not None else 0.0
        served = {s.weight_key: self.weight(s.name) for s in registry.registered()}  # 0 for a channel it lacks
        (folder / FUSION_FILE).write_text(json.dumps(
            {ALPHA: self.alpha, "search_k": self.search_k, **served, UNTRAINED_OFFSET: offset, TAIL_OFFSET: tail_offset,
             "new_queries_encoder": self.routes_new_queries, "tail_offset_depth": self.tail_depth, **self.info},
            indent=2, default=float) + "\n")
        if offset != 0.0 and self.untrained is not None:
            np.save(folder / UNTRAINED_FILE, np.asarray(self.untrained, bool))
        if tail_offset != 0.0 and self.tail is not None:
            np.save(folder / TAIL_FILE, np.asarray(self.tail, bool))
        for spec in self.active_specs():
            self.channels[spec.name].store(folder)
        return folder

    @classmethod
    def load(cls, folder: Path) -> FusedClassifier:
        if not (folder / WEIGHTS_FILE).exists() or not (folder / FUSION_FILE).exists():
            raise FileNotFoundError(f"{folder}: no classifier ({WEIGHTS_FILE} + {FUSION_FILE}); train a '-clf' "
                                    "method with `xc train --method <method>-clf`")
        meta = json.loads((folder / FUSION_FILE).read_text())
        alpha, search_k = float(meta.pop(ALPHA)), int(meta.pop("search_k"))
        weights: dict[str, float] = {ALPHA: alpha}
        channels: dict[str, Channel] = {}
        # a weight absent from fusion.json is a channel or offset added after the folder was saved: 0
        for spec in registry.registered():
            value = float(meta.pop(spec.weight_key, 0.0))
            if value > 0:
                _needs(folder, spec.weight_key, value, spec.saved_as)
                weights[spec.weight_key], channels[spec.name] = value, spec.load(folder)
        offset, tail_offset = float(meta.pop(UNTRAINED_OFFSET, 0.0)), float(meta.pop(TAIL_OFFSET, 0.0))
        if offset != 0.0:
            _needs(folder, UNTRAINED_OFFSET, offset, UNTRAINED_FILE)
        if tail_offset != 0.0:
            _needs(folder, TAIL_OFFSET, tail_offset, TAIL_FILE)
        new_queries_encoder = bool(meta.pop("new_queries_encoder", False))  # absent in folders saved before it
        tail_depth = int(meta.pop("tail_offset_depth", 0))  # likewise: every rank
        return cls(np.load(folder / WEIGHTS_FILE), Fusion(weights, untrained_offset=offset, tail_offset=tail_offset),
                   search_k, meta, channels, np.load(folder / UNTRAINED_FILE) if offset != 0.0 else None,
                   np.load(folder / TAIL_FILE) if tail_offset != 0.0 else None, new_queries_encoder, tail_depth)

    def with_fusion(self, **weights: float) -> FusedClassifier:
        """The same parts under other fusion weights (those not named are kept)."""
        return replace(self, fusion=self.fusion.replace(**weights))

    def classifier_alone(self) -> FusedClassifier:
        """W's ranking: α 0 and every channel off, and the tail offset 0 (the untrained-label offset kept, since W
        scores those labels by their text vector), so a search needs no query texts."""
        return replace(self, fusion=Fusion({UNTRAINED_OFFSET: self.fusion[UNTRAINED_OFFSET], ALPHA: 0.0}))

    def with_new_labels(self, vectors: np.ndarray) -> FusedClassifier:
        """The same classifier over a catalogue grown by labels that have no click yet (ads added after training):
        their ids follow the current ones, and each gets its text vector (``vectors``, unit rows) as its W row and
        counts as untrained, which is what training gives every label it saw no positive for (``train.py``). Each
        channel grows as it says (:meth:`Channel.grown`: the lexical, hybrid and memory channels vote only for
        labels with training documents and the name channel knows the names it was saved with, so a new label
        scores 0 there; its popularity is 0)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.weights.shape[1]:
            raise ValueError(f"new label vectors must be (n, {self.weights.shape[1]}), got {vectors.shape}")
        untrained = None if self.untrained is None else np.concatenate([self.untrained, np.ones(len(vectors), bool)])
        tail = None if self.tail is None else np.concatenate([self.tail, np.ones(len(vectors), bool)])  # no positive
        return replace(self, weights=np.concatenate([self.weights, vectors]), untrained=untrained, tail=tail,
                       channels={name: c.grown(len(vectors)) for name, c in self.channels.items()})

    @property
    def megabytes(self) -> float:
        return self.weights.nbytes / 2**20 + sum(self.channels[s.name].megabytes for s in self.active_specs())


def _needs(folder: Path, key: str, value: float, saved_as: str) -> None:
    if not (folder / saved_as).exists():
        raise FileNotFoundError(f"{folder / FUSION_FILE}: {key} {value} but no {saved_as} beside it; retrain the "
                                "'-clf' method")


def rescore(queries: np.ndarray, candidates: np.ndarray, label_vecs: np.ndarray, weights: np.ndarray,
            alpha: float, k: int, chunk: int = 256, channel_scores: list[tuple[float, np.ndarray]] | None = None,
            offsets: np.ndarray | None = None, lift: np.ndarray | None = None,
            lift_depth: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(scores, ids) of the best ``k`` candidates per query under the fused score, best first.

    ``channel_scores``: (weight, each candidate's score) of every channel that takes part, in registry order (same
    shape as ``candidates``); ``offsets``: a per-label score added to each candidate (untrained labels', the
    weighted priors); ``lift``: a per-label score added only to each query's first ``lift_depth`` candidates by the
    rest of the score (:func:`lift_top`)."""
    n = len(queries)
    width = min(k, candidates.shape[1])
    out_scores = np.full((n, width), -np.inf, dtype=np.float32)
    out_ids = np.full((n, width), -1, dtype=np.int64)
    for start in range(0, n, chunk):
        q = queries[start: start + chunk]
        cand = candidates[start: start + chunk]
        safe = np.maximum(cand, 0)
        score = np.zeros(cand.shape, dtype=np.float32)
        if alpha > 0:
            score += alpha * np.einsum("rcd,rd->rc", label_vecs[safe], q)
        if alpha < 1:
            score += (1 - alpha) * np.einsum("rcd,rd->rc", weights[safe], q)
        for weight, values in channel_scores or []:
            if weight > 0:
                score += weight * values[start: start + chunk]
        if offsets is not None:
            score += offsets[safe]
        score[cand < 0] = -np.inf
        if lift is not None and lift_depth > 0:
            score = lift_top(score, lift[safe], lift_depth)
        best = np.argsort(-score, axis=1, kind="stable")[:, :width]
        out_scores[start: start + chunk] = np.take_along_axis(score, best, axis=1)
        out_ids[start: start + chunk] = np.where(np.isfinite(out_scores[start: start + chunk]),
                                                 np.take_along_axis(cand, best, axis=1), -1)
    return out_scores, out_ids


def lift_top(score: np.ndarray, lift: np.ndarray, depth: int) -> np.ndarray:
    """``score`` (rows × candidates, −inf where there is none) with ``lift`` (same shape) added to each row's first
    ``depth`` candidates by score (:func:`first_by_score`)."""
    if depth >= score.shape[1]:
        return score + lift
    return np.where(first_by_score(score, depth), score + lift, score)


def first_by_score(score: np.ndarray, depth: int) -> np.ndarray:
    """A (rows × candidates) mask of each row's first ``depth`` candidates by score, equal scores the earlier column
    first, as a stable sort orders them.

    Found without sorting (the out-of-fold grid calls this for every fusion it reads): the candidates above the row's
    ``depth``-th score, then as many of those equal to it as fit, earliest first."""
    if depth >= score.shape[1]:
        return np.ones(score.shape, bool)
    threshold = -np.partition(-score, depth - 1, axis=1)[:, depth - 1:depth]
    first = score > threshold
    equal = score == threshold
    room = depth - first.sum(axis=1, keepdims=True)
    tied = equal.sum(axis=1, keepdims=True) > room  # more candidates equal to the threshold than places left
    if tied.any():
        rows = tied[:, 0]
        equal[rows] &= np.cumsum(equal[rows], axis=1) <= room[rows]
    return first | equal


def fused_search(queries: np.ndarray, label_index: Any, classifier_index: Any, label_vecs: np.ndarray,
                 fused: FusedClassifier, k: int, texts: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (fused scores, label ids) for each query: the two indexes' shortlists and each active channel's,
    united, re-scored.

    Args:
        queries: (n, dim) the encoder's query vectors (unit rows).
        label_index: a :class:`~xc_core.index.LabelIndex` over ``label_vecs`` (flat: exact; HNSW: served).
        classifier_index: the same over ``fused.weights`` (W).
        label_vecs: (n_labels, dim) the encoder's label vectors.
        fused: the model (W, its fusion, its channels).
        k: results per query.
        texts: the queries' texts, one per vector; needed when a channel that reads them takes part.

    Returns:
        (scores, ids), each (n, ≤ k), best first; −1 ids (score −inf) where a query has fewer candidates.

    Raises:
        ValueError: the model needs the query texts and ``texts`` is missing or of another length.
    """
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    offsets, lift = fused.label_offsets(), fused.tail_lift()
    if fused.alpha >= 1.0 and not fused.uses_texts and offsets is None and lift is None:  # the encoder's, as indexed
        return label_index.search(queries, k)
    if fused.uses_texts and (texts is None or len(texts) != len(queries)):
        readers = [s.name for s in fused.active_specs() if fused.channels[s.name].needs_texts]
        raise ValueError(f"this fused model has channels that read the query texts ({', '.join(readers)}): pass "
                         "the query texts (one per query vector)")
    depth = max(k, fused.search_k)
    _, enc_ids = label_index.search(queries, depth)
    _, clf_ids = classifier_index.search(queries, depth)
    # the per-label priors join through the label offsets; every other active channel proposes and scores
    candidates, proposals = propose_all({s.name: fused.channels[s.name] for s in fused.active_specs() if not s.prior},
                                        list(texts or []), queries, depth, union_ids(enc_ids, clf_ids))
    scores, ids = rescore(queries, candidates, label_vecs, fused.weights, fused.alpha, k, offsets=offsets,
                          lift=lift, lift_depth=fused.tail_depth,
                          channel_scores=[(fused.weight(name), p.scores_on(candidates))
                                          for name, p in proposals.items()])
    if fused.routes_new_queries:
        scores, ids = _encoder_for_new(queries, label_index, scores, ids, ~proposals[KNOWS_QUERIES].rows_with_labels())
    return scores, ids


def _encoder_for_new(queries: np.ndarray, label_index: Any, scores: np.ndarray, ids: np.ndarray,
                     new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``scores`` / ``ids`` with the ``new`` rows replaced by the encoder's own ranking (cosines, −1 padded)."""
    if not new.any():
        return scores, ids
    found_scores, found_ids = label_index.search(queries[new], ids.shape[1])
    scores, ids = scores.copy(), ids.copy()
    width = min(ids.shape[1], found_ids.shape[1])
    scores[new], ids[new] = -np.inf, -1
    scores[np.ix_(new, np.arange(width))] = found_scores[:, :width]
    ids[np.ix_(new, np.arange(width))] = found_ids[:, :width]
    return scores, ids


def drop_pairs(scores: np.ndarray, ids: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Remove (row, label) pairs from ranked results (a document's own label), keeping the rest in order."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    if not len(pairs):
        return scores, ids
    hit = np.zeros(ids.shape, dtype=bool)
    for row, label in pairs:
        hit[row] |= ids[row] == label
    scores = np.where(hit, -np.inf, scores)
    order = np.argsort(-scores, axis=1, kind="stable")
    scores = np.take_along_axis(scores, order, axis=1)
    return scores, np.where(np.isfinite(scores), np.take_along_axis(ids, order, axis=1), -1)
