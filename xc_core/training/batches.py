"""Mini-batches for dual-encoder training with graph regularizers (RAMEN §3).

A batch is a set of train documents. For each document: one random positive label, and one random anchor
from each document-side anchor set; for each chosen label: one random anchor from each label-side anchor
set. Negatives are in-batch (other rows' labels / anchors) and a row never uses as a negative something that
is one of its own positives (``positive_mask``) or one of its own anchors (``neighbour_mask``), nor a text
identical to its own: no encoder can separate two equal strings, so pushing one from the other only
damages it (on wikispeedia a document's own article is a label and an anchor of other rows; a query and an
item may read the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet
from xc_core.training.anchor_negatives import draw, side_key


@dataclass
class AnchorSide:
    """One anchor set seen from one side (documents or labels) of a batch."""

    texts: list[str]
    valid: np.ndarray  # (B,) row has an anchor
    neighbour_mask: np.ndarray  # (B, B): anchor of row j is also an anchor of row i
    #: one extra negative anchor per row ("" for none) and where a row has one (``anchor_negatives``: an anchor of
    #: the set near the node that is not its own); None when the builder has no pool for this side
    hard_texts: list[str] | None = None
    hard_valid: np.ndarray | None = None


@dataclass
class Batch:
    doc_ids: np.ndarray
    label_ids: np.ndarray
    doc_texts: list[str]
    label_texts: list[str]
    positive_mask: np.ndarray  # (B, B): label of row j is a true positive of document i
    doc_anchors: dict[str, AnchorSide] = field(default_factory=dict)
    label_anchors: dict[str, AnchorSide] = field(default_factory=dict)
    #: one extra negative label per row (-1: none) and its text ("" for none): ``training.attributes``' labels of
    #: another brand / place; None when the builder has no negative pool
    hard_label_ids: np.ndarray | None = None
    hard_texts: list[str] = field(default_factory=list)
    #: labels drawn uniformly for every row's softmax (``sampled_negatives``) and their texts; None: none drawn
    sampled_label_ids: np.ndarray | None = None
    sampled_texts: list[str] = field(default_factory=list)
    #: (B, M) True where sampled label j may not be row i's negative (a known positive, or its text is the row's
    #: document or label text)
    sampled_positive: np.ndarray | None = None


def _pick(matrix: sp.csr_matrix, rows: np.ndarray, rng: np.random.Generator,
          weights: np.ndarray | None = None) -> np.ndarray:
    """One random column of each row (-1 when the row is empty), vectorised: uniformly, or in proportion to
    ``weights`` (one per stored entry, aligned with ``matrix.data``). Both read one uniform number per row, so a
    weighted draw with equal weights picks what the uniform one picks."""
    starts, ends = matrix.indptr[rows], matrix.indptr[rows + 1]
    counts = ends - starts
    if weights is None:
        offset = (rng.random(len(rows)) * np.maximum(counts, 1)).astype(np.int64)
        at = starts + offset
    else:
        cumulative = np.concatenate([[0.0], np.cumsum(weights)])
        low, high = cumulative[starts], cumulative[ends]
        at = np.searchsorted(cumulative, low + rng.random(len(rows)) * (high - low), side="right") - 1
        at = np.clip(at, starts, np.maximum(ends - 1, starts))
    picked = (matrix.indices[np.minimum(at, max(matrix.nnz - 1, 0))] if matrix.nnz
              else np.zeros(len(rows), int))
    return np.where(counts > 0, picked, -1)


def _membership(matrix: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(len(rows), len(cols)) bool: matrix[rows[i], cols[j]] != 0 (cols of -1 are never members)."""
    sub = matrix[rows][:, np.maximum(cols, 0)].toarray() != 0
    sub[:, cols < 0] = False
    return sub


def same_text(left: list[str], right: list[str]) -> np.ndarray:
    """(len(left), len(right)) bool: left[i] == right[j]."""
    codes = {t: i for i, t in enumerate(dict.fromkeys([*left, *right]))}
    a = np.array([codes[t] for t in left])
    b = np.array([codes[t] for t in right])
    return a[:, None] == b[None, :]


