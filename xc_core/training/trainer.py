"""One trainer for every method: dual encoder + optional graph regularizers, bandit-tuned λs, NGAME
cluster batching, RAMEN pruning schedule, exact-resume checkpoints, DDP when launched by torchrun.

Objective (RAMEN eq. 3): λ_l·L + Σ_t (λ_x^t R_x^t + λ_z^t R_z^t). Methods differ only in ``TrainConfig``
(which regularizers, pruning, bandit) and in an optional data-set transform: the trainer knows no method.

Exact resume: every random choice of step s of epoch e is seeded from (seed, e, s) — batch sampling,
dropout — and cluster assignments, pruned anchors, optimizer, scheduler and bandit state are in the
checkpoint, so a run killed at any point and resumed ends with the same parameters as an uninterrupted one.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import scipy.sparse as sp

from xc_core import seeds
from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.encoders.text import EncoderConfig, TextEncoder
from xc_core.graphs.pruning import prune_anchor_set
from xc_core.seeds import Stream
from xc_core.training.anchor_prep import prepare_anchors
from xc_core.training.batches import Batch, BatchBuilder, same_text
from xc_core.training.checkpoint import latest, load_checkpoint, load_encoder_weights, save_checkpoint, save_encoder
from xc_core.training.clusters import balanced_kmeans, cluster_batches, cluster_size_at, random_batches
from xc_core.training.config import TrainConfig
from xc_core.training.losses.distill import score_distillation
from xc_core.training.ranker import ValidationRanker
from xc_core.training.validation import train_subsample, validation_split

if TYPE_CHECKING:
    from xc_core.evaluation.fallback import Decision
    from xc_core.training.selection import EpochChoice

log = logging.getLogger(__name__)




class MetricSink(Protocol):
    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...


class _NullSink:
    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        log.debug("step %d %s", step, metrics)


@dataclass
class TrainResult:
    epochs: int
    steps: int
    final_task_loss: float
    val_recall: float
    examples_per_s: float
    seconds: float
    encoder_dir: Path
    history: list[dict[str, float]] = field(default_factory=list)
    prune_log: list[dict[str, Any]] = field(default_factory=list)
    lambda_trajectory: list[dict[str, Any]] = field(default_factory=list)
    selected_epoch: int = 0  # the epoch whose weights were kept (0: the starting encoder)
    heldout_anchor_edges: dict[str, int] = field(default_factory=dict)
    fallback_test: dict[str, Any] = field(default_factory=dict)  # the served epoch against epoch 0 (selection.py)
    graph_worth: dict[str, Any] = field(default_factory=dict)  # the sets kept and muted by the graph-worth check


def dist_info() -> tuple[int, int]:
    """(rank, world size); initialises the process group when launched by torchrun."""
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


class Trainer:
    def __init__(self, dataset: XCDataset, encoder_cfg: EncoderConfig, cfg: TrainConfig, out_dir: Path,
                 sink: MetricSink | None = None, progress: bool = False, val_truth: Any = None) -> None:
        """``val_truth``: the ground truth validation recall is scored against (default ``dataset.y_train``);
        methods that rewrite the training labels (AugGT) pass the original so every method is scored alike. With a
        temporal validation split (event logs) training reads only the clicks before the validation days and
        validation the clicks in them (:func:`~xc_core.training.validation.validation_split`)."""
        self.split = validation_split(dataset, cfg).trained_before(cfg.train_before_day, dataset)
        self.data, self.cfg, self.out = self.split.fit_view(dataset), cfg, Path(out_dir)
        self.val_truth = self.split.y_val if self.split.kind == "temporal" or val_truth is None else val_truth
        self.sink, self.progress = sink or _NullSink(), progress
        self.rank, self.world = dist_info()
        self.encoder = TextEncoder(encoder_cfg)
        if cfg.tower:
            self._freeze_under_tower()
        self.train_idx, self.val_idx = self.split.train_rows, self.split.val_rows
        self.train_idx = train_subsample(self.train_idx, cfg)
        from xc_core.training.attributes import AttributeIndex

        #: the data set's item metadata (brand / location per label); None without any (aol-1000, XC folders)
        self.attributes = AttributeIndex.build(dataset.label_attributes, dataset.label_texts)
        if cfg.attribute_negatives and cfg.loss != "softmax":
            raise ValueError("attribute_negatives adds a negative to the softmax task loss: use loss='softmax'")
        if cfg.shortlist_negatives and cfg.loss != "softmax":
            raise ValueError("shortlist_negatives adds a negative to the softmax task loss: use loss='softmax'")
        if cfg.sampled_negatives and cfg.loss != "softmax":
            raise ValueError("sampled_negatives adds negatives to the softmax task loss: use loss='softmax'")
        if cfg.regularizer_sampled_negatives and (cfg.loss != "softmax" or not cfg.sampled_negatives):
            raise ValueError("regularizer_sampled_negatives shares the task's sampled labels with the regularizers: "
                             "use loss='softmax' and sampled_negatives > 0")
        if cfg.logq_correction and cfg.loss != "softmax":
            raise ValueError("logq_correction corrects the softmax task loss: use loss='softmax'")
        if cfg.distill and not cfg.tower:
            raise ValueError("distill takes the frozen encoder under a tower as its teacher: set tower=true")
        if cfg.graded_positives and cfg.positive_weights == "uniform":
            raise ValueError("graded_positives orders a row's known labels by their click days: set "
                             "positive_weights='click_days' (or graded_positives=false)")
        if cfg.anchor_negatives and cfg.loss != "softmax":
            raise ValueError("anchor_negatives adds a negative to the softmax regularizers: use loss='softmax'")
        #: (train documents, attribute_negatives) mined negatives, -1 padded (None: none mined)
        self.hard_pool: np.ndarray | None = None
        #: (train documents, shortlist_negatives) the encoder's own top non-positive labels, -1 padded (None: none)
        self.shortlist_pool: np.ndarray | None = None
        #: ``doc/<set>`` / ``label/<set>`` → mined negative anchors per node (``anchor_negatives``; empty: none)
        self.anchor_pools: dict[str, np.ndarray] = {}
        prepared = prepare_anchors(dataset, self.data, cfg, self.train_idx, self.val_idx, self.attributes)
        self.data, self.train_idx = prepared.data, prepared.train_idx  # the anchor_pairs control may add pairs
        self.full_anchors, self.doc_sets, self.label_sets = prepared.full, prepared.doc_sets, prepared.label_sets
        if cfg.tower:  # the anchors' frozen vectors too, in one call per set (not a transformer pass per step)
            for anchor_set in self.full_anchors.values():
                self.encoder.freeze_base(list(anchor_set.texts))
        self.graph_worth = prepared.graph_worth
        self.heldout_anchor_edges = prepared.heldout_edges
        self.attribute_anchor_edges = prepared.attribute_edges  # edges dropped by attribute_anchor_filter, per set
        self.anchor_pairs_added = prepared.pairs_added
        self.anchors: dict[str, AnchorSet] = dict(self.full_anchors)
        self._last_top: np.ndarray | None = None  # the validation ranking of the last validation_metrics call
        self.ranker = ValidationRanker(self.data, self.val_idx, self.val_truth, cfg, self.attributes)
        self.terms = ["task", *(f"doc/{s}" for s in self.doc_sets), *(f"label/{s}" for s in self.label_sets)]
        self._build_losses()
        self.builder = self._builder()

    # -- construction ------------------------------------------------------------------------
    def _freeze_under_tower(self) -> None:
        """``tower``: train a light tower beside the frozen transformer (encoders/tower.py). Every training and
        label text's frozen vector is computed once here; each step then runs the tower alone."""
        if self.world > 1:
            raise ValueError("tower=True trains on one process (its step is a few small matrix products): launch "
                             "without torchrun, or set tower=False to fine-tune the transformer with DDP")
        self.encoder.freeze_under_tower(self.cfg.tower_hidden, self.cfg.tower_bigrams, self.data.train_texts,
                                        self.data.label_texts)

    def _build_losses(self) -> None:
        from xc_core.training.bandit import LambdaBandit
        from xc_core.training.losses import loss_family

        self.task_loss, self.regularizer = loss_family(self.cfg.loss, self.cfg)
        muted = set(self.graph_worth.get("muted", []))
        initial = {t: (self.cfg.lambda_task if t == "task" else 0.0 if t.split("/", 1)[1] in muted
                       else self.cfg.lambda_reg) for t in self.terms}
        self.bandit = LambdaBandit(self.terms, initial, variance=self.cfg.bandit_variance, lr=self.cfg.bandit_lr,
                                   period=self.cfg.bandit_period, seed=self.cfg.seed, fixed=not self.cfg.bandit)

    @cached_property
    def _mismatch(self) -> sp.csr_matrix:
        """(train_idx rows, labels): the labels carrying a brand / place the row's document does not name."""
        from xc_core.training.attributes import mismatch_matrix

        assert self.attributes is not None
        return mismatch_matrix(self.attributes, [self.data.train_texts[i] for i in self.train_idx])

    def _mine_negatives(self, epoch: int) -> None:
        """``attribute_negatives``: each training document's pool of labels of another brand / place, the current
        encoder's most similar first (training/attributes.py); nothing without item metadata."""
        if not self.cfg.attribute_negatives or self.attributes is None or not self._mismatch.nnz:
            return
        from xc_core.training.attributes import mine_negatives

        mismatch = self._mismatch
        rows = np.flatnonzero(np.diff(mismatch.indptr))
        labels = np.unique(mismatch.indices)
        doc_emb = self.encode([self.data.train_texts[self.train_idx[r]] for r in rows])
        label_emb = np.zeros((len(self.data.label_texts), doc_emb.shape[1]), dtype=np.float32)
        label_emb[labels] = self.encode([self.data.label_texts[j] for j in labels])
        positives = sp.csr_matrix(self.data.y_train)[self.train_idx[rows]]
        mined = mine_negatives(doc_emb, label_emb, mismatch[rows], positives, self.cfg.attribute_negatives)
        pool = np.full((len(self.data.train_texts), self.cfg.attribute_negatives), -1, dtype=np.int64)
        pool[self.train_idx[rows]] = mined
        self.hard_pool = pool
        log.info("epoch %d: attribute negatives mined for %d documents", epoch, int((mined[:, 0] >= 0).sum()))
        self.builder = self._builder()

    def _shortlist_due(self, epoch: int) -> bool:
        c = self.cfg
        return (c.shortlist_negatives > 0 and epoch >= c.shortlist_warmup_epochs
                and (epoch - c.shortlist_warmup_epochs) % c.shortlist_refresh_every == 0)

    def _mine_shortlist(self, epoch: int) -> None:
        """``shortlist_negatives``: each training document's highest-ranked labels by the current encoder, its known
        positives masked (an unrecorded positive can still be drawn: the price of hard negatives, NGAME's too)."""
        from xc_core.training.anchor_negatives import mine_anchor_negatives

        rows = self.train_idx
        docs = self.encode([self.data.train_texts[i] for i in rows])
        labels = self.encode(list(self.data.label_texts))
        own = sp.csr_matrix(self.data.y_train)[rows]
        mined = mine_anchor_negatives(docs, labels, np.arange(len(labels)), own, np.full(len(rows), -1, np.int64),
                                      self.cfg.shortlist_negatives)
        pool = np.full((len(self.data.train_texts), self.cfg.shortlist_negatives), -1, dtype=np.int64)
        pool[rows] = mined
        self.shortlist_pool = pool
        log.info("epoch %d: shortlist negatives mined for %d documents", epoch, int((mined[:, 0] >= 0).sum()))
        self.builder = self._builder()

    def _mine_anchor_negatives(self, epoch: int) -> None:
        """``anchor_negatives``: each regularized node's most similar anchors of the set that are not its own, by the
        current encoder (training/anchor_negatives.py), mined over every usable edge (pruning only thins them)."""
        if not self.cfg.anchor_negatives:
            return
        from xc_core.training.anchor_negatives import side_key, side_pool

        for kind, sets, texts in (("doc", self.doc_sets, self.data.train_texts),
                                  ("label", self.label_sets, self.data.label_texts)):
            for name in sets:
                self.anchor_pools[side_key(kind, name)] = side_pool(self.full_anchors[name], kind, texts,
                                                                    self.cfg.anchor_negatives, self.encode)
        mined = {k: int((p[:, 0] >= 0).sum()) for k, p in self.anchor_pools.items()}
        log.info("epoch %d: negative anchors mined (nodes per side): %s", epoch, mined)
        self.builder = self._builder()

    def _builder(self) -> BatchBuilder:
        from xc_core.training.anchor_negatives import merge_pools

        pool = merge_pools(self.hard_pool, self.shortlist_pool)
        return BatchBuilder.from_anchor_sets(self.data.train_texts, self.data.label_texts, self.data.y_train,
                                             self.anchors, self.doc_sets, self.label_sets, hard_pool=pool,
                                             anchor_pools=self.anchor_pools,
                                             sampled_negatives=self.cfg.sampled_negatives,
                                             positive_weights=self._positive_weights(),
                                             graded=self.cfg.graded_positives)

    @cached_property
    def label_log_q(self) -> np.ndarray:
        """``logq_correction``: per label, the log of its expected count among a batch's positives (each training
        row draws one positive: uniformly, or by ``positive_weights``); labels never drawn get 0 (never in a batch)."""
        y = sp.csr_matrix(self.data.y_train, dtype=np.float64, copy=True)
        weights = self._positive_weights()
        if weights is not None:
            y.data = np.asarray(weights, dtype=np.float64)
        rows = y[self.train_idx]
        totals = np.asarray(rows.sum(axis=1)).ravel()
        draw = sp.diags(np.divide(1.0, totals, out=np.zeros_like(totals), where=totals > 0)) @ rows
        expected = np.asarray(draw.sum(axis=0)).ravel() * self.cfg.batch_size / max(1, len(self.train_idx))
        return np.log(expected, out=np.zeros_like(expected), where=expected > 0).astype(np.float32)

    def _positive_weights(self) -> np.ndarray | None:
        """``positive_weights``: each training pair's click days before the validation days (and before
        ``train_before_day``), or None for the uniform draw."""
        if self.cfg.positive_weights == "uniform":
            return None
        from xc_core.training.positives import click_day_weights

        ends = [d for d in (self.split.first_day, self.cfg.train_before_day) if d is not None]
        return click_day_weights(self.data, min(ends) if ends else None)

    def _optimizer(self, total_steps: int) -> tuple[Any, Any]:
        from xc_core.training import optim

        warmup = max(1, int(total_steps * self.cfg.warmup_fraction))

        # Not transformers' get_linear_schedule_with_warmup: that one spends step 0 at lr 0 and decays one step
        # later, so every trained model (and the results pages) would move; kept with the numbers it gave.
        def schedule(step: int) -> float:
            rise = min(1.0, (step + 1) / warmup)
            return min(1.0, rise * max(0.0, (total_steps - step) / max(1, total_steps - warmup)))

        return optim.build(self.encoder.dense_parameters(), self.cfg.tower_lr if self.cfg.tower else self.cfg.lr,
                           self.cfg.weight_decay, schedule, self.encoder.sparse_parameters())

    def _clip(self) -> None:
        """Clip the dense gradients' norm to 1 (a sparse embedding gradient is left as it is: lazy Adam scales each
        row's step by its own history)."""
        import torch

        torch.nn.utils.clip_grad_norm_(self.encoder.dense_parameters(), 1.0)

    # -- one step ----------------------------------------------------------------------------
    def _shard(self, batch: Batch) -> Batch:
        """This rank's rows of a global batch (DDP averages the gradients)."""
        if self.world == 1:
            return batch
        rows = np.arange(self.rank, len(batch.doc_ids), self.world)
        pick = np.ix_(rows, rows)

        def side(s):
            return type(s)([s.texts[i] for i in rows], s.valid[rows], s.neighbour_mask[pick],
                           [s.hard_texts[i] for i in rows] if s.hard_texts is not None else None,
                           s.hard_valid[rows] if s.hard_valid is not None else None)

        hard = batch.hard_label_ids
        sampled = batch.sampled_positive
        return Batch(batch.doc_ids[rows], batch.label_ids[rows], [batch.doc_texts[i] for i in rows],
                     [batch.label_texts[i] for i in rows], batch.positive_mask[pick],
                     {k: side(v) for k, v in batch.doc_anchors.items()},
                     {k: side(v) for k, v in batch.label_anchors.items()},
                     hard[rows] if hard is not None else None, [batch.hard_texts[i] for i in rows] if hard is not None
                     else [], batch.sampled_label_ids, batch.sampled_texts,
                     sampled[rows] if sampled is not None else None)

    def losses(self, batch: Batch) -> dict[str, Any]:
        """Every term of the objective for one batch, from one encoder pass over all its texts."""
        b = len(batch.doc_texts)
        texts = [*batch.doc_texts, *batch.label_texts, *self.hard_texts(batch)]
        m = len(batch.sampled_texts)
        anchor_texts = [t for group in self.anchor_text_groups(batch) for t in group]
        if self.cfg.anchor_grad:  # RAMEN eq. 2 as written: gradients flow into the anchors' encodings too
            emb = self.encoder.forward(texts + batch.sampled_texts + anchor_texts)
            anchor_emb = emb[len(texts) + m:]
        else:
            emb = self.encoder.forward(texts + batch.sampled_texts)
            anchor_emb = self.encode_fixed(anchor_texts)
        return self.objective_terms(batch, emb[:b], emb[b: 2 * b], emb[2 * b: len(texts)], anchor_emb,
                                    sampled=emb[len(texts): len(texts) + m] if m else None)

    def anchor_sides(self, batch: Batch) -> list[tuple[str, str, Any]]:
        """(``doc`` / ``label``, anchor set, the batch's anchors of that side) for every regularized side, in the
        order of :attr:`terms`."""
        return [*(("doc", s, batch.doc_anchors[s]) for s in self.doc_sets if s in batch.doc_anchors),
                *(("label", s, batch.label_anchors[s]) for s in self.label_sets if s in batch.label_anchors)]

    def anchor_text_groups(self, batch: Batch) -> list[list[str]]:
        """The batch's anchor texts as :meth:`objective_terms` reads them: per side in :meth:`anchor_sides` order,
        its anchors, then its negative anchors when it has them (``anchor_negatives``) — each group one row a row."""
        return [group for _, _, side in self.anchor_sides(batch)
                for group in ([side.texts] if side.hard_texts is None else [side.texts, side.hard_texts])]

    @staticmethod
    def _hard_rows(batch: Batch) -> np.ndarray:
        return (np.flatnonzero(batch.hard_label_ids >= 0) if batch.hard_label_ids is not None
                else np.zeros(0, np.int64))

    def hard_texts(self, batch: Batch) -> list[str]:
        """The texts of the rows' hard negative labels (rows without one have none)."""
        return [batch.hard_texts[i] for i in self._hard_rows(batch)]

    def objective_terms(self, batch: Batch, docs: Any, labels: Any, hard: Any, anchors: Any,
                        sampled: Any = None) -> dict[str, Any]:
        """The terms of :meth:`losses` from the batch's embeddings: its documents, its labels, its
        :meth:`hard_texts`, its anchors (:meth:`anchor_text_groups`, ``len(docs)`` rows a group) and its sampled
        labels (``batch.sampled_texts``; None when the batch has none)."""
        import torch

        b = len(batch.doc_texts)
        more: dict[str, Any] = {}
        if sampled is not None and batch.sampled_positive is not None:  # sampled_negatives: in every row's softmax
            more = {"sampled_emb": sampled, "sampled_positive": torch.from_numpy(batch.sampled_positive)}
        if self.cfg.logq_correction:  # the sampling-bias correction (losses/softmax.py)
            labels_total = len(self.data.label_texts)
            more |= {"column_log_q": torch.from_numpy(self.label_log_q[batch.label_ids]),
                     "extra_log_q": float(np.log(max(1, len(batch.sampled_texts)) / labels_total))}
        hard_rows = self._hard_rows(batch)
        if len(hard_rows):  # the rows' labels of another brand / place (training/attributes.py)
            index = torch.from_numpy(hard_rows).to(docs.device)
            hard_emb = torch.zeros_like(docs).index_copy(0, index, hard)
            valid = torch.zeros(b, dtype=torch.bool, device=docs.device).index_fill(0, index, True)
            task = self.task_loss(docs, labels, torch.from_numpy(batch.positive_mask), hard_emb=hard_emb,
                                  hard_valid=valid, **more)
        else:
            task = self.task_loss(docs, labels, torch.from_numpy(batch.positive_mask), **more)
        if self.cfg.distill:  # the frozen encoder's order of each row's other labels (losses/distill.py)
            teacher = self.encoder.frozen_vectors(batch.doc_texts) @ self.encoder.frozen_vectors(batch.label_texts).T
            task = task + self.cfg.distill * score_distillation(docs @ labels.T, teacher.to(docs.device),
                                                                torch.from_numpy(batch.positive_mask),
                                                                self.cfg.softmax_scale)
        out = {"task": task}
        start = 0
        for kind, name, side in self.anchor_sides(batch):
            nodes = docs if kind == "doc" else labels
            extra = {}
            if side.hard_texts is not None:  # the side's negative anchors follow its anchors
                extra = {"hard_emb": anchors[start + b: start + 2 * b], "hard_valid": torch.from_numpy(side.hard_valid)}
            if self.cfg.regularizer_sampled_negatives and "sampled_emb" in more:  # the task's sampled labels too
                masked = more["sampled_positive"].numpy() | same_text(side.texts, batch.sampled_texts)
                extra |= {"extra_emb": sampled, "extra_allowed": torch.from_numpy(~masked)}
            out[f"{kind}/{name}"] = self.regularizer(nodes, anchors[start: start + b], torch.from_numpy(side.valid),
                                                     torch.from_numpy(side.neighbour_mask), **extra)
            start += b if side.hard_texts is None else 2 * b
        return out

    def encode_fixed(self, texts: list[str]) -> Any:
        """Anchor targets without gradient (``anchor_grad=False``): each distinct text encoded once."""
        import torch

        unique = list(dict.fromkeys(texts))
        position = {t: i for i, t in enumerate(unique)}
        with torch.no_grad():
            emb = self.encoder.forward(unique)
        return emb[torch.tensor([position[t] for t in texts], dtype=torch.long, device=emb.device)]

    # -- validation --------------------------------------------------------------------------
    def encode(self, texts: list[str]) -> np.ndarray:
        return self.encoder.encode(texts, progress=False)

    def validation_metrics(self) -> dict[str, float]:
        """recall@val_k, P@1 and P@5 of the current encoder on the validation documents (exact search over
        :attr:`val_label_space`), and its brand / place mismatch where the data set has item metadata."""
        found, self._last_top = self.ranker.metrics(self.encoder)
        return found

    def validation_ranking(self, k: int, encoder: Any = None) -> np.ndarray:
        """The current encoder's top ``k`` label ids per validation row (−1 pads), as validation ranks them;
        ``encoder``: anything with the encoder's ``encode`` standing in for it (vectors already computed)."""
        top = self.ranker.top(encoder or self.encoder, k)
        return np.where(top >= 0, self.val_label_space[np.maximum(top, 0)], -1)

    def against_encoder(self, folder: Path, name: str) -> Decision:
        """The never-worse rule between this trainer's served encoder and another method's trained one (``folder``)
        on the same validation rows: ``ramen`` against ``dual_encoder`` — the graph is served only when
        it beats the text-only encoder on the epoch choice's metric and no guard falls below it
        (``cfg.text_only_fallback``: P@1 and PSP@1 at least the text-only encoder's in the point estimate). A plain
        paired test: both encoders chose their epoch on these rows, a bias the two share (docs/graphs.md, "Will this
        graph help?")."""
        from xc_core.evaluation.fallback import against_fallback

        depth = max(self.cfg.val_k, 5)
        mine = self.ranker.top(self.encoder, depth)
        theirs = self.ranker.top(TextEncoder(self.encoder.cfg.model_copy(update={"model_path": str(folder)})), depth)
        choice = self.choice
        return against_fallback(f"graph regularizers (against {name})", mine, theirs, choice.truth,
                                choice.inv_propensity, choice.metric, self.cfg.text_only_fallback,
                                candidate={"against": name})

    def validation_recall(self) -> float:
        return self.validation_metrics()[f"recall@{self.cfg.val_k}"]

    @property
    def val_label_space(self) -> np.ndarray:
        return self.ranker.label_space

    @property
    def choice(self) -> EpochChoice:
        """Which epoch is served (``select_best``): the best on validation rows if it beats epoch 0 out of sample
        (training/selection.py)."""
        return self.ranker.choice

    @property
    def best(self) -> dict[str, float]:
        """The served epoch so far (0: the starting encoder) and its pick-half validation recall."""
        return self.choice.best

    def validation_task_loss(self) -> float:
        """The bandit's reward: the task loss L on a fixed mini-batch of *training-side* rows (see bandit.py) —
        never a validation row, which would let the rows that pick the epoch and test it against epoch 0 steer
        training."""
        import torch

        rng = seeds.rng(self.cfg.seed, Stream.BANDIT_REWARD_BATCH)
        ids = np.sort(rng.choice(self.train_idx, min(self.cfg.batch_size, len(self.train_idx)), replace=False))
        batch = self.builder.build(ids, seeds.rng(self.cfg.seed, Stream.BANDIT_REWARD_BATCH))
        self.encoder.model.eval()
        with torch.no_grad():
            docs = self.encoder.forward(batch.doc_texts)
            labels = self.encoder.forward(batch.label_texts)
            value = float(self.task_loss(docs, labels, torch.from_numpy(batch.positive_mask)))
        self.encoder.model.train()
        return value

    # -- pruning and clusters ----------------------------------------------------------------
    def _encode_rows(self, texts: list[str], rows: np.ndarray) -> np.ndarray:
        """Embeddings of ``texts[rows]`` placed at their row; other rows stay zero (never looked up)."""
        out = np.zeros((len(texts), self.encoder.dim), dtype=np.float32)
        rows = np.unique(rows)
        out[rows] = self.encode([texts[i] for i in rows])
        return out

    def _prune(self, epoch: int) -> dict[str, Any]:
        """Re-prune the reachable anchor edges with the current encoder (each needed text encoded once).

        With ``prune_center`` the cosine is taken on embeddings centred on the mean of every text encoded here
        (documents, labels, anchors): mean-pooled encoders are anisotropic, so raw cosine > 0 keeps all.
        The record also says how the rule treats (document, true label) pairs against random pairs."""
        from xc_core.graphs.pruning import embedding_center, prune_pass_rates

        sets = self.full_anchors.values()
        doc_rows = np.concatenate([a.doc_edges[:, 0] for a in sets])
        label_rows = np.concatenate([a.label_edges[:, 0] for a in sets])
        doc_emb = self._encode_rows(self.data.train_texts, doc_rows)
        label_emb = self._encode_rows(self.data.label_texts, label_rows)
        anchor_emb = {name: self._encode_rows(full.texts,
                                              np.concatenate([full.doc_edges[:, 1], full.label_edges[:, 1]]))
                      for name, full in self.full_anchors.items()}
        center = embedding_center(doc_emb, label_emb, *anchor_emb.values()) if self.cfg.prune_center else None
        record: dict[str, Any] = {"epoch": epoch}
        for name, full in self.full_anchors.items():
            self.anchors[name], counts = prune_anchor_set(full, doc_emb, label_emb, anchor_emb[name],
                                                          self.cfg.prune_threshold, center=center)
            record[name] = counts.as_dict()
        rows = np.intersect1d(self.train_idx, doc_rows)
        if len(rows) and len(label_rows):
            record["pass_rates"] = prune_pass_rates(
                doc_emb, label_emb, self.data.y_train, self.cfg.prune_threshold, center,
                seeds.rng(self.cfg.seed, Stream.PRUNE_PASS_RATES, epoch), doc_rows=rows,
                label_rows=np.unique(label_rows))
        log.info("pruning at epoch %d: %s", epoch, record)
        self.builder = self._builder()
        return record

    def _prune_due(self, epochs_done: int) -> bool:
        c = self.cfg
        return (c.prune and bool(self.full_anchors) and epochs_done >= c.prune_warmup_epochs
                and (epochs_done - c.prune_warmup_epochs) % c.prune_every == 0)

    def _cluster(self, epoch: int) -> np.ndarray:
        emb = self.encode([self.data.train_texts[i] for i in self.train_idx])
        size = cluster_size_at(epoch, self.cfg.cluster_size, self.cfg.cluster_grow_every, self.cfg.batch_size)
        return balanced_kmeans(emb, size, seed=self.cfg.seed + epoch)

    def _epoch_batches(self, epoch: int, assign: np.ndarray | None) -> list[np.ndarray]:
        rng = seeds.rng(self.cfg.seed, Stream.EPOCH_BATCHES, epoch)
        if self.cfg.batching == "clusters" and assign is not None:
            return cluster_batches(assign, self.cfg.batch_size, rng)
        return random_batches(len(self.train_idx), self.cfg.batch_size, rng)

    # -- checkpoints -------------------------------------------------------------------------
    @property
    def checkpoint_dir(self) -> Path:
        return self.out / "checkpoint"

    def _save(self, epoch: int, step: int, global_step: int, assign: np.ndarray | None, optimizer: Any,
              scheduler: Any, history: list[dict[str, float]], prune_log: list[dict[str, Any]]) -> None:
        if self.rank != 0:
            return
        arrays = {"assign": assign if assign is not None else np.zeros(0, np.int64)}
        for name, a in self.anchors.items():
            arrays[f"{name}/doc_edges"], arrays[f"{name}/label_edges"] = a.doc_edges, a.label_edges
        arrays.update(self.choice.arrays())
        if self.hard_pool is not None:
            arrays["attribute_negatives"] = self.hard_pool
        if self.shortlist_pool is not None:
            arrays["shortlist_negatives"] = self.shortlist_pool
        arrays.update({f"anchor_negatives/{k}": p for k, p in self.anchor_pools.items()})
        state = {"epoch": epoch, "step": step, "global_step": global_step, "history": history, "prune_log": prune_log,
                 "best": self.best}
        torch_state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                       "bandit": self.bandit.state_dict()}
        save_checkpoint(self.checkpoint_dir, self.encoder, state, arrays, torch_state)

    def _restore(self, optimizer: Any, scheduler: Any) -> tuple[dict[str, Any], np.ndarray | None]:
        state, arrays, torch_state, path = load_checkpoint(self.checkpoint_dir)
        load_encoder_weights(self.encoder, path / "encoder")
        optimizer.load_state_dict(torch_state["optimizer"])
        scheduler.load_state_dict(torch_state["scheduler"])
        self.bandit.load_state_dict(torch_state["bandit"])
        for name, full in self.full_anchors.items():
            self.anchors[name] = AnchorSet(name, full.texts, arrays[f"{name}/doc_edges"], arrays[f"{name}/label_edges"])
        if "attribute_negatives" in arrays:
            self.hard_pool = arrays["attribute_negatives"]
        if "shortlist_negatives" in arrays:
            self.shortlist_pool = arrays["shortlist_negatives"]
        self.anchor_pools = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("anchor_negatives/")}
        self.builder = self._builder()
        assign = arrays["assign"] if arrays["assign"].size else None
        self.choice.restore(arrays, state.get("best", self.best))
        return state, assign

    # -- model selection ---------------------------------------------------------------------
    @property
    def best_dir(self) -> Path:
        return self.out / "best_encoder"

    @property
    def start_dir(self) -> Path:
        return self.out / "start_encoder"

    def _validate(self, epoch: int, global_step: int, task_value: float) -> dict[str, float]:
        """Validation metrics of the current encoder as a history record; keeps the best epoch's weights."""
        metrics = self.validation_metrics()
        record = {"epoch": epoch, "task_loss": task_value, **{f"val_{k}": v for k, v in metrics.items()}}
        if self.rank == 0:  # the epoch beside its validation: MLflow's charts read progress off it
            self.sink.log_metrics({"epoch": float(epoch), **{f"val/{k}": v for k, v in metrics.items()}}, global_step)
        if self.cfg.select_best and self._last_top is not None and self.choice.add(epoch, self._last_top):
            # epoch 0 is the fallback, served when no trained epoch beats it; a later best is the candidate
            if self.rank == 0:
                save_encoder(self.start_dir if epoch == 0 else self.best_dir, self.encoder)
        log.info("epoch %d: %s", epoch, record)
        return record

    def _serve_chosen_epoch(self) -> Decision | None:
        """Load the served epoch's weights: the best on the pick half when it beats epoch 0 on the check half
        (:meth:`EpochChoice.decide`), else epoch 0's. None when selection is off (the last epoch is served)."""
        if not self.cfg.select_best or not self.choice.tops:
            return None
        decision = self.choice.decide()
        log.info("epoch selection: %s", decision.reason)
        if not decision.kept:
            self.choice.best = {"epoch": 0, "metric": self.best["metric"]}
            if self.start_dir.exists():
                load_encoder_weights(self.encoder, self.start_dir)
        elif self.best["epoch"] != self.cfg.epochs and self.best_dir.exists():
            load_encoder_weights(self.encoder, self.best_dir)
        return decision

    # -- the loop ----------------------------------------------------------------------------
    def fit(self, resume: bool = False) -> TrainResult:
        import torch

        from xc_core.progress import bar as progress_bar

        cfg = self.cfg
        steps_per_epoch = int(np.ceil(len(self.train_idx) / cfg.batch_size))
        optimizer, scheduler = self._optimizer(steps_per_epoch * cfg.epochs)
        if self.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            self.encoder.runner = DistributedDataParallel(self.encoder.model)
        start_epoch = start_step = global_step = 0
        assign: np.ndarray | None = None
        history: list[dict[str, float]] = []
        prune_log: list[dict[str, Any]] = []
        if resume and latest(self.checkpoint_dir) is not None:
            state, assign = self._restore(optimizer, scheduler)
            start_epoch, start_step, global_step = state["epoch"], state["step"], state["global_step"]
            history, prune_log = state["history"], state["prune_log"]
            log.info("resumed at epoch %d step %d", start_epoch, start_step)
        else:
            # Epoch 0 is the starting encoder: a candidate for selection like any epoch, and the bandit's
            # first reference level.
            history.append(self._validate(0, 0, float("nan")))
            if len(self.terms) > 1:  # also for a fixed bandit (ramen_no_bandit): it records every period's change
                self.bandit.begin(self.validation_task_loss())
        if self.attribute_anchor_edges and self.rank == 0:
            self.sink.log_metrics({f"attribute_anchor_edges/{s}": float(n)
                                   for s, n in self.attribute_anchor_edges.items()}, global_step)
        started, examples, task_value = time.perf_counter(), 0, float("nan")
        for epoch in range(start_epoch, cfg.epochs):
            if cfg.batching == "clusters" and (assign is None or (epoch % cfg.cluster_refresh_every == 0
                                                                  and start_step == 0)):
                assign = self._cluster(epoch)
            batches = self._epoch_batches(epoch, assign)
            # mid-epoch resume (or an epoch off the refresh schedule): the pool of the checkpoint, or of the last mining
            if self.hard_pool is None or (start_step == 0 and epoch % cfg.attribute_refresh_every == 0):
                self._mine_negatives(epoch)
            if start_step == 0 or not self.anchor_pools:
                self._mine_anchor_negatives(epoch)
            if start_step == 0 and self._shortlist_due(epoch):
                self._mine_shortlist(epoch)
            self.encoder.model.train()
            bar = progress_bar(batches, desc=f"epoch {epoch + 1}/{cfg.epochs}", unit="batch",
                               enabled=self.progress and self.rank == 0, initial=start_step)
            for step, rows in enumerate(batches):
                if step < start_step:
                    continue
                torch.manual_seed(cfg.seed * 1_000_003 + epoch * 10_007 + step)
                batch = self._shard(self.builder.build(self.train_idx[rows], seeds.step_rng(cfg.seed, epoch, step)))
                terms = self.losses(batch)
                weights = self.bandit.weights()
                total = sum(weights[t] * v for t, v in terms.items())
                total.backward()
                self._clip()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                global_step += 1
                examples += len(batch.doc_texts) * self.world
                task_value = float(terms["task"].detach())
                if len(self.terms) > 1 and self.bandit.due(global_step):
                    self.bandit.update(self.validation_task_loss())
                    self._log_bandit(global_step)
                if global_step % cfg.log_every_steps == 0 and self.rank == 0:
                    self._log_step(terms, total, weights, examples / max(time.perf_counter() - started, 1e-9),
                                   global_step)
                bar.set_postfix(task=f"{task_value:.4f}",
                                examples_s=f"{examples / max(time.perf_counter() - started, 1e-9):.0f}")
                bar.update(1)
                if cfg.checkpoint_every_steps and global_step % cfg.checkpoint_every_steps == 0:
                    self._save(epoch, step + 1, global_step, assign, optimizer, scheduler, history, prune_log)
            bar.close()
            start_step = 0
            history.append(self._validate(epoch + 1, global_step, task_value))
            if self._prune_due(epoch + 1):
                prune_log.append(self._prune(epoch + 1))
                if self.rank == 0:
                    self.sink.log_metrics({f"prune/{s}/{k}": float(v) for s, c in prune_log[-1].items()
                                           if s != "epoch" for k, v in c.items()}, global_step)
            self._save(epoch + 1, 0, global_step, assign, optimizer, scheduler, history, prune_log)
        seconds = time.perf_counter() - started
        decision = self._serve_chosen_epoch()
        selected = next((h for h in history if h["epoch"] == self.best["epoch"]), history[-1] if history else {})
        encoder_dir = self.out / "encoder"
        if self.rank == 0:
            save_encoder(encoder_dir, self.encoder)
            self.sink.log_metrics({"selected_epoch": float(selected.get("epoch", cfg.epochs))}, global_step)
        return TrainResult(
            epochs=cfg.epochs, steps=global_step, final_task_loss=float(history[-1].get("task_loss", task_value)),
            val_recall=float(selected.get(f"val_recall@{cfg.val_k}", float("nan"))),
            examples_per_s=examples / max(seconds, 1e-9), seconds=seconds, encoder_dir=encoder_dir,
            history=history, prune_log=prune_log, lambda_trajectory=list(self.bandit.trajectory),
            selected_epoch=int(selected.get("epoch", cfg.epochs)), heldout_anchor_edges=dict(self.heldout_anchor_edges),
            fallback_test=decision.as_dict() if decision is not None else {}, graph_worth=self.graph_worth,
        )

    def _log_bandit(self, step: int) -> None:
        """The period's judged change of the validation task loss (raw and standardized), when it had one."""
        last = self.bandit.trajectory[-1]
        metrics = {f"bandit/{k}": float(last[k]) for k in ("loss", "reward", "reward_std") if last.get(k) is not None}
        if metrics and self.rank == 0:
            self.sink.log_metrics(metrics, step)

    def _log_step(self, terms: dict[str, Any], total: Any, weights: dict[str, float], examples_per_s: float,
                  step: int) -> None:
        """Losses, the learned λ (``lambda/``) and the perturbed λ̂ that weighed this step (``lambda_hat/``)."""
        metrics = {f"loss/{t}": float(v.detach()) for t, v in terms.items()}
        metrics.update({f"lambda/{t}": w for t, w in self.bandit.lambdas().items()})
        metrics.update({f"lambda_hat/{t}": w for t, w in weights.items()})
        metrics["loss/total"] = float(total.detach())
        metrics["examples_per_s"] = examples_per_s
        self.sink.log_metrics(metrics, step)
