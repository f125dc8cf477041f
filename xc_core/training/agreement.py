"""Gradient agreement of each anchor set with the task (the graph-worth check's part (b)).

At the starting encoder, for each regularizer term of ``ramen``'s objective (one per anchor set and side), the
cosine between its gradient on *training* batches — the direction training would move the encoder for that set —
and the task loss's gradient on *validation* batches — the direction that lowers the loss on queries training never
saw. A positive cosine says one small step along the regularizer also lowers the validation task loss (to first
order); a negative one says the set pulls against the task. The training task loss's own agreement with the
validation task gradient is reported beside it as the scale: what the labels themselves achieve.

Batches are the trainer's own (``Trainer.builder`` for training rows; the validation rows' held-out positives for
the validation side), seeded, in eval mode (no dropout), so the check is deterministic. Two estimates per term: the
cosine of the gradients summed over all batches (the point estimate), and the mean of the per-batch cosines with
its 95% t-interval (how sure the sign is: the verdict "pulls against the task" needs the whole interval below 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from xc_core import seeds
from xc_core.seeds import Stream
from xc_core.training.batches import Batch, BatchBuilder

if TYPE_CHECKING:
    from xc_core.training.trainer import Trainer


def _flat_grad(loss: Any, params: list[Any]) -> Any:
    import torch

    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    # a sparse gradient (the tower's bag of token embeddings) is densified: the cosine compares whole vectors
    return torch.cat([(g.to_dense() if g is not None and g.is_sparse else g if g is not None
                       else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params, strict=True)])


def _cosine(a: Any, b: Any) -> float:
    """cos(a, b) of two flat gradients as a dot over the product of the norms (floored at 1e-8, as torch's
    ``cosine_similarity``), which on 22M-entry vectors is several times cheaper than ``cosine_similarity``."""
    import torch

    return float(torch.dot(a, b) / torch.clamp(torch.linalg.vector_norm(a) * torch.linalg.vector_norm(b), min=1e-8))


def _interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval of per-batch values."""
    from scipy import stats

    x = np.asarray(values, np.float64)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return mean, mean - half, mean + half


def _validation_builder(trainer: Trainer) -> tuple[BatchBuilder, np.ndarray]:
    """A batch builder over the validation rows with their held-out positives (no anchors), and those rows."""
    truth = sp.csr_matrix(trainer.split.y_val)
    rows = trainer.val_idx[np.diff(truth.indptr)[trainer.val_idx] > 0]
    return BatchBuilder.from_anchor_sets(trainer.data.train_texts, trainer.data.label_texts, truth, {}, [], []), rows


def _separate_losses(trainer: Trainer, batch: Batch) -> dict[str, Any]:
    """``trainer.losses(batch)`` with each group of texts (documents, labels, hard negatives, each side's anchors)
    through an encoder pass of its own. The terms are the same functions of the same embeddings (up to float
    rounding: a pass pads to its own longest text), but a term's gradient then runs back through the passes it reads
    only — a label regularizer's through the labels and its anchors — not through the whole batch, as one shared
    pass makes every term's do."""
    import torch

    forward = trainer.encoder.forward
    hard = trainer.hard_texts(batch)
    sides = trainer.anchor_text_groups(batch)
    if not sides:
        anchors = None
    elif trainer.cfg.anchor_grad:
        anchors = torch.cat([forward(texts) for texts in sides])
    else:
        anchors = trainer.encode_fixed([t for texts in sides for t in texts])
    return trainer.objective_terms(batch, forward(batch.doc_texts), forward(batch.label_texts),
                                   forward(hard) if hard else None, anchors,
                                   sampled=forward(batch.sampled_texts) if batch.sampled_texts else None)


def gradient_agreement(trainer: Trainer, batches: int, seed: int) -> dict[str, dict[str, float]]:
    """{term: {cosine, mean, low, high, task_cosine}} for every regularizer term ("doc/<set>", "label/<set>") of
    ``trainer`` (built with ``regularize=True``), at its current (starting) weights."""
    import torch

    val_builder, val_rows = _validation_builder(trainer)
    terms = [t for t in trainer.terms if t != "task"]
    if not terms or not len(val_rows) or not len(trainer.train_idx):
        return {}
    params = trainer.encoder.trainable_parameters()
    size = trainer.cfg.batch_size
    rng = seeds.rng(seed, Stream.GRAPH_WORTH)
    sums: dict[str, Any] = {}
    per_batch: dict[str, list[float]] = {t: [] for t in [*terms, "task"]}
    trainer.encoder.model.eval()
    try:
        for i in range(batches):
            train_ids = np.sort(rng.choice(trainer.train_idx, min(size, len(trainer.train_idx)), replace=False))
            val_ids = np.sort(rng.choice(val_rows, min(size, len(val_rows)), replace=False))
            val_batch = val_builder.build(val_ids, seeds.rng(seed, Stream.GRAPH_WORTH, i))
            docs = trainer.encoder.forward(val_batch.doc_texts)
            labels = trainer.encoder.forward(val_batch.label_texts)
            g_val = _flat_grad(trainer.task_loss(docs, labels, torch.from_numpy(val_batch.positive_mask)), params)
            losses = _separate_losses(trainer, trainer.builder.build(train_ids, seeds.rng(seed, Stream.GRAPH_WORTH, i)))
            for term in ["task", *terms]:
                if term not in losses:
                    continue
                g = _flat_grad(losses[term], params)
                per_batch[term].append(_cosine(g, g_val))
                sums[term] = g if term not in sums else sums[term] + g
            sums["validation"] = g_val if "validation" not in sums else sums["validation"] + g_val
    finally:
        trainer.encoder.model.train()

    def cosine(term: str) -> float:
        return _cosine(sums[term], sums["validation"])

    task_cosine = cosine("task") if "task" in sums else float("nan")
    out = {}
    for term in terms:
        if term not in sums:
            continue
        mean, low, high = _interval(per_batch[term])
        out[term] = {"cosine": round(cosine(term), 4), "mean": round(mean, 4), "low": round(low, 4),
                     "high": round(high, 4), "task_cosine": round(task_cosine, 4), "batches": len(per_batch[term])}
    return out


def per_set(agreement: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """One agreement per anchor set: its least agreeing side (a set regularizing both sides pulls against the task
    if either side does)."""
    out: dict[str, dict[str, Any]] = {}
    for term, row in agreement.items():
        side, name = term.split("/", 1)
        if name not in out or row["high"] < out[name]["high"]:
            out[name] = {**row, "side": side}
    return out