def _side(incidence: sp.csr_matrix, rows: np.ndarray, texts: list[str], rng: np.random.Generator,
          node_texts: list[str]) -> AnchorSide:
    anchors = _pick(incidence, rows, rng)
    valid = anchors >= 0
    neighbour = _membership(incidence, rows, anchors)
    neighbour |= same_text(node_texts, [texts[a] if a >= 0 else "" for a in anchors]) & valid[None, :]
    np.fill_diagonal(neighbour, False)
    return AnchorSide([texts[a] if a >= 0 else "" for a in anchors], valid, neighbour)


def _hard_anchor(side: AnchorSide, pool: np.ndarray, nodes: np.ndarray, texts: list[str],
                 rng: np.random.Generator) -> None:
    """Give ``side`` one extra negative anchor per row from the rows' nodes' pools: only rows that have an anchor,
    and never a text equal to the row's own anchor (no encoder can separate two equal strings)."""
    picked = draw(pool, nodes, rng)
    hard_texts = [texts[a] if a >= 0 else "" for a in picked]
    clash = np.array([h == t for h, t in zip(hard_texts, side.texts, strict=True)], dtype=bool)
    side.hard_valid = side.valid & (picked >= 0) & ~clash
    side.hard_texts = [t if ok else "" for t, ok in zip(hard_texts, side.hard_valid, strict=True)]


