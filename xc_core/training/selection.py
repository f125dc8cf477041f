"""Checkpoint selection on validation for the methods that train outside the encoder trainer (TextGNN, OAK), by the
trainer's rules ("never worse than doing nothing"): the trainer's seeded validation split and subsample
(:func:`~xc_core.training.trainer.split_validation`), its label space (``Trainer.val_label_space``), its metric
(recall@``val_k`` by exact search, a document's own label excluded), epoch 0 — the untrained start — a candidate
like every epoch, the best epoch's weights kept (in memory) and restored at the end when ``select_best`` is on.

Only the representation differs: each method passes its own validation document and label vectors. Used by
``textgnn`` and ``oak``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xc_core import seeds
from xc_core.datasets.container import XCDataset
from xc_core.seeds import Stream
from xc_core.training.config import TrainConfig


def split(dataset: XCDataset, cfg: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, validation rows): the trainer's split and ``max_train_docs`` subsample; train rows without a
    label dropped (validation keeps them and scores them 0, as the trainer does)."""
    from xc_core.training.trainer import split_validation

    train, val = split_validation(len(dataset.train_texts), cfg)
    if cfg.max_train_docs is not None and len(train) > cfg.max_train_docs:
        keep = seeds.rng(cfg.seed, Stream.TRAIN_SUBSAMPLE).choice(len(train), cfg.max_train_docs, replace=False)
        train = np.sort(train[keep])
    labelled = np.diff(sp.csr_matrix(dataset.y_train).indptr) > 0
    return train[labelled[train]], val


def heldout_texts(dataset: XCDataset, val: np.ndarray, cfg: TrainConfig) -> set[str]:
    """Texts no neighbour list may hold in training or validation (``exclude_heldout_anchors``): the validation
    documents', so that none is trained on and no label is represented by the validation query that clicked it."""
    return {dataset.train_texts[i] for i in val} if cfg.exclude_heldout_anchors else set()


@dataclass
class Selection:
    """The validation documents with their truth over the label space, the per-epoch history and the best epoch."""

    rows: np.ndarray
    space: np.ndarray  # the label ids ranked
    truth: sp.csr_matrix
    exclude: np.ndarray  # (row position, space position) pairs never scored: a document's own label
    k: int
    select_best: bool
    history: list[dict[str, float]] = field(default_factory=list)
    best: dict[str, float] = field(default_factory=lambda: {"epoch": -1, "metric": float("-inf")})
    _state: list[dict[str, torch.Tensor]] | None = None

    @classmethod
    def of(cls, dataset: XCDataset, cfg: TrainConfig, rows: np.ndarray) -> Selection:
        from xc_core.training.trainer import validation_label_space

        space = validation_label_space(len(dataset.label_texts), dataset.y_train, rows, cfg)  # the trainer's space
        truth = sp.csr_matrix(sp.csr_matrix(dataset.y_train)[rows][:, space])
        return cls(rows, space, truth, dataset.own_label_pairs(rows, space), cfg.val_k, cfg.select_best)

    def metrics(self, docs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """recall@k, P@1 and P@5 of validation vectors ``docs`` against ``labels`` (the rows of ``space``)."""
        from xc_core.evaluation.metrics import precision_per_row
        from xc_core.training.trainer import recall_at_k, top_k_exact

        top = top_k_exact(docs, labels, max(self.k, 5), exclude=self.exclude)
        return {f"recall@{self.k}": recall_at_k(top[:, :self.k], self.truth),
                "P@1": float(precision_per_row(self.truth, top, 1).mean()),
                "P@5": float(precision_per_row(self.truth, top, 5).mean()) if top.shape[1] >= 5 else float("nan")}

    def record(self, epoch: int, metrics: dict[str, float], modules: Sequence[torch.nn.Module],
               **extra: float) -> dict[str, float]:
        """Append the epoch's record; keep the weights of ``modules`` when it is the best so far."""
        row = {"epoch": epoch, **extra, **{f"val_{k}": v for k, v in metrics.items()}}
        self.history.append(row)
        value = metrics[f"recall@{self.k}"]
        if self.select_best and value > self.best["metric"]:
            self.best = {"epoch": epoch, "metric": value}
            self._state = [{k: v.detach().cpu().clone() for k, v in m.state_dict().items()} for m in modules]
        return row

    def restore(self, modules: Sequence[torch.nn.Module]) -> None:
        """Load the selected epoch's weights (nothing to do when the last epoch won or selection is off)."""
        if self._state is not None and self.history and self.best["epoch"] != self.history[-1]["epoch"]:
            for module, state in zip(modules, self._state, strict=True):
                module.load_state_dict(state)

    @property
    def selected(self) -> dict[str, float]:
        """The kept epoch's record: the best one, or the last when selection is off."""
        return next((h for h in self.history if h["epoch"] == self.best["epoch"]),
                    self.history[-1] if self.history else {})

    def summary(self) -> dict[str, Any]:
        """What a train summary records beside the history: the selected epoch and its validation recall."""
        chosen = self.selected
        return {"selected_epoch": int(chosen.get("epoch", 0)),
                f"val_recall@{self.k}": float(chosen.get(f"val_recall@{self.k}", float("nan"))),
                "val_documents": len(self.rows)}


def mlflow_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """Metric names MLflow accepts (no ``@``), as :class:`~xc_core.methods.encoder.training.MlflowSink` writes them."""
    return {k.replace("@", "_at_"): float(v) for k, v in metrics.items()}
