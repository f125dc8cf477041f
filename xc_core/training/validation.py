"""The validation rows every trainer and selection shares: the seeded split of the training documents, the label
space they are scored in, exact top-k search and recall — below the trainer and the checkpoint selection, which
both use them."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core import seeds
from xc_core.seeds import Stream
from xc_core.training.config import TrainConfig


def split_validation(n: int, cfg: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (train, validation) split of the train documents; validation is held out of training."""
    rng = seeds.rng(cfg.seed, Stream.VALIDATION_SPLIT)
    order = rng.permutation(n)
    floor = min(cfg.val_min, int(n * cfg.val_min_share))  # sized for power where the data allows (issue #39)
    n_val = int(min(cfg.val_max, max(10, round(n * cfg.val_fraction), floor)))
    if cfg.val_from_unused and cfg.max_train_docs is not None:
        # documents the seeded subsample would never train on validate instead, up to val_max (issue #32)
        n_val = int(max(n_val, min(cfg.val_max, n - cfg.max_train_docs)))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def validation_label_space(n_labels: int, truth: Any, val_idx: np.ndarray, cfg: TrainConfig) -> np.ndarray:
    """Every label, or — past ``val_max_labels`` — the validation positives plus a fixed seeded sample of the
    others (the same for every epoch and method, so curves and methods stay comparable)."""
    if cfg.val_max_labels is None or n_labels <= cfg.val_max_labels:
        return np.arange(n_labels)
    positives = np.unique(sp.csr_matrix(truth)[val_idx].indices)
    others = np.setdiff1d(np.arange(n_labels), positives)
    take = max(0, cfg.val_max_labels - len(positives))
    sample = seeds.rng(cfg.seed, Stream.VALIDATION_LABELS).choice(others, min(take, len(others)), replace=False)
    return np.sort(np.concatenate([positives, sample]))


def top_k_exact(doc_emb: np.ndarray, label_emb: np.ndarray, k: int,
                exclude: np.ndarray | None = None) -> np.ndarray:
    """(n_docs, min(k, n_labels)) indices of each document's best-scored labels, best first (exact search);
    ``exclude`` (pairs of document row, label column) are never returned."""
    import torch

    labels = torch.from_numpy(label_emb)
    k = min(k, labels.shape[0])
    exclude = np.empty((0, 2), np.int64) if exclude is None else np.asarray(exclude, np.int64).reshape(-1, 2)
    out = []
    for start in range(0, len(doc_emb), 1024):
        scores = torch.from_numpy(doc_emb[start: start + 1024]) @ labels.T
        mine = exclude[(exclude[:, 0] >= start) & (exclude[:, 0] < start + len(scores))]
        scores[torch.from_numpy(mine[:, 0] - start), torch.from_numpy(mine[:, 1])] = float("-inf")
        out.append(torch.topk(scores, k, dim=1).indices.numpy())
    return np.concatenate(out) if out else np.zeros((0, k), np.int64)


def recall_at_k(top: np.ndarray, y: sp.csr_matrix) -> float:
    """Mean over documents of |top ∩ positives| / |positives| (rows without positives → 0)."""
    from xc_core.evaluation.metrics import recall_per_row

    return float(recall_per_row(y, top, top.shape[1]).mean()) if len(top) else 0.0