@dataclass
class BatchBuilder:
    """Samples batches from CSR views of the data set (built once, sampled many times)."""

    doc_texts: list[str]
    label_texts: list[str]
    y: sp.csr_matrix  # train documents × labels
    doc_side: dict[str, tuple[sp.csr_matrix, list[str]]]  # set → (docs × anchors, anchor texts)
    label_side: dict[str, tuple[sp.csr_matrix, list[str]]]
    #: (train documents, M) label indices, -1 padded (valid ones first): each row's pool of extra negatives
    #: (``training.attributes.mine_negatives``); None: no extra negative and no extra random draw
    hard_pool: np.ndarray | None = None
    #: ``doc/<set>`` / ``label/<set>`` → (nodes of that side, M) anchor ids, -1 padded: each node's pool of
    #: extra negative anchors (``training.anchor_negatives``); a side without a pool draws nothing extra
    anchor_pools: dict[str, np.ndarray] = field(default_factory=dict)
    #: labels drawn uniformly per batch for every row's softmax (``TrainConfig.sampled_negatives``; 0: none)
    sampled_negatives: int = 0
    #: one weight per stored entry of ``y``: a document's positive is drawn in proportion to it (training/positives.py;
    #: None: uniformly)
    positive_weights: np.ndarray | None = None
    #: with ``positive_weights``: a known label weighing less than the row's drawn positive is one of its negatives
    #: in the batch (so the loss orders a query's labels by their clicks; ``TrainConfig.graded_positives``)
    graded: bool = False

    @classmethod
    def from_anchor_sets(cls, doc_texts: list[str], label_texts: list[str], y: sp.csr_matrix,
                         anchor_sets: dict[str, AnchorSet], doc_sets: list[str], label_sets: list[str],
                         hard_pool: np.ndarray | None = None,
                         anchor_pools: dict[str, np.ndarray] | None = None,
                         sampled_negatives: int = 0,
                         positive_weights: np.ndarray | None = None, graded: bool = False) -> BatchBuilder:
        n_docs, n_labels = len(doc_texts), len(label_texts)
        return cls(
            doc_texts, label_texts, sp.csr_matrix(y),
            {s: (anchor_sets[s].doc_matrix(n_docs), anchor_sets[s].texts) for s in doc_sets
             if len(anchor_sets[s].doc_edges)},
            {s: (anchor_sets[s].label_matrix(n_labels), anchor_sets[s].texts) for s in label_sets
             if len(anchor_sets[s].label_edges)},
            hard_pool,
            dict(anchor_pools or {}),
            sampled_negatives,
            positive_weights,
            graded,
        )

    def build(self, doc_ids: np.ndarray, rng: np.random.Generator) -> Batch:
        labels = _pick(self.y, doc_ids, rng, self.positive_weights)
        if (labels < 0).any():
            raise ValueError("every training document needs at least one positive label")
        doc_texts, label_texts = [self.doc_texts[i] for i in doc_ids], [self.label_texts[j] for j in labels]
        positive = self._known(doc_ids, labels) | same_text(doc_texts, label_texts)
        np.fill_diagonal(positive, True)
        batch = Batch(
            doc_ids=doc_ids, label_ids=labels, doc_texts=doc_texts, label_texts=label_texts, positive_mask=positive,
            doc_anchors={s: _side(m, doc_ids, t, rng, doc_texts) for s, (m, t) in self.doc_side.items()},
            label_anchors={s: _side(m, labels, t, rng, label_texts) for s, (m, t) in self.label_side.items()},
        )
        if self.hard_pool is not None:  # drawn last: without a pool every other draw is as before
            batch.hard_label_ids = self._hard(doc_ids, labels, doc_texts, label_texts, rng)
            batch.hard_texts = [self.label_texts[j] if j >= 0 else "" for j in batch.hard_label_ids]
        for kind, sides, nodes in (("doc", batch.doc_anchors, doc_ids), ("label", batch.label_anchors, labels)):
            for name, side in sides.items():  # drawn after everything else, as the attribute negatives
                pool = self.anchor_pools.get(side_key(kind, name))
                if pool is not None:
                    texts = (self.doc_side if kind == "doc" else self.label_side)[name][1]
                    _hard_anchor(side, pool, nodes, texts, rng)
        if self.sampled_negatives:  # drawn last of all: with none, every other draw is as before
            self._sample(batch, rng)
        return batch

    def _known(self, doc_ids: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """(B, B): the label of row j is a known positive of document i that row i may not push away — any known
        positive, or (``graded``) one weighing at least row i's drawn positive."""
        member = _membership(self.y, doc_ids, labels)
        if not self.graded or self._weight_matrix is None:
            return member
        sub = self._weight_matrix[doc_ids][:, labels].toarray()
        return member & (sub >= np.diag(sub)[:, None])

    @cached_property
    def _weight_matrix(self) -> sp.csr_matrix | None:
        """``positive_weights`` laid on ``y``'s pattern (built once, read by every batch's graded mask)."""
        if self.positive_weights is None:
            return None
        return sp.csr_matrix((self.positive_weights, self.y.indices, self.y.indptr), shape=self.y.shape)

    def _sample(self, batch: Batch, rng: np.random.Generator) -> None:
        """``sampled_negatives`` labels drawn uniformly (distinct; fewer when the label set is smaller), shared by
        the batch's rows, with the mask of those no row may push away."""
        n_labels = len(self.label_texts)
        ids = np.unique(rng.integers(0, n_labels, self.sampled_negatives)) if self.sampled_negatives < n_labels \
            else np.arange(n_labels)
        texts = [self.label_texts[j] for j in ids]
        batch.sampled_label_ids, batch.sampled_texts = ids, texts
        batch.sampled_positive = (_membership(self.y, batch.doc_ids, ids) | same_text(batch.doc_texts, texts)
                                  | same_text(batch.label_texts, texts))

    def _hard(self, doc_ids: np.ndarray, labels: np.ndarray, doc_texts: list[str], label_texts: list[str],
              rng: np.random.Generator) -> np.ndarray:
        """One label of each row's pool, uniformly (-1 for an empty pool), never a positive of the row's document
        nor a text equal to the row's document or label."""
        assert self.hard_pool is not None
        hard = draw(self.hard_pool, doc_ids, rng)
        texts = [self.label_texts[j] if j >= 0 else None for j in hard]
        clash = np.array([t is not None and (t == d or t == lab) for t, d, lab in zip(texts, doc_texts, label_texts,
                                                                                      strict=True)], dtype=bool)
        own = np.array([j >= 0 and self.y[d, j] != 0 for d, j in zip(doc_ids, hard, strict=True)], dtype=bool)
        return np.where(clash | own, -1, hard)
