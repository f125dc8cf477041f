"""Brand- and location-safe training from item metadata and query text.

Two switches of :class:`~xc_core.training.config.TrainConfig` use what a real ads log has — the items' ``brand`` /
``location`` (``XCDataset.label_attributes``) and the query text — never a simulator's hidden grades:

* ``attribute_negatives`` (M > 0): hard negatives that share intent but not brand (or place). Before every epoch,
  for each training document that *names* a value of an attribute (the rule of :mod:`xc_core.evaluation.mismatch`:
  the value's words in the query text), the current encoder's M most similar labels that carry *another* value of
  that attribute, none of the document's positives, are mined (:func:`mine_negatives`); each step draws one of
  them per such row and the task loss pushes the row's document away from it (``losses.softmax``: one extra
  column of the row's softmax). Those are the ads the A/B test counts as brand / location bad matches: of the
  labels a fine-tune brings up for a branded query, the ones of another brand.
* ``attribute_anchor_filter``: anchor edges whose two ends carry different values of an attribute — a session that
  names two different brands, two co-clicked items of different brands — are dropped (:func:`crossing_edges`).
  An end carries a value when it is a label with that metadata (a label, or an anchor text that is a label's
  text), else when its text names the value; an end without a value never crosses (the generic product).

A data set without item metadata (aol-1000, wikispeedia, XC folders) has no attribute: :func:`AttributeIndex.build`
returns None and both switches do nothing — the batches, the losses and the anchors stay exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet
from xc_core.evaluation.mismatch import named_values, words


@dataclass(frozen=True)
class AttributeIndex:
    """Per attribute a data set's labels carry: the lexicon of values (their words, lower-cased) and each label's
    value as a code into it (-1: none)."""

    lexicons: dict[str, list[str]]
    label_codes: dict[str, np.ndarray]
    label_texts: list[str]

    @classmethod
    def build(cls, label_attributes: Mapping[str, Sequence[str | None]],
              label_texts: list[str]) -> AttributeIndex | None:
        """None when no label carries any attribute value (a data set without item metadata)."""
        lexicons: dict[str, list[str]] = {}
        codes: dict[str, np.ndarray] = {}
        for attribute, values in label_attributes.items():
            normal = [" ".join(words(v)) if v is not None else "" for v in values]
            lexicon = sorted(set(normal) - {""})
            if not lexicon:
                continue
            code_of = {v: c for c, v in enumerate(lexicon)}
            lexicons[attribute] = lexicon
            codes[attribute] = np.array([code_of.get(v, -1) for v in normal], dtype=np.int64)
        return cls(lexicons, codes, list(label_texts)) if lexicons else None

    @property
    def attributes(self) -> list[str]:
        return list(self.lexicons)

    def named(self, texts: Sequence[str], attribute: str) -> list[frozenset[int]]:
        """Per text, the codes of the values it names as whole words."""
        return [frozenset(found) for found in named_values(texts, self.lexicons[attribute])]

    def carried(self, texts: Sequence[str], attribute: str) -> list[frozenset[int]]:
        """Per text, the value it carries: a label's metadata when the text is a label's text (the first such
        label), else the values the text names."""
        label_of: dict[str, int] = {}
        for i, text in enumerate(self.label_texts):
            label_of.setdefault(text, i)
        codes = self.label_codes[attribute]
        named = self.named(texts, attribute)
        out = []
        for text, found in zip(texts, named, strict=True):
            label = label_of.get(text)
            out.append(frozenset({int(codes[label])} if codes[label] >= 0 else ()) if label is not None else found)
        return out


def _crossing(left: list[frozenset[int]], right: list[frozenset[int]], edges: np.ndarray) -> np.ndarray:
    """(len(edges),) bool: both ends carry values of the attribute and share none."""
    return np.array([bool(left[a]) and bool(right[b]) and not (left[a] & right[b]) for a, b in edges.tolist()],
                    dtype=bool)


def crossing_edges(anchors: AnchorSet, index: AttributeIndex, doc_texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(doc edges, label edges) bool masks of the edges whose ends carry different values of some attribute.

    A document end carries the values its text names; a label end its metadata; an anchor end its label's
    metadata when its text is a label's text, else the values it names."""
    doc_cross = np.zeros(len(anchors.doc_edges), dtype=bool)
    label_cross = np.zeros(len(anchors.label_edges), dtype=bool)
    for attribute in index.attributes:
        anchor_values = index.carried(anchors.texts, attribute)
        if len(anchors.doc_edges):
            doc_values = index.named(doc_texts, attribute)
            doc_cross |= _crossing(doc_values, anchor_values, anchors.doc_edges)
        if len(anchors.label_edges):
            codes = index.label_codes[attribute]
            label_values = [frozenset({int(c)} if c >= 0 else ()) for c in codes]
            label_cross |= _crossing(label_values, anchor_values, anchors.label_edges)
    return doc_cross, label_cross


