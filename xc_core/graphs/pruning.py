"""Anchor pruning (RAMEN App. A): drop anchors the current encoder finds unrelated to their node.

An edge (node, anchor) is kept when cos(node, anchor) > threshold (RAMEN: 0). Training calls this
every few epochs with its current encoder, so noisy graph edges stop pulling embeddings apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from xc_core.datasets.container import AnchorSet, XCDataset

Embed = Callable[[list[str]], np.ndarray]


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


def prune_anchor_set(anchors: AnchorSet, doc_emb: np.ndarray, label_emb: np.ndarray, anchor_emb: np.ndarray,
                     threshold: float = 0.0) -> tuple[AnchorSet, PruneCounts]:
    """Keep edges with cosine > threshold; embeddings are indexed like the edge lists."""
    keep_doc = (_row_cosine(doc_emb[anchors.doc_edges[:, 0]], anchor_emb[anchors.doc_edges[:, 1]]) > threshold
                if len(anchors.doc_edges) else np.zeros(0, bool))
    keep_lbl = (_row_cosine(label_emb[anchors.label_edges[:, 0]], anchor_emb[anchors.label_edges[:, 1]]) > threshold
                if len(anchors.label_edges) else np.zeros(0, bool))
    pruned = AnchorSet(anchors.name, anchors.texts, anchors.doc_edges[keep_doc], anchors.label_edges[keep_lbl],
                       doc_proxy=np.asarray(anchors.doc_proxy)[keep_doc],
                       label_proxy=np.asarray(anchors.label_proxy)[keep_lbl])
    counts = PruneCounts(int(keep_doc.sum()), int((~keep_doc).sum()), int(keep_lbl.sum()), int((~keep_lbl).sum()))
    return pruned, counts


def prune_dataset_anchors(dataset: XCDataset, embed: Embed, threshold: float = 0.0,
                          doc_emb: np.ndarray | None = None, label_emb: np.ndarray | None = None,
                          ) -> tuple[dict[str, AnchorSet], dict[str, PruneCounts]]:
    """Prune every anchor set with one embedding function (any encoder: ``texts -> (n, d)``)."""
    doc_emb = embed(dataset.train_texts) if doc_emb is None else doc_emb
    label_emb = embed(dataset.label_texts) if label_emb is None else label_emb
    pruned: dict[str, AnchorSet] = {}
    counts: dict[str, PruneCounts] = {}
    for name, anchors in dataset.anchor_sets.items():
        pruned[name], counts[name] = prune_anchor_set(anchors, doc_emb, label_emb, embed(anchors.texts), threshold)
    return pruned, counts
