"""TextGNN's retrieval training: the shared text encoder and both towers trained end to end with the in-batch
softmax of the encoder methods (``xc_core.training.losses``), on (train query, positive label) pairs batched by
the same :class:`~xc_core.training.batches.BatchBuilder` and seeded streams (``xc_core.seeds``) as the trainer.

Each step encodes every distinct text of the batch once — centres and up to ``k`` neighbours per side — so the
encoder receives gradients through the GAT as well as the skip path. A label's neighbours are filtered per pair
so that the pair's own query is never among them (:func:`~xc_core.methods.textgnn.neighbours.pick`). CUDA with
AMP (and a gradient scaler) when present, CPU otherwise.

Checkpoint selection (:mod:`~xc_core.training.selection`, the encoder trainer's rules): the trainer's
validation documents are held out — never a training row, nor anyone's neighbour — and recall@``val_k`` of the
query tower against the label tower is measured at epoch 0 (the untrained start) and after every epoch; with
``select_best`` the best epoch's weights are restored at the end, so training is never worse than its start.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xc_core import seeds
from xc_core.datasets.container import XCDataset
from xc_core.encoders.text import TextEncoder
from xc_core.methods.textgnn.config import TextGNNConfig
from xc_core.methods.textgnn.model import TextGNNHeads, Tower
from xc_core.methods.textgnn.neighbours import Neighbours, padded, pick
from xc_core.seeds import Stream
from xc_core.training.batches import BatchBuilder
from xc_core.training.clusters import random_batches
from xc_core.training.config import TrainConfig
from xc_core.training.losses import InBatchSoftmaxLoss
from xc_core.training.selection import Selection, heldout_texts, mlflow_metrics, split


def tower_forward(encoder: TextEncoder, tower: Tower, centres: Sequence[str], rows: Sequence[Sequence[str]],
                  k: int) -> torch.Tensor:
    """Tower outputs (B, D) of ``centres`` with their neighbour ``rows`` (each distinct text encoded once)."""
    flat, present = padded(rows, k)
    unique = list(dict.fromkeys([*centres, *(t for t in flat if t)]))
    position = {t: i for i, t in enumerate(unique)}
    emb = encoder.forward(unique)
    device = emb.device
    centre = emb[torch.tensor([position[t] for t in centres], dtype=torch.long, device=device)]
    slots = torch.tensor([position.get(t, 0) for t in flat], dtype=torch.long, device=device)
    neighbours = emb[slots].view(len(centres), k, -1)
    return tower(centre, neighbours, torch.from_numpy(present).to(device))


def encode_side(encoder: TextEncoder, tower: Tower, centres: Sequence[str], rows: Sequence[Sequence[str]], k: int,
                batch_size: int = 256) -> np.ndarray:
    """Inference: tower outputs of every node, float32 unit rows."""
    encoder.model.eval()
    tower.eval()
    out = np.zeros((len(centres), encoder.dim), dtype=np.float32)
    with torch.inference_mode():
        for lo in range(0, len(centres), batch_size):
            hi = lo + batch_size
            out[lo:hi] = tower_forward(encoder, tower, centres[lo:hi], rows[lo:hi], k).float().cpu().numpy()
    return out


@dataclass
class Fit:
    history: list[dict[str, float]] = field(default_factory=list)  # epochs 0 (the untrained start) … E
    loss_before: float = float("nan")
    loss_after: float = float("nan")  # of the kept (selected) weights
    seconds: float = 0.0
    steps: int = 0
    train_documents: int = 0
    selection: dict[str, Any] = field(default_factory=dict)  # selected_epoch, val_recall@k, val_documents


def without(neighbours: Neighbours, texts: set[str]) -> Neighbours:
    """The lists with ``texts`` dropped (the held-out validation documents)."""
    if not texts:
        return neighbours
    return Neighbours([[t for t in row if t not in texts] for row in neighbours.texts], neighbours.proxy)


class Steps:
    """The batches and the loss of one run (the same batches for the loss probe before and after training), and
    the validation that selects the kept epoch."""

    def __init__(self, dataset: XCDataset, encoder: TextEncoder, heads: TextGNNHeads, docs: Neighbours,
                 labels: Neighbours, cfg: TrainConfig, tg: TextGNNConfig) -> None:
        self.data, self.encoder, self.heads, self.cfg, self.tg = dataset, encoder, heads, cfg, tg
        found = split(dataset, cfg)  # the encoder methods' split: validation is never trained on
        self.rows = found.train_rows
        heldout = heldout_texts(dataset, found.val_rows, cfg)
        self.docs, self.labels = without(docs, heldout), without(labels, heldout)
        self.builder = BatchBuilder.from_anchor_sets(dataset.train_texts, dataset.label_texts, found.y_fit,
                                                     {}, [], [])
        self.loss = InBatchSoftmaxLoss(cfg.softmax_scale)
        self.selection = Selection.of(dataset, cfg, found)

    @property
    def modules(self) -> list[torch.nn.Module]:
        """What trains, and what the kept epoch restores: the transformer and its light tower where they train, the
        heads."""
        encoder = self.encoder
        parts = (encoder.model, encoder.tower)
        return [*(m for m in parts if m is not None and any(p.requires_grad for p in m.parameters())), self.heads]

    def batches(self, epoch: int) -> list[np.ndarray]:
        rng = seeds.rng(self.cfg.seed, Stream.EPOCH_BATCHES, epoch)
        return random_batches(len(self.rows), self.cfg.batch_size, rng)

    def value(self, epoch: int, step: int, rows: np.ndarray) -> torch.Tensor:
        batch = self.builder.build(self.rows[rows], seeds.step_rng(self.cfg.seed, epoch, step))
        k = self.tg.neighbours
        doc_rows = [self.docs.texts[i][:k] for i in batch.doc_ids]
        label_rows = [pick(self.labels.texts[j], {q}, k) for j, q in zip(batch.label_ids, batch.doc_texts, strict=True)]
        queries = tower_forward(self.encoder, self.heads.query, batch.doc_texts, doc_rows, k)
        keywords = tower_forward(self.encoder, self.heads.keyword, batch.label_texts, label_rows, k)
        return self.loss(queries.float(), keywords.float(), torch.from_numpy(batch.positive_mask))

    def probe(self) -> float:
        """Mean loss over the first ``probe_batches`` batches of epoch 0, without gradients, in eval mode."""
        self.encoder.model.eval()
        self.heads.eval()
        with torch.no_grad():
            values = [float(self.value(0, s, rows)) for s, rows in enumerate(self.batches(0)[: self.tg.probe_batches])]
        return float(np.mean(values)) if values else float("nan")

    def validate(self, epoch: int, loss: float) -> dict[str, float]:
        """The epoch's record: validation metrics of query-tower outputs (validation documents with their
        neighbours, which never hold their own labels) against label-tower outputs (no validation document among
        a label's neighbours); keeps the best epoch's weights."""
        sel, k = self.selection, self.tg.neighbours
        queries = encode_side(self.encoder, self.heads.query, [self.data.train_texts[i] for i in sel.rows],
                              [self.docs.texts[i][:k] for i in sel.rows], k)
        labels = encode_side(self.encoder, self.heads.keyword, [self.data.label_texts[j] for j in sel.space],
                             [self.labels.texts[j][:k] for j in sel.space], k)
        return sel.record(epoch, sel.metrics(queries, labels), self.modules, loss=loss)


def train_textgnn(dataset: XCDataset, encoder: TextEncoder, heads: TextGNNHeads, docs: Neighbours,
                  labels: Neighbours, cfg: TrainConfig, tg: TextGNNConfig, progress: bool = False,
                  log_metrics: Any = None) -> Fit:
    """Train encoder and towers in place for ``cfg.epochs``, validating at epoch 0 and after every epoch; with
    ``select_best`` the best epoch's weights (the untrained start included) are restored at the end."""
    torch.manual_seed(cfg.seed)
    heads.to(encoder.device)
    steps = Steps(dataset, encoder, heads, docs, labels, cfg, tg)
    fit = Fit(loss_before=steps.probe(), train_documents=len(steps.rows))
    log = log_metrics or (lambda metrics, step: None)
    _log_epoch(log, steps.validate(0, float("nan")))
    optimizer, scaler = _optimizer(encoder, heads, cfg, tg)
    started = time.perf_counter()
    for epoch in range(cfg.epochs):
        loss = _epoch(steps, optimizer, scaler, epoch, fit, progress)
        _log_epoch(log, steps.validate(epoch + 1, loss))
    fit.seconds = round(time.perf_counter() - started, 3)
    steps.selection.restore(steps.modules)
    fit.history, fit.selection = steps.selection.history, steps.selection.summary()
    log(mlflow_metrics({k: v for k, v in fit.selection.items() if k not in ("val_documents", "fallback_test")}),
        cfg.epochs)
    fit.loss_after = steps.probe()
    return fit


def _log_epoch(log: Any, row: dict[str, float]) -> None:
    """An epoch's loss and ``val/…`` metrics at step = epoch."""
    metrics = {f"val/{k[4:]}" if k.startswith("val_") else k: v for k, v in row.items() if k != "epoch"}
    log(mlflow_metrics(metrics), int(row["epoch"]))


def _optimizer(encoder: TextEncoder, heads: TextGNNHeads, cfg: TrainConfig, tg: TextGNNConfig) -> tuple[Any, Any]:
    """(optimizers, scaler): AdamW over the encoder's dense weights (the transformer's, or only its light tower's
    when frozen, at the tower's rate) and the heads; lazy Adam over the light tower's bags of embeddings."""
    from xc_core.training.optim import Group

    lr = cfg.tower_lr if cfg.tower else cfg.lr
    groups = [{"params": encoder.dense_parameters(), "lr": lr}, {"params": list(heads.parameters()), "lr": tg.lr_heads}]
    groups = [group for group in groups if group["params"]]  # a fixed encoder (``encoder_trains=False``) has none
    optimizers: list[Any] = [torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)]
    if encoder.sparse_parameters():
        optimizers.append(torch.optim.SparseAdam(encoder.sparse_parameters(), lr=lr))
    return Group(optimizers), torch.amp.GradScaler("cuda", enabled=encoder.device.type == "cuda")


def _epoch(steps: Steps, optimizer: Any, scaler: Any, epoch: int, fit: Fit, progress: bool) -> float:
    """One pass over the training rows (encoder and towers updated); returns the mean training loss."""
    from xc_core.progress import bar

    cfg = steps.cfg
    # a sparse gradient (the light tower's bags) is left unclipped: lazy Adam scales each row by its own history
    dense = [p for group in optimizer.members[0].param_groups for p in group["params"]]
    for module in steps.modules:
        module.train()
    total, count = 0.0, 0
    for step, rows in enumerate(bar(steps.batches(epoch), desc=f"TextGNN epoch {epoch + 1}/{cfg.epochs}",
                                    unit="batch", enabled=progress)):
        torch.manual_seed(cfg.seed * 1_000_003 + epoch * 10_007 + step)  # dropout, as the trainer seeds it
        loss = steps.value(epoch, step, rows)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        for member in optimizer.members:
            scaler.unscale_(member)
        torch.nn.utils.clip_grad_norm_(dense, 1.0)
        for member in optimizer.members:
            scaler.step(member)
        scaler.update()
        total += float(loss.detach()) * len(rows)
        count += len(rows)
        fit.steps += 1
    return total / max(count, 1)