def without_crossing_edges(anchors: AnchorSet, index: AttributeIndex | None,
                           doc_texts: list[str]) -> tuple[AnchorSet, int]:
    """The set without its attribute-crossing edges, and how many were dropped (the set itself and 0 when the
    data set has no item metadata)."""
    if index is None:
        return anchors, 0
    doc_cross, label_cross = crossing_edges(anchors, index, doc_texts)
    if not doc_cross.any() and not label_cross.any():
        return anchors, 0
    keep_doc, keep_label = ~doc_cross, ~label_cross
    kept = AnchorSet(anchors.name, anchors.texts, anchors.doc_edges[keep_doc], anchors.label_edges[keep_label],
                     doc_proxy=np.asarray(anchors.doc_proxy)[keep_doc],
                     label_proxy=np.asarray(anchors.label_proxy)[keep_label], test_edges=anchors.test_edges)
    return kept, int(doc_cross.sum() + label_cross.sum())


def mismatch_matrix(index: AttributeIndex, doc_texts: Sequence[str]) -> sp.csr_matrix:
    """(len(doc_texts), n_labels) bool CSR: label j carries a value of an attribute that document i names, but
    none that it names — the labels the A/B test would count as a bad match for that query."""
    n_labels = len(index.label_texts)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    for attribute in index.attributes:
        codes = index.label_codes[attribute]
        carrying = np.flatnonzero(codes >= 0)
        for i, found in enumerate(index.named(doc_texts, attribute)):
            if not found:
                continue
            bad = carrying[~np.isin(codes[carrying], np.fromiter(found, dtype=np.int64))]
            rows.append(np.full(len(bad), i, dtype=np.int64))
            cols.append(bad)
    if not rows:
        return sp.csr_matrix((len(doc_texts), n_labels), dtype=bool)
    r, c = np.concatenate(rows), np.concatenate(cols)
    matrix = sp.csr_matrix((np.ones(len(r), dtype=bool), (r, c)), shape=(len(doc_texts), n_labels))
    matrix.sum_duplicates()
    return matrix


def mine_negatives(doc_emb: np.ndarray, label_emb: np.ndarray, mismatch: sp.csr_matrix, positives: sp.csr_matrix,
                   per_doc: int) -> np.ndarray:
    """(n_docs, per_doc) label indices, -1 padded: each document's ``per_doc`` highest-scored labels among its
    ``mismatch`` row that are not its ``positives`` (best first; ties by label index)."""
    out = np.full((mismatch.shape[0], per_doc), -1, dtype=np.int64)
    mismatch, positives = sp.csr_matrix(mismatch), sp.csr_matrix(positives)
    for i in np.flatnonzero(np.diff(mismatch.indptr)):
        candidates = mismatch.indices[mismatch.indptr[i]: mismatch.indptr[i + 1]]
        own = positives.indices[positives.indptr[i]: positives.indptr[i + 1]]
        candidates = np.sort(candidates[~np.isin(candidates, own)])
        if not len(candidates):
            continue
        scores = label_emb[candidates] @ doc_emb[i]
        order = np.argsort(-scores, kind="stable")[:per_doc]
        out[i, : len(order)] = candidates[order]
    return out
