"""Anchor pruning (RAMEN App. A/B): drop anchors the current encoder finds unrelated to their node.

An edge (node, anchor) is kept when cos(node − c, anchor − c) > threshold (RAMEN: threshold 0, c = 0).
Training calls this every few epochs with its current encoder, so noisy graph edges stop pulling
embeddings apart.

Centring (``center``): mean-pooled sentence embeddings are anisotropic, they share a large common
component, so almost every pair has a positive raw cosine and RAMEN's rule keeps everything. Subtracting
the mean embedding (:func:`embedding_center`) before the cosine makes 0 mean "less related than an average
pair". :func:`prune_pass_rates` measures how well a rule separates true (document, label) pairs from
random ones, which is the figure to log when choosing ``threshold`` and ``center``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset

Embed = Callable[[list[str]], np.ndarray]

CHUNK = 65_536  # edges whose embeddings are gathered at once: bounds memory to CHUNK × dim per side


@dataclass(frozen=True)
class PruneCounts:
    doc_kept: int
    doc_dropped: int
    label_kept: int
    label_dropped: int

    def as_dict(self) -> dict[str, int]:
        return {"doc_kept": self.doc_kept, "doc_dropped": self.doc_dropped,
                "label_kept": self.label_kept, "label_dropped": self.label_dropped}


def _row_cosine(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Cosine of paired rows (inputs need not be normalised)."""
    num = np.einsum("ij,ij->i", left, right)
    den = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    return num / np.maximum(den, 1e-12)


def pair_cosine(left_emb: np.ndarray, right_emb: np.ndarray, left: np.ndarray, right: np.ndarray,
                center: np.ndarray | None = None) -> np.ndarray:
    """cos(left_emb[left[i]] − center, right_emb[right[i]] − center) for every i, gathered in chunks.

    ``center=None`` is the raw cosine. The centre is cast to the embeddings' dtype, so float32 embeddings
    stay float32."""
    out = np.empty(len(left), dtype=np.result_type(left_emb.dtype, right_emb.dtype, np.float32))
    shift = None if center is None else np.asarray(center).astype(out.dtype, copy=False)
    for lo in range(0, len(left), CHUNK):
        a, b = left_emb[left[lo: lo + CHUNK]], right_emb[right[lo: lo + CHUNK]]
        if shift is not None:
            a, b = a - shift, b - shift
        out[lo: lo + CHUNK] = _row_cosine(a, b)
    return out


def embedding_center(*arrays: np.ndarray) -> np.ndarray:
    """Mean of every non-zero row of the given embedding matrices (rows pooled, not matrices averaged).

    All-zero rows are skipped: callers that encode only the rows they need (the trainer) pass zero rows for
    the others. With no non-zero row at all the centre is the zero vector (centring changes nothing)."""
    if not arrays:
        raise ValueError("embedding_center needs at least one embedding matrix")
    total = np.zeros(arrays[0].shape[1], dtype=np.float64)
    rows = 0
    for emb in arrays:
        used = np.any(emb != 0, axis=1)
        total += emb[used].sum(axis=0, dtype=np.float64)
        rows += int(used.sum())
    return total / max(rows, 1)


def prune_anchor_set(anchors: AnchorSet, doc_emb: np.ndarray, label_emb: np.ndarray, anchor_emb: np.ndarray,
                     threshold: float = 0.0, center: np.ndarray | None = None) -> tuple[AnchorSet, PruneCounts]:
    """Keep edges with cos(node − center, anchor − center) > threshold; embeddings are indexed like the
    edge lists. ``center=None`` is RAMEN's raw cosine; pass :func:`embedding_center` of the embeddings to
    correct for anisotropy."""
    keep_doc = pair_cosine(doc_emb, anchor_emb, anchors.doc_edges[:, 0], anchors.doc_edges[:, 1], center) > threshold
    keep_lbl = (pair_cosine(label_emb, anchor_emb, anchors.label_edges[:, 0], anchors.label_edges[:, 1], center)
                > threshold)
    pruned = AnchorSet(anchors.name, anchors.texts, anchors.doc_edges[keep_doc], anchors.label_edges[keep_lbl],
                       doc_proxy=np.asarray(anchors.doc_proxy)[keep_doc],
                       label_proxy=np.asarray(anchors.label_proxy)[keep_lbl])
    counts = PruneCounts(int(keep_doc.sum()), int((~keep_doc).sum()), int(keep_lbl.sum()), int((~keep_lbl).sum()))
    return pruned, counts


