"""Per-label vectors W trained over cached embeddings with the encoder frozen (RAMEN (NGAME)'s classifier step).

W starts as the labels' text embeddings, so an untrained W *is* the encoder; training moves each label's
vector toward the queries that clicked it. The loss is a sampled softmax: each pair's label against labels
drawn uniformly once per batch (optionally the batch's other positives too) plus hard negatives from the
encoder's shortlist of its document (NGAME's M4: the labels the encoder confuses). One step touches the
batch's labels, the shared sample and the hard negatives, never all of W: with ``SparseAdam`` the cost of an
epoch follows the number of training pairs and the sample size, not the number of labels.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core import seeds
from xc_core.classifier.config import ClassifierConfig
from xc_core.seeds import Stream


@dataclass
class ClassifierFit:
    weights: np.ndarray  # (n_labels, dim) float32, unit rows
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    pairs: int = 0
    labels_trained: int = 0  # labels with at least one training positive (the others keep their text vector)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32)


def encoder_shortlist(doc_vecs: np.ndarray, label_vecs: np.ndarray, k: int, positives: sp.csr_matrix) -> np.ndarray:
    """(n_docs, k) each document's top-k labels under the encoder with its own positives removed (−1 pads)."""
    from xc_core.training.validation import top_k_exact

    # room for the positives that get dropped (capped: a document with hundreds of positives gets a shorter list)
    extra = min(int(np.diff(positives.indptr).max(initial=0)), 3 * k)
    top = top_k_exact(doc_vecs, label_vecs, k + extra)
    rows = np.repeat(np.arange(len(top)), top.shape[1])
    is_positive = np.asarray(positives[rows, top.ravel()]).reshape(top.shape) > 0
    out = np.full((len(top), k), -1, dtype=np.int64)
    for i, (labels, pos) in enumerate(zip(top, is_positive, strict=True)):
        kept = labels[~pos][:k]
        out[i, : len(kept)] = kept
    return out


def _sample_hard(shortlist: np.ndarray, docs: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` shortlist entries per document, uniformly without regard to rank (−1 where the list is short)."""
    if n == 0:
        return np.zeros((len(docs), 0), dtype=np.int64)
    cols = rng.integers(0, shortlist.shape[1], size=(len(docs), n))
    return shortlist[docs[:, None], cols]


def _batch_loss(table: Any, x: Any, labels: np.ndarray, hard: np.ndarray, y_docs: sp.csr_matrix,
                scale: float, shared: np.ndarray, in_batch: bool = True) -> Any:
    """Softmax cross-entropy of each pair's label against the shared random labels, its hard negatives and
    (``in_batch``) the batch's other labels; a positive of the row's document is masked, never a negative."""
    import torch
    import torch.nn.functional as F  # torch's convention

    unique, target = np.unique(labels, return_inverse=True)
    extra = np.setdiff1d(shared, unique, assume_unique=False)
    target_count = len(unique)
    unique = np.concatenate([unique, extra])
    w_batch = F.normalize(table(torch.from_numpy(unique)), dim=1)
    logits = scale * x @ w_batch.T
    also_positive = torch.from_numpy(y_docs[:, unique].toarray() > 0)
    if not in_batch:  # a row sees only its own batch label: the others are not its negatives
        also_positive[:, :target_count] = True
    also_positive[torch.arange(len(labels)), torch.from_numpy(target)] = False
    logits = logits.masked_fill(also_positive, float("-inf"))
    if hard.shape[1]:
        w_hard = F.normalize(table(torch.from_numpy(np.maximum(hard, 0))), dim=2)
        hard_logits = scale * torch.einsum("bd,bhd->bh", x, w_hard)
        logits = torch.cat([logits, hard_logits.masked_fill(torch.from_numpy(hard < 0), float("-inf"))], dim=1)
    return F.cross_entropy(logits, torch.from_numpy(target))


def _hold(table: Any, init: Any, touched: np.ndarray, untrained: np.ndarray) -> None:
    """Put labels without a training positive back on their text vector after a step that pushed them as
    negatives: they stay as the encoder has them, so W must outscore them as they will be at search time."""
    import torch

    touched = np.unique(touched[touched >= 0])
    frozen = torch.from_numpy(touched[untrained[touched]])
    if len(frozen):
        with torch.no_grad():
            table.weight[frozen] = init[frozen]


def train_classifier(label_vecs: np.ndarray, doc_vecs: np.ndarray, y: sp.csr_matrix, cfg: ClassifierConfig,
                     progress: bool = False) -> ClassifierFit:
    """Train W on every (document, label) pair of ``y`` (rows = ``doc_vecs``).

    Labels without a positive in ``y`` keep their text embedding: they stay retrievable by text, exactly as
    under the encoder alone.

    Args:
        label_vecs: the labels' text vectors (W's start), (labels × dim).
        doc_vecs: the training documents' vectors, (documents × dim).
        y: documents × labels positives.
        cfg: epochs, learning rate, negatives and seed.
        progress: show a progress bar.

    Returns:
        W with unit rows, the epochs' losses, the seconds, the pairs and the labels trained.
    """
    import torch

    from xc_core.progress import bar

    started = time.perf_counter()
    y = sp.csr_matrix(y)
    torch.manual_seed(cfg.seed)
    rng = seeds.rng(cfg.seed, Stream.CLASSIFIER_NEGATIVES)
    init = torch.from_numpy(unit_rows(label_vecs))
    table = torch.nn.Embedding.from_pretrained(init.clone(), freeze=False, sparse=True)
    untrained = np.diff(y.tocsc().indptr) == 0
    optimizer = torch.optim.SparseAdam(table.parameters(), lr=cfg.lr)
    coo = y.tocoo()
    pairs = np.stack([coo.row, coo.col], axis=1).astype(np.int64)
    shortlist = encoder_shortlist(doc_vecs, label_vecs, cfg.shortlist_k, y) if cfg.hard_negatives else None
    n_labels = len(label_vecs)
    x_all = torch.from_numpy(np.ascontiguousarray(doc_vecs, dtype=np.float32))
    history: list[dict[str, float]] = []
    for epoch in range(cfg.epochs):
        order = rng.permutation(len(pairs))
        losses = []
        batches = range(0, len(order), cfg.batch_size)
        for start in bar(batches, desc=f"classifier epoch {epoch + 1}/{cfg.epochs}", enabled=progress):
            batch = pairs[order[start: start + cfg.batch_size]]
            docs, labels = batch[:, 0], batch[:, 1]
            hard = (_sample_hard(shortlist, docs, cfg.hard_negatives, rng) if shortlist is not None
                    else np.zeros((len(docs), 0), np.int64))
            shared = rng.choice(n_labels, min(cfg.random_negatives, n_labels), replace=False)
            loss = _batch_loss(table, x_all[docs], labels, hard, y[docs], cfg.scale, shared, cfg.in_batch_negatives)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            _hold(table, init, np.concatenate([shared, hard.ravel()]), untrained)
            losses.append(float(loss.detach()))
        history.append({"epoch": epoch + 1, "loss": float(np.mean(losses)) if losses else float("nan")})
    weights = unit_rows(table.weight.detach().numpy())
    return ClassifierFit(weights, history, round(time.perf_counter() - started, 2), len(pairs),
                         int((~untrained).sum()))
