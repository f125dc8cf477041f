"""The one search path of a method with a classifier stage: eval, ``xc predict`` and the Dagster index asset.

Shortlist = top ``search_k`` of the label-embedding index ∪ top ``search_k`` of the classifier index (both
faiss), each candidate re-scored exactly as ``alpha * cos(q, label text) + (1 - alpha) * cos(q, w_label)``.
The union matters: a label whose text says little (``007.info``) is only in the classifier's list, a label
with no clicks only in the encoder's. ``alpha = 1`` ranks by the encoder alone, ``alpha = 0`` by W alone.
With a lexical channel (``lexical.py``, kept only when validation gives it a weight > 0) its top labels join
the shortlist and ``lexical_weight * lexical`` is added to every candidate's score; it needs the query texts.
Labels without a training positive (W is their text vector, so they score by text alone whatever alpha) get
``untrained_offset`` added: their own calibration against the trained labels' fused score, chosen on validation.
With the hybrid channel (``linear.py``: XR-Linear on TF-IDF ⊕ the encoder's vector) its beam's labels
join the shortlist too and ``linear_weight * linear`` is added (0 outside its beam); it needs the query texts.
The click memory (``memory.py``) adds ``memory_weight`` times a repeated query's remembered click days (its labels
join the shortlist; it needs the query texts), and ``popularity_weight`` times each label's click popularity joins
the per-label offsets. The name channel (``names.py``) adds ``name_weight`` times how fully the query writes out a
label's name (the labels it names join the shortlist; it needs the query texts). The trained labels of the
tail frequency bin (``label_quantiles``' bin 0 over W's training documents, with every label W saw no positive for)
get ``tail_offset`` added: the channels that lift head labels (memory, popularity, W) push rare labels the encoder
ranked well down, and the offset, chosen out of fold under the gate's tail guard, puts them back.
With ``new_queries_encoder`` a query the click memory does not know (a text never asked in the training window) is
ranked by the encoder alone: the stage sets it (``ClassifierConfig.new_query_fallback``, off by default) when, on the
out-of-fold rows of such queries, the encoder alone beats the fusion chosen for all rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.classifier.lexical import LEXICAL_DIR, LexicalChannel
from xc_core.classifier.linear import HYBRID_DIR, LinearChannel
from xc_core.classifier.memory import MEMORY_DIR, POPULARITY_FILE, ClickMemory
from xc_core.classifier.names import NAMES_FILE, LabelNames
from xc_core.classifier.shortlist import scores_on, union_ids

WEIGHTS_FILE, FUSION_FILE = "weights.npy", "fusion.json"
UNTRAINED_FILE = "untrained.npy"  # per label: no training positive when W was fit (only saved with an offset)
TAIL_FILE = "tail.npy"  # per label: in the tail frequency bin of W's training documents (saved with a tail offset)
LABEL_VECTORS = "label_vectors.npy"  # the encoder's label embeddings: beside a classifier folder and in an index folder
CLASSIFIER_INDEX = "classifier"  # sub-folder of a method's index folder: the HNSW index over its label vectors W


@dataclass
class FusedClassifier:
    weights: np.ndarray  # (n_labels, dim) unit rows
    alpha: float  # encoder share of the fused score
    search_k: int = 100
    info: dict[str, Any] = field(default_factory=dict)  # how alpha was chosen (validation curve), training log
    lexical: LexicalChannel | None = None
    lexical_weight: float = 0.0  # share of the lexical score added to the fused one (0: channel unused)
    untrained_offset: float = 0.0  # added to the score of every label without a training positive
    untrained: np.ndarray | None = None  # (n_labels,) bool: no training positive when W was fit
    linear: LinearChannel | None = None
    linear_weight: float = 0.0  # share of the hybrid channel's score added to the fused one (0: channel unused)
    memory: ClickMemory | None = None
    memory_weight: float = 0.0  # share of a repeated query's remembered click days (0: channel unused)
    popularity: np.ndarray | None = None  # (n_labels,) click popularity in [0, 1] (memory.label_popularity)
    popularity_weight: float = 0.0
    names: LabelNames | None = None
    name_weight: float = 0.0  # share of the name score added to the fused one (0: channel unused)
    tail_offset: float = 0.0  # added to the score of every trained label of the tail frequency bin
    tail: np.ndarray | None = None  # (n_labels,) bool: in the tail bin of W's training documents (untrained ones too)
    #: rank a query the click memory does not know by the encoder alone (needs the memory channel)
    new_queries_encoder: bool = False

    def label_offsets(self) -> np.ndarray | None:
        """Per-label additive score (the offsets on untrained and on tail labels, the weighted popularity), or None
        when there is none."""
        parts = []
        if self.untrained_offset != 0.0 and self.untrained is not None:
            parts.append(np.where(self.untrained, np.float32(self.untrained_offset), np.float32(0.0)))
        if self.tail_offset != 0.0 and self.tail is not None:
            parts.append(np.where(self.tail, np.float32(self.tail_offset), np.float32(0.0)))
        if self.popularity_weight > 0 and self.popularity is not None:
            parts.append(np.float32(self.popularity_weight) * self.popularity)
        return np.sum(parts, axis=0).astype(np.float32) if parts else None

    @property
    def active_lexical(self) -> LexicalChannel | None:
        """The lexical channel when it takes part in the score (weight > 0), else None."""
        return self.lexical if self.lexical_weight > 0 else None

    @property
    def uses_lexical(self) -> bool:
        return self.active_lexical is not None

    @property
    def active_linear(self) -> LinearChannel | None:
        """The hybrid channel when it takes part in the score (weight > 0), else None."""
        return self.linear if self.linear_weight > 0 else None

    @property
    def active_memory(self) -> ClickMemory | None:
        """The click memory when it takes part in the score (weight > 0), else None."""
        return self.memory if self.memory_weight > 0 else None

    @property
    def active_names(self) -> LabelNames | None:
        """The labels' names when the name channel takes part in the score (weight > 0), else None."""
        return self.names if self.name_weight > 0 else None

    @property
    def routes_new_queries(self) -> bool:
        """Whether a query the click memory does not know is ranked by the encoder alone (the memory, which tells
        such queries apart, takes part in the score)."""
        return self.new_queries_encoder and self.active_memory is not None

    @property
    def uses_texts(self) -> bool:
        """Whether a search needs the query texts (a lexical, hybrid, memory or name channel)."""
        return (self.uses_lexical or self.active_linear is not None or self.active_memory is not None
                or self.active_names is not None)

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / WEIGHTS_FILE, self.weights.astype(np.float32))
        weight = self.lexical_weight if self.uses_lexical else 0.0
        offset = self.untrained_offset if self.untrained is not None else 0.0
        linear_weight = self.linear_weight if self.active_linear is not None else 0.0
        memory_weight = self.memory_weight if self.active_memory is not None else 0.0
        popularity_weight = self.popularity_weight if self.popularity is not None else 0.0
        name_weight = self.name_weight if self.active_names is not None else 0.0
        tail_offset = self.tail_offset if self.tail is not None else 0.0
        (folder / FUSION_FILE).write_text(json.dumps(
            {"alpha": self.alpha, "search_k": self.search_k, "lexical_weight": weight, "untrained_offset": offset,
             "linear_weight": linear_weight, "memory_weight": memory_weight, "popularity_weight": popularity_weight,
             "name_weight": name_weight, "tail_offset": tail_offset,
             "new_queries_encoder": self.routes_new_queries, **self.info}, indent=2, default=float) + "\n")
        if offset != 0.0 and self.untrained is not None:
            np.save(folder / UNTRAINED_FILE, np.asarray(self.untrained, bool))
        if tail_offset != 0.0 and self.tail is not None:
            np.save(folder / TAIL_FILE, np.asarray(self.tail, bool))
        if popularity_weight > 0 and self.popularity is not None:
            np.save(folder / POPULARITY_FILE, np.asarray(self.popularity, np.float32))
        if (memory := self.active_memory) is not None:
            memory.save(folder / MEMORY_DIR)
        if (names := self.active_names) is not None:
            names.save(folder)
        if (channel := self.active_lexical) is not None:
            channel.save(folder / LEXICAL_DIR)
        if (linear := self.active_linear) is not None:
            linear.save(folder / HYBRID_DIR)
        return folder

    @classmethod
    def load(cls, folder: Path) -> FusedClassifier:
        if not (folder / WEIGHTS_FILE).exists() or not (folder / FUSION_FILE).exists():
            raise FileNotFoundError(f"{folder}: no classifier ({WEIGHTS_FILE} + {FUSION_FILE}); train a '-clf' "
                                    "method with `xc train --method <method>-clf`")
        meta = json.loads((folder / FUSION_FILE).read_text())
        alpha, search_k = float(meta.pop("alpha")), int(meta.pop("search_k"))
        weight = float(meta.pop("lexical_weight", 0.0))
        if weight > 0 and not (folder / LEXICAL_DIR).is_dir():
            raise FileNotFoundError(f"{folder / FUSION_FILE}: lexical_weight {weight} but no {LEXICAL_DIR}/ folder "
                                    "beside it; retrain the '-clf' method")
        lexical = LexicalChannel.load(folder / LEXICAL_DIR) if weight > 0 else None
        offset = float(meta.pop("untrained_offset", 0.0))  # absent in folders saved before the offset existed
        if offset != 0.0 and not (folder / UNTRAINED_FILE).exists():
            raise FileNotFoundError(f"{folder / FUSION_FILE}: untrained_offset {offset} but no {UNTRAINED_FILE} "
                                    "beside it; retrain the '-clf' method")
        untrained = np.load(folder / UNTRAINED_FILE) if offset != 0.0 else None
        linear_weight = float(meta.pop("linear_weight", 0.0))  # absent in folders saved before the channel existed
        if linear_weight > 0 and not (folder / HYBRID_DIR).is_dir():
            raise FileNotFoundError(f"{folder / FUSION_FILE}: linear_weight {linear_weight} but no {HYBRID_DIR}/ "
                                    "folder beside it; retrain the '-clf' method")
        linear = LinearChannel.load(folder / HYBRID_DIR) if linear_weight > 0 else None
        memory_weight = float(meta.pop("memory_weight", 0.0))  # both absent in folders saved before the channels
        popularity_weight = float(meta.pop("popularity_weight", 0.0))
        name_weight = float(meta.pop("name_weight", 0.0))  # absent in folders saved before the channel existed
        tail_offset = float(meta.pop("tail_offset", 0.0))  # absent in folders saved before the offset existed
        new_queries_encoder = bool(meta.pop("new_queries_encoder", False))  # absent in folders saved before it
        for value, name in ((memory_weight, MEMORY_DIR + "/"), (popularity_weight, POPULARITY_FILE),
                            (name_weight, NAMES_FILE), (abs(tail_offset), TAIL_FILE)):
            if value > 0 and not (folder / name).exists():
                raise FileNotFoundError(f"{folder / FUSION_FILE}: a weight {value} but no {name} beside it; retrain "
                                        "the '-clf' method")
        memory = ClickMemory.load(folder / MEMORY_DIR) if memory_weight > 0 else None
        popularity = np.load(folder / POPULARITY_FILE) if popularity_weight > 0 else None
        names = LabelNames.load(folder) if name_weight > 0 else None
        tail = np.load(folder / TAIL_FILE) if tail_offset != 0.0 else None
        return cls(np.load(folder / WEIGHTS_FILE), alpha, search_k, meta, lexical, weight, offset, untrained,
                   linear, linear_weight, memory, memory_weight, popularity, popularity_weight, names, name_weight,
                   tail_offset, tail, new_queries_encoder)

    def with_alpha(self, alpha: float, lexical_weight: float | None = None, untrained_offset: float | None = None,
                   linear_weight: float | None = None, memory_weight: float | None = None,
                   popularity_weight: float | None = None, name_weight: float | None = None,
                   tail_offset: float | None = None) -> FusedClassifier:
        """The same parts under other fusion weights (None keeps the current weight / offset)."""
        def keep(value: float | None, current: float) -> float:
            return current if value is None else value

        return replace(self, alpha=alpha, lexical_weight=keep(lexical_weight, self.lexical_weight),
                       untrained_offset=keep(untrained_offset, self.untrained_offset),
                       linear_weight=keep(linear_weight, self.linear_weight),
                       memory_weight=keep(memory_weight, self.memory_weight),
                       popularity_weight=keep(popularity_weight, self.popularity_weight),
                       name_weight=keep(name_weight, self.name_weight),
                       tail_offset=keep(tail_offset, self.tail_offset))

    def classifier_alone(self) -> FusedClassifier:
        """W's ranking: α 0 and every text and click channel off (the untrained-label offset kept, since W scores
        those labels by their text vector), so a search needs no query texts."""
        return replace(self, alpha=0.0, lexical_weight=0.0, linear_weight=0.0, memory_weight=0.0,
                       popularity_weight=0.0, name_weight=0.0, tail_offset=0.0)

    def with_new_labels(self, vectors: np.ndarray) -> FusedClassifier:
        """The same classifier over a catalogue grown by labels that have no click yet (ads added after training):
        their ids follow the current ones, and each gets its text vector (``vectors``, unit rows) as its W row and
        counts as untrained, which is what training gives every label it saw no positive for (``train.py``). The
        lexical and hybrid channels vote only for labels with training documents, so they are unchanged; the name
        channel knows the names it was saved with, so a new label scores 0 there."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.weights.shape[1]:
            raise ValueError(f"new label vectors must be (n, {self.weights.shape[1]}), got {vectors.shape}")
        untrained = None if self.untrained is None else np.concatenate([self.untrained, np.ones(len(vectors), bool)])
        tail = None if self.tail is None else np.concatenate([self.tail, np.ones(len(vectors), bool)])  # no positive
        popularity = (None if self.popularity is None  # no click yet: no popularity
                      else np.concatenate([self.popularity, np.zeros(len(vectors), np.float32)]))
        return replace(self, weights=np.concatenate([self.weights, vectors]), untrained=untrained,
                       popularity=popularity, tail=tail)

    @property
    def megabytes(self) -> float:
        channel, linear, memory, names = self.active_lexical, self.active_linear, self.active_memory, self.active_names
        popularity = self.popularity if self.popularity_weight > 0 else None
        return (self.weights.nbytes / 2**20 + (channel.megabytes if channel is not None else 0.0)
                + (linear.megabytes if linear is not None else 0.0) + (memory.megabytes if memory is not None else 0.0)
                + (popularity.nbytes / 2**20 if popularity is not None else 0.0)
                + (names.megabytes if names is not None else 0.0))


def rescore(queries: np.ndarray, candidates: np.ndarray, label_vecs: np.ndarray, weights: np.ndarray,
            alpha: float, k: int, chunk: int = 256, lexical: np.ndarray | None = None,
            lexical_weight: float = 0.0, offsets: np.ndarray | None = None, linear: np.ndarray | None = None,
            linear_weight: float = 0.0, memory: np.ndarray | None = None,
            memory_weight: float = 0.0, names: np.ndarray | None = None,
            name_weight: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(scores, ids) of the best ``k`` candidates per query under the fused score, best first.

    ``lexical`` / ``linear`` / ``memory`` / ``names``: the lexical / hybrid / memory / name channel's score of each
    candidate (same
    shape as ``candidates``), added with their weights; ``offsets``: a per-label score added to each candidate
    (untrained labels', popularity)."""
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
        if lexical is not None and lexical_weight > 0:
            score += lexical_weight * lexical[start: start + chunk]
        if linear is not None and linear_weight > 0:
            score += linear_weight * linear[start: start + chunk]
        if memory is not None and memory_weight > 0:
            score += memory_weight * memory[start: start + chunk]
        if names is not None and name_weight > 0:
            score += name_weight * names[start: start + chunk]
        if offsets is not None:
            score += offsets[safe]
        score[cand < 0] = -np.inf
        best = np.argsort(-score, axis=1, kind="stable")[:, :width]
        out_scores[start: start + chunk] = np.take_along_axis(score, best, axis=1)
        out_ids[start: start + chunk] = np.where(np.isfinite(out_scores[start: start + chunk]),
                                                 np.take_along_axis(cand, best, axis=1), -1)
    return out_scores, out_ids


