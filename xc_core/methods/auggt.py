"""``auggt`` (RAMEN's AugGT baseline): text-only training on ground truth augmented by label propagation
through shared anchors — a document also gets the labels most often reached via document → anchor →
other document → label, so graph information enters as extra (noisy) positives instead of a regularizer."""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.methods.base import register
from xc_core.methods.encoder import EncoderMethod
from xc_core.training.config import TrainConfig

#: propagated labels added per document
EXTRA_LABELS = 2


def propagate_labels(dataset: XCDataset, extra: int = EXTRA_LABELS) -> sp.csr_matrix:
    """y_train plus, per document, its ``extra`` highest-scoring labels of A·Aᵀ·Y (ties: lower label id)."""
    y = sp.csr_matrix(dataset.y_train)
    n = len(dataset.train_texts)
    reach = sp.csr_matrix((n, dataset.n_labels), dtype=np.float32)
    for anchors in dataset.anchor_sets.values():
        a = anchors.doc_matrix(n)
        if a.nnz:
            reach = reach + a @ (a.T @ y)
    reach = sp.csr_matrix(reach - reach.multiply(y > 0))  # only new labels
    reach.eliminate_zeros()
    rows, cols = [], []
    for i in range(n):  # per-row top-`extra` over a sparse row: small and bounded
        lo, hi = reach.indptr[i], reach.indptr[i + 1]
        if hi > lo:
            order = np.lexsort((reach.indices[lo:hi], -reach.data[lo:hi]))[:extra]
            rows += [i] * len(order)
            cols += reach.indices[lo:hi][order].tolist()
    added = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=y.shape)
    out = sp.csr_matrix(y + added)
    out.data[:] = 1.0
    return out


def _augment(dataset: XCDataset, cfg: TrainConfig) -> XCDataset:
    return dataclasses.replace(dataset, y_train=propagate_labels(dataset), meta=dict(dataset.meta))


AUGGT = register(EncoderMethod("auggt", "text-only on label-propagated ground truth (AugGT)",
                               overrides={"regularize": False, "prune": False, "bandit": False}, transform=_augment,
                               needs_anchor_sets=True))
