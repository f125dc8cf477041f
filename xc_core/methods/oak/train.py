"""OAK's training: the encoder and the GCN layer together, on train documents with their *true* graph neighbours
(``doc_edges``, as OAK trains), so the oracle linker sees at test what training saw and the predicted linker
shows what retrieving the neighbours costs. Labels stay plain encoder embeddings (only queries are convolved,
as in OAK), so the label index is built the way the dual encoders build theirs.

One step, B documents: each document's random positive label, up to ``neighbours`` of its true neighbours and
one encoder pass over all those texts; the task term is the in-batch softmax of h(doc) against the batch's
labels, the linker term the in-batch softmax of e(doc) against each row's first sampled neighbour (a row's
other neighbours masked), so that retrieving nodes by text — the predicted linker — is trained too.
Validation documents (the trainer's seeded split) and every test document and ``test_edges`` stay out, and no
document has a node reading like itself, one of its positive labels or a validation document as a neighbour.

Checkpoint selection (:mod:`~xc_core.training.selection`, the encoder trainer's rules): recall@``val_k`` of
the validation documents' GCN representation (their training-time neighbours) against the label embeddings at
epoch 0 — the untrained start — and after every epoch; with ``select_best`` the best epoch's weights are restored.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xc_core import seeds
from xc_core.datasets.container import XCDataset
from xc_core.encoders.text import EncoderConfig, TextEncoder
from xc_core.methods.oak.config import OakConfig
from xc_core.methods.oak.graph import NodeTable, first_neighbours, sample_neighbours, train_neighbours
from xc_core.methods.oak.inference import OakModel, convolve
from xc_core.methods.oak.model import GraphConvolution
from xc_core.seeds import Stream
from xc_core.training.batches import BatchBuilder, same_text
from xc_core.training.config import TrainConfig
from xc_core.training.losses import InBatchSoftmaxLoss, in_batch_softmax
from xc_core.training.selection import Selection, heldout_texts, split
from xc_core.training.validation import ValidationSplit

PROBE = 61  # seeds.rng stream tag of the fixed batches the loss is probed on before and after training


@dataclass
class OakTraining:
    encoder_dir: Path
    model: OakModel
    history: list[dict[str, float]] = field(default_factory=list)
    loss_before: float = float("nan")
    loss_after: float = float("nan")
    steps: int = 0
    seconds: float = 0.0
    train_documents: int = 0
    selection: dict[str, Any] = field(default_factory=dict)  # selected_epoch, val_recall@k, val_documents
    encoder_parameters: int = 0  # what a dual encoder of the same encoder has


@dataclass
class StepParts:
    """What one step needs besides the data: the encoder, the layer, the losses and the adjacency."""

    encoder: TextEncoder
    gcn: GraphConvolution
    builder: BatchBuilder
    adjacency: sp.csr_matrix
    nodes: NodeTable
    cfg: OakConfig
    task: InBatchSoftmaxLoss
    scale: float

    def losses(self, rows: np.ndarray, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        """The task and linker terms of one batch of train documents, from one encoder pass."""
        batch = self.builder.build(rows, rng)
        neighbours = sample_neighbours(self.adjacency, rows, self.cfg.neighbours, rng)
        used, local = np.unique(neighbours[neighbours >= 0], return_inverse=True)
        node_texts = [self.nodes.texts[i] for i in used]
        b = len(rows)
        emb = self.encoder.forward([*batch.doc_texts, *batch.label_texts, *node_texts])
        docs, labels, node_emb = emb[:b], emb[b:2 * b], emb[2 * b:]
        slots = np.full(neighbours.shape, -1, dtype=np.int64)
        slots[neighbours >= 0] = local
        ids = torch.from_numpy(slots).to(docs.device)
        present = ids >= 0
        gathered = node_emb[ids.clamp(min=0)] if len(used) else torch.zeros(*ids.shape, docs.shape[1],
                                                                             device=docs.device)
        h = self.gcn(docs, gathered, present)
        out = {"task": self.task(h, labels, torch.from_numpy(batch.positive_mask).to(docs.device))}
        if self.cfg.linker_weight > 0 and len(used):
            first = neighbours[:, 0]
            valid = first >= 0
            mine = self.adjacency[rows][:, np.maximum(first, 0)].toarray() > 0
            mine |= same_text(batch.doc_texts, [self.nodes.texts[j] if j >= 0 else "" for j in first])
            np.fill_diagonal(mine, False)
            anchors = gathered[:, 0]
            out["linker"] = in_batch_softmax(docs @ anchors.T, torch.from_numpy(~mine).to(docs.device), self.scale,
                                             torch.from_numpy(valid).to(docs.device))
        return out

    def total(self, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        return terms["task"] + self.cfg.linker_weight * terms.get("linker", terms["task"] * 0)


def trained_modules(parts: StepParts) -> list[torch.nn.Module]:
    """What trains, and what the kept epoch restores: the transformer unless frozen, its light tower, the layer."""
    encoder = parts.encoder
    transformer = [encoder.model] if any(p.requires_grad for p in encoder.model.parameters()) else []
    return [*transformer, *([encoder.tower] if encoder.tower is not None else []), parts.gcn]


def without_leaks(adjacency: sp.csr_matrix, dataset: XCDataset, nodes: NodeTable, heldout: set[str]) -> sp.csr_matrix:
    """The document × node edges minus, per document, nodes reading like itself or one of its positive labels
    (TextGNN's rule: no document is its own label's neighbour) and held-out (validation) documents."""
    from xc_core.methods.textgnn.neighbours import positive_texts

    own, coo = positive_texts(dataset), adjacency.tocoo()
    keep = np.array([nodes.texts[c] not in own[r] and nodes.texts[c] not in heldout
                     for r, c in zip(coo.row.tolist(), coo.col.tolist(), strict=True)], dtype=bool)
    out = sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=adjacency.shape)
    out.sort_indices()
    return out


def _probe(parts: StepParts, rows: np.ndarray, cfg: TrainConfig, batches: int) -> dict[str, float]:
    """Mean task and linker loss over fixed seeded batches of training documents (no gradient)."""
    totals: dict[str, list[float]] = {}
    parts.encoder.model.eval()
    parts.gcn.eval()
    with torch.no_grad():
        for b in range(batches):
            rng = seeds.rng(cfg.seed, PROBE, b)
            pick = np.sort(rng.choice(rows, min(cfg.batch_size, len(rows)), replace=False))
            for name, value in parts.losses(pick, rng).items():
                totals.setdefault(name, []).append(float(value))
    return {name: float(np.mean(v)) for name, v in totals.items()}


def _schedule(total_steps: int, warmup_fraction: float) -> Callable[[int], float]:
    warmup = max(1, int(total_steps * warmup_fraction))  # the trainer's linear warm-up and decay

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup) * max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return lambda s: min(1.0, factor(s))


def validate(parts: StepParts, selection: Selection, dataset: XCDataset, epoch: int,
             **extra: float) -> dict[str, float]:
    """The epoch's record: validation metrics of the GCN representation of the validation documents with their
    training-time neighbours (the first ``neighbours`` true ones, no own label among them) against the label
    embeddings; keeps the best epoch's weights."""
    encoder, nodes = parts.encoder, parts.nodes
    neighbours = first_neighbours(parts.adjacency, selection.rows, parts.cfg.neighbours)
    used = np.unique(neighbours[neighbours >= 0])
    table = np.zeros((len(nodes.texts), encoder.dim), np.float32)
    if len(used):
        table[used] = encoder.encode([nodes.texts[i] for i in used])
    query = encoder.encode([dataset.train_texts[i] for i in selection.rows])
    reps = convolve(copy.deepcopy(parts.gcn).cpu(), query, table, neighbours)
    labels = encoder.encode([dataset.label_texts[j] for j in selection.space])
    return selection.record(epoch, selection.metrics(reps, labels), trained_modules(parts), **extra)