def fused_search(queries: np.ndarray, label_index: Any, classifier_index: Any, label_vecs: np.ndarray,
                 fused: FusedClassifier, k: int, texts: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (fused scores, label ids) for each query: the ANN shortlists (and the lexical one when the
    model has that channel: ``texts`` are then the queries' texts), united, re-scored."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    offsets = fused.label_offsets()
    if fused.alpha >= 1.0 and not fused.uses_texts and offsets is None:  # the encoder's ranking, as indexed
        return label_index.search(queries, k)
    if fused.uses_texts and (texts is None or len(texts) != len(queries)):
        raise ValueError("this fused model has a lexical, hybrid, memory or name channel: pass the query texts (one "
                         "per query vector)")
    depth = max(k, fused.search_k)
    _, enc_ids = label_index.search(queries, depth)
    _, clf_ids = classifier_index.search(queries, depth)
    candidates, lexical, linear, memory, memory_ids = union_ids(enc_ids, clf_ids), None, None, None, None
    if (hybrid := fused.active_linear) is not None:
        linear_scores, linear_ids = hybrid.search(list(texts or []), queries, depth)
        candidates = union_ids(candidates, linear_ids)
    if (remembered := fused.active_memory) is not None:
        memory_scores, memory_ids = remembered.search(list(texts or []), depth)
        candidates = union_ids(candidates, memory_ids)
    if (names := fused.active_names) is not None:
        candidates = union_ids(candidates, names.search(list(texts or []), depth)[1])
    if (channel := fused.active_lexical) is not None:
        candidates, lexical = channel.shortlist(list(texts or []), depth, candidates)
    name_scores = names.scores_on(list(texts or []), candidates) if names is not None else None
    if hybrid is not None:
        linear = scores_on(linear_ids, linear_scores, candidates)
    if memory_ids is not None:
        memory = scores_on(memory_ids, memory_scores, candidates)
    scores, ids = rescore(queries, candidates, label_vecs, fused.weights, fused.alpha, k, lexical=lexical,
                          lexical_weight=fused.lexical_weight, offsets=offsets, linear=linear,
                          linear_weight=fused.linear_weight, memory=memory, memory_weight=fused.memory_weight,
                          names=name_scores, name_weight=fused.name_weight)
    if fused.routes_new_queries and memory_ids is not None:
        scores, ids = _encoder_for_new(queries, label_index, scores, ids, ~np.asarray((memory_ids >= 0).any(axis=1)))
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