def prune_pass_rates(doc_emb: np.ndarray, label_emb: np.ndarray, y: sp.csr_matrix, threshold: float = 0.0,
                     center: np.ndarray | None = None, rng: np.random.Generator | None = None, *,
                     doc_rows: np.ndarray, label_rows: np.ndarray | None = None,
                     n_random: int = 10_000) -> dict[str, float]:
    """How the pruning rule treats true pairs against random ones: the share of (document, true label)
    pairs with cos(doc − center, label − center) > threshold, and the same share over random pairs.

    A useful rule keeps far more positives than random pairs; with anisotropic embeddings and no centre
    both shares are ≈ 1. ``y`` is the docs × labels CSR ground truth. Only the documents ``doc_rows``
    and the labels ``label_rows`` (None: every label) take part: the caller names the rows it encoded,
    since a zero row stands for "not encoded" (the trainer encodes only the nodes that have anchors).
    Positives: every such pair of ``y``. Random: ``n_random`` (document, label) pairs drawn uniformly
    from those rows with ``rng`` (default seed 0); a random pair may, rarely, be a positive.

    Returns ``positive_kept_share``, ``random_kept_share``, ``positive_pairs``, ``random_pairs``
    (a share is NaN when it has no pair).
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    doc_rows = np.unique(np.asarray(doc_rows, dtype=np.int64))
    label_rows = (np.arange(label_emb.shape[0]) if label_rows is None
                  else np.unique(np.asarray(label_rows, dtype=np.int64)))
    truth = sp.csr_matrix(y)[doc_rows].tocoo()
    label_used = np.zeros(label_emb.shape[0], bool)
    label_used[label_rows] = True
    keep = label_used[truth.col]
    pos_docs, pos_labels = doc_rows[truth.row[keep]], truth.col[keep].astype(np.int64)
    n_rand = n_random if len(doc_rows) and len(label_rows) else 0
    rand_docs, rand_labels = rng.choice(doc_rows, n_rand), rng.choice(label_rows, n_rand)

    def share(docs: np.ndarray, labels: np.ndarray) -> float:
        if not len(docs):
            return float("nan")
        return float(np.mean(pair_cosine(doc_emb, label_emb, docs, labels, center) > threshold))

    return {"positive_kept_share": share(pos_docs, pos_labels), "random_kept_share": share(rand_docs, rand_labels),
            "positive_pairs": int(len(pos_docs)), "random_pairs": int(n_rand)}


def prune_dataset_anchors(dataset: XCDataset, embed: Embed, threshold: float = 0.0,
                          doc_emb: np.ndarray | None = None, label_emb: np.ndarray | None = None,
                          centered: bool = False) -> tuple[dict[str, AnchorSet], dict[str, PruneCounts]]:
    """Prune every anchor set with one embedding function (any encoder: ``texts -> (n, d)``); ``centered``
    centres each set's cosines on the mean of its document, label and anchor embeddings."""
    doc_emb = embed(dataset.train_texts) if doc_emb is None else doc_emb
    label_emb = embed(dataset.label_texts) if label_emb is None else label_emb
    pruned: dict[str, AnchorSet] = {}
    counts: dict[str, PruneCounts] = {}
    for name, anchors in dataset.anchor_sets.items():
        anchor_emb = embed(anchors.texts)
        shift = embedding_center(doc_emb, label_emb, anchor_emb) if centered else None
        pruned[name], counts[name] = prune_anchor_set(anchors, doc_emb, label_emb, anchor_emb, threshold, shift)
    return pruned, counts