def _epoch(parts: StepParts, rows: np.ndarray, cfg: TrainConfig, epoch: int, optimizer: Any, scheduler: Any,
           progress: bool, on_metrics: Callable[[dict[str, float], int], None] | None, step: int) -> dict[str, float]:
    """One pass over the training rows; returns the epoch's mean losses, seconds and the global step reached."""
    from xc_core.progress import bar

    started = time.perf_counter()
    order = seeds.rng(cfg.seed, Stream.EPOCH_BATCHES, epoch).permutation(rows)
    for module in trained_modules(parts):
        module.train()
    # a sparse gradient (the light tower's bags) is left unclipped: lazy Adam scales each row by its own history
    params = [p for group in optimizer.members[0].param_groups for p in group["params"]]
    sums: dict[str, float] = {}
    batches = range(0, len(order), cfg.batch_size)
    for i, lo in enumerate(bar(batches, desc=f"OAK epoch {epoch + 1}/{cfg.epochs}", unit="batch",
                               enabled=progress)):
        pick = order[lo:lo + cfg.batch_size]
        if len(pick) < 2:  # an in-batch softmax needs a negative
            continue
        torch.manual_seed(cfg.seed * 1_000_003 + epoch * 10_007 + i)
        terms = parts.losses(pick, seeds.step_rng(cfg.seed, epoch, i))
        parts.total(terms).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        for name, value in terms.items():
            sums[name] = sums.get(name, 0.0) + float(value.detach()) * len(pick)
        if on_metrics is not None and step % cfg.log_every_steps == 0:
            on_metrics({f"loss/{k}": float(v.detach()) for k, v in terms.items()}, step)
    return {**{f"loss/{k}": v / max(len(rows), 1) for k, v in sums.items()},
            "seconds": round(time.perf_counter() - started, 2), "step": step}


def _optimizer(parts: StepParts, train_cfg: TrainConfig, cfg: OakConfig, steps: int) -> tuple[Any, Any]:
    """(optimizers, schedulers): AdamW over the encoder's dense weights (the transformer's, or only its light
    tower's when frozen, at the tower's rate) and the layer; lazy Adam over the light tower's bags; one schedule."""
    from xc_core.training.optim import Group

    encoder, schedule = parts.encoder, _schedule(steps, train_cfg.warmup_fraction)
    lr = train_cfg.tower_lr if train_cfg.tower else train_cfg.lr
    optimizers: list[Any] = [torch.optim.AdamW([
        {"params": encoder.dense_parameters(), "lr": lr},
        {"params": list(parts.gcn.parameters()), "lr": cfg.gcn_lr}], weight_decay=train_cfg.weight_decay)]
    if encoder.sparse_parameters():
        optimizers.append(torch.optim.SparseAdam(encoder.sparse_parameters(), lr=lr))
    return Group(optimizers), Group([torch.optim.lr_scheduler.LambdaLR(o, schedule) for o in optimizers])


def _parts(dataset: XCDataset, enc_cfg: EncoderConfig, train_cfg: TrainConfig, cfg: OakConfig,
           found: ValidationSplit) -> StepParts:
    """Encoder, GCN layer, batches and the leak-free adjacency of one run (seeded: the same for ``oak`` and
    ``oak-oracle``)."""
    torch.manual_seed(train_cfg.seed)
    encoder = TextEncoder(enc_cfg)
    if train_cfg.tower:  # the CPU recipe: the transformer frozen (its vector of each text computed once), a light tower
        encoder.freeze_under_tower(train_cfg.tower_hidden, train_cfg.tower_bigrams, dataset.train_texts,
                                   dataset.label_texts)
    gcn = GraphConvolution(encoder.dim, cfg.aggregation).to(encoder.device)
    nodes = NodeTable.of(dataset)
    adjacency = without_leaks(train_neighbours(dataset, nodes), dataset, nodes,
                              heldout_texts(dataset, found.val_rows, train_cfg))
    builder = BatchBuilder.from_anchor_sets(dataset.train_texts, dataset.label_texts, found.y_fit, {}, [], [])
    return StepParts(encoder, gcn, builder, adjacency, nodes, cfg, InBatchSoftmaxLoss(train_cfg.softmax_scale),
                     train_cfg.softmax_scale)


def train_oak(dataset: XCDataset, enc_cfg: EncoderConfig, train_cfg: TrainConfig, cfg: OakConfig, out: Path,
              progress: bool = False, on_metrics: Callable[[dict[str, float], int], None] | None = None
              ) -> OakTraining:
    """Train the encoder and the GCN layer, validating at epoch 0 (the untrained start) and after every epoch, the
    best epoch restored with ``select_best``; save the encoder in ``out/encoder``; return the model with its node
    table encoded by the kept encoder."""
    started = time.perf_counter()
    found = split(dataset, train_cfg)
    rows = found.train_rows
    parts = _parts(dataset, enc_cfg, train_cfg, cfg, found)
    selection = Selection.of(dataset, train_cfg, found)
    before = _probe(parts, rows, train_cfg, cfg.probe_batches)
    _log(on_metrics, validate(parts, selection, dataset, 0))
    optimizer, scheduler = _optimizer(parts, train_cfg, cfg, int(np.ceil(len(rows) / train_cfg.batch_size))
                                      * train_cfg.epochs)
    step = 0
    for epoch in range(train_cfg.epochs):
        done = _epoch(parts, rows, train_cfg, epoch, optimizer, scheduler, progress, on_metrics, step)
        step = int(done.pop("step"))
        _log(on_metrics, validate(parts, selection, dataset, epoch + 1, **done))
    selection.restore(trained_modules(parts))
    after = _probe(parts, rows, train_cfg, cfg.probe_batches)
    encoder, encoder_dir = parts.encoder, out / "encoder"
    encoder.save(encoder_dir)  # the light tower beside the transformer's files when it has one
    gcn = parts.gcn.cpu().eval()
    model = OakModel(gcn, parts.nodes.texts, encoder.encode(parts.nodes.texts, progress=progress, desc="graph nodes"),
                     cfg)
    return OakTraining(encoder_dir, model, selection.history, before["task"], after["task"], step,
                       round(time.perf_counter() - started, 2), len(rows), selection.summary(),
                       encoder.parameter_count())


def _log(on_metrics: Callable[[dict[str, float], int], None] | None, row: dict[str, float]) -> None:
    """An epoch's validation metrics as ``val/…`` at step = epoch."""
    if on_metrics is not None:
        on_metrics({f"val/{k[4:]}": v for k, v in row.items() if k.startswith("val_")}, int(row["epoch"]))
