"""Checkpoint selection on validation, one rule for the encoder trainer and the methods that train outside it
(TextGNN, OAK): "never worse than doing nothing".

:class:`EpochChoice` is the rule: every epoch's validation ranking is kept; the best epoch by recall@``val_k`` on the
validation rows is the candidate, and it is served only when the choice, cross-fitted over seeded folds of those rows,
beats epoch 0 — the untrained start — on all of them (:func:`~xc_core.evaluation.fallback.cross_fitted`: recall
interval above 0, P@1 and PSP@1 not lost significantly); otherwise epoch 0 is served and the decision says why.

:class:`Selection` applies it for TextGNN and OAK with the trainer's seeded validation split and subsample
(:func:`~xc_core.training.validation.validation_split`), its label space (``Trainer.val_label_space``) and its exact
search (a document's own labels excluded), keeping the candidate's and epoch 0's weights in memory. Only the
representation differs: each method passes its own validation document and label vectors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.fallback import Decision, FallbackPolicy, cross_fitted, row_folds
from xc_core.training.config import TrainConfig
from xc_core.training.validation import ValidationSplit


@dataclass
class EpochChoice:
    """The epoch to serve: the best on all validation rows, served only when the selection procedure beats epoch 0
    cross-fitted (:func:`~xc_core.evaluation.fallback.cross_fitted`: each fold's rows ranked by the epoch picked on
    the other folds), so every validation row tests and none is wasted on picking.

    ``truth``: validation rows × ranked labels; ``inv_propensity``: those labels' weights (PSP guard).
    ``within_guards``: the procedure picks only among epochs that lose no guard metric (``policy.guards``) to epoch
    0 in the point estimate on its picking rows (epoch 0 always qualifies), so a recall gain bought with the
    primary metric or the tail is not the candidate when an epoch without that loss exists.
    ``selection_metric``: the per-row mean metric the procedure picks on and the test requires a gain in (``P@1``),
    instead of recall@``k``."""

    truth: sp.csr_matrix
    inv_propensity: np.ndarray | None
    k: int
    policy: FallbackPolicy
    seed: int = 0
    within_guards: bool = False
    selection_metric: str | None = None
    tops: dict[int, np.ndarray] = field(default_factory=dict)  # epoch → each validation row's ranked labels
    best: dict[str, float] = field(default_factory=lambda: {"epoch": -1, "metric": float("-inf")})

    def __post_init__(self) -> None:
        self.truth = sp.csr_matrix(self.truth)
        self.folds = row_folds(self.truth.shape[0], self.policy.folds, self.seed)
        self._recall: dict[int, np.ndarray] = {}  # epoch → per-row selection metric (recall@k)
        self._guard_terms: dict[int, dict[str, np.ndarray]] = {}  # epoch → the guards' per-row terms

    @property
    def metric(self) -> str:
        return self.selection_metric or f"R@{self.k}"

    def _per_row(self, epoch: int) -> np.ndarray:
        from xc_core.evaluation.fallback import per_row
        from xc_core.evaluation.metrics import recall_per_row

        if epoch not in self._recall and self.selection_metric:
            self._recall[epoch] = per_row(self.selection_metric, self.truth, self.tops[epoch], None)[self.metric]
        elif epoch not in self._recall:
            self._recall[epoch] = recall_per_row(self.truth, self.tops[epoch][:, : self.k], self.k)
        return self._recall[epoch]

    def _guards(self, epoch: int) -> dict[str, np.ndarray]:
        from xc_core.evaluation.fallback import per_row

        if epoch not in self._guard_terms:
            top = self.tops[epoch]
            self._guard_terms[epoch] = {key: value for g in self.policy.guards
                                        if self.inv_propensity is not None or not g.startswith("PS")
                                        for key, value in per_row(g, self.truth, top, self.inv_propensity).items()}
        return self._guard_terms[epoch]

    def _qualifies(self, epoch: int, rows: np.ndarray) -> bool:
        """Whether the epoch loses no guard to epoch 0 on ``rows`` in the point estimate (a PSP guard is a ratio
        of sums over the rows, as the reports compute it)."""
        from xc_core.evaluation.seed_homes import metric_value

        if not self.within_guards or epoch == 0 or 0 not in self.tops or not len(rows):
            return True
        mine, start = ({key: value[rows] for key, value in self._guards(e).items()} for e in (epoch, 0))
        metrics = {key.split("/")[0] for key in start}
        return all(metric_value(mine, m) >= metric_value(start, m) for m in metrics)

    def select(self, rows: np.ndarray) -> int:
        """The epoch with the best mean recall on ``rows`` (the earliest of equals: the start wins ties), among
        those that lose no guard there when ``within_guards``."""
        return max((e for e in sorted(self.tops) if self._qualifies(e, rows)),
                   key=lambda e: (float(self._per_row(e)[rows].mean()) if len(rows) else 0.0, -e))

    def add(self, epoch: int, top: np.ndarray) -> bool:
        """Keep the epoch's ranking; True when it is the best on all validation rows so far (keep its weights):
        the candidate :meth:`decide` tests is the same procedure run on all rows."""
        self.tops[epoch] = np.asarray(top)
        self._recall.pop(epoch, None)
        self._guard_terms.pop(epoch, None)
        value = float(self._per_row(epoch).mean()) if len(top) else 0.0
        if value > self.best["metric"] and self._qualifies(epoch, np.arange(self.truth.shape[0])):
            self.best = {"epoch": epoch, "metric": value}
            return True
        return False

    def decide(self) -> Decision:
        """Serve the best epoch or epoch 0 (the fallback): :func:`cross_fitted` over the validation folds."""
        best = int(self.best["epoch"])
        n = self.truth.shape[0]
        if best <= 0 or 0 not in self.tops:
            return Decision("trained epoch", kept=False, reason="epoch 0 (the start) is best on the validation rows",
                            metric=self.metric, picked_on_rows=n, tested_on_rows=n, candidate={"epoch": max(best, 0)})
        decision, _ = cross_fitted("trained epoch", self.select, lambda e: self.tops[e], self.tops[0], self.truth,
                                   self.inv_propensity, self.metric, self.policy, self.folds,
                                   describe=lambda e: {"epoch": int(e)})
        return decision

    def arrays(self) -> dict[str, np.ndarray]:
        """The rankings as checkpoint arrays (``val_top/<epoch>``), so a resumed run decides on every epoch."""
        return {f"val_top/{epoch}": top for epoch, top in self.tops.items()}

    def restore(self, arrays: dict[str, np.ndarray], best: dict[str, float]) -> None:
        self.tops = {int(key.split("/")[1]): top for key, top in arrays.items() if key.startswith("val_top/")}
        self._recall, self._guard_terms = {}, {}
        self.best = dict(best)


def split(dataset: XCDataset, cfg: TrainConfig) -> ValidationSplit:
    """The trainer's validation split (:func:`~xc_core.training.validation.validation_split`) with its
    ``max_train_docs`` / ``train_share`` subsample; train rows without a label (in ``y_fit``) dropped (validation
    keeps them and scores them 0, as the trainer does)."""
    from xc_core.training.validation import train_subsample, validation_split

    found = validation_split(dataset, cfg).trained_before(cfg.train_before_day, dataset)
    train = train_subsample(found.train_rows, cfg)
    labelled = np.diff(sp.csr_matrix(found.y_fit).indptr) > 0
    return dataclasses.replace(found, train_rows=train[labelled[train]])


def fine_tuned_rows(dataset: XCDataset, cfg: TrainConfig, summary: dict[str, Any]) -> np.ndarray | None:
    """The training documents a served encoder was fine-tuned on (out-of-fold choices never score them: the encoder
    would look better on them than on any test query), or None when the encoder served is the untrained start
    (``pretrained``, or a fine-tune whose epoch 0 was served). ``summary``: the encoder's training record; where it
    served another method's encoder (``served_epochs``: ramen's text-only fallback), that encoder's epochs decide."""
    if "served_epochs" in summary:  # the encoder served is another method's (ramen's text-only fallback)
        summary = {"epochs": summary["served_epochs"], "selected_epoch": summary["served_selected_epoch"]}
    if not summary.get("epochs") or summary.get("selected_epoch", summary.get("epochs")) == 0:
        return None
    return split(dataset, cfg).train_rows


def heldout_texts(dataset: XCDataset, val: np.ndarray, cfg: TrainConfig) -> set[str]:
    """Texts no neighbour list may hold in training or validation (``exclude_heldout_anchors``): the validation
    documents', so that none is trained on and no label is represented by the validation query that clicked it."""
    return {dataset.train_texts[i] for i in val} if cfg.exclude_heldout_anchors else set()


@dataclass
class Selection:
    """The validation documents with their truth over the label space, the per-epoch history and the served epoch."""

    rows: np.ndarray
    space: np.ndarray  # the label ids ranked
    truth: sp.csr_matrix
    exclude: np.ndarray  # (row position, space position) pairs never scored: a document's own labels
    k: int
    select_best: bool
    choice: EpochChoice
    history: list[dict[str, float]] = field(default_factory=list)
    decision: Decision | None = None
    _state: list[dict[str, torch.Tensor]] | None = None  # the best epoch's weights (on the pick half)
    _start: list[dict[str, torch.Tensor]] | None = None  # epoch 0's: the fallback
    _top: np.ndarray | None = None  # the ranking of the last :meth:`metrics` call

    @classmethod
    def of(cls, dataset: XCDataset, cfg: TrainConfig, found: ValidationSplit) -> Selection:
        from xc_core.evaluation.metrics import propensity
        from xc_core.training.validation import validation_label_space

        rows = found.val_rows
        space = validation_label_space(len(dataset.label_texts), found.y_val, rows, cfg)  # the trainer's space
        truth = sp.csr_matrix(sp.csr_matrix(found.y_val)[rows][:, space])
        choice = EpochChoice(truth, propensity(dataset)[space], cfg.val_k, cfg.fallback, cfg.seed,
                             cfg.select_within_guards)
        return cls(rows, space, truth, dataset.own_label_pairs(rows, space), cfg.val_k, cfg.select_best, choice)

    @property
    def best(self) -> dict[str, float]:
        return self.choice.best

    def metrics(self, docs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """recall@k, P@1 and P@5 of validation vectors ``docs`` against ``labels`` (the rows of ``space``)."""
        from xc_core.evaluation.metrics import precision_per_row
        from xc_core.training.validation import recall_at_k, top_k_exact

        top = self._top = top_k_exact(docs, labels, max(self.k, 5), exclude=self.exclude)
        return {f"recall@{self.k}": recall_at_k(top[:, :self.k], self.truth),
                "P@1": float(precision_per_row(self.truth, top, 1).mean()),
                "P@5": float(precision_per_row(self.truth, top, 5).mean()) if top.shape[1] >= 5 else float("nan")}

    def record(self, epoch: int, metrics: dict[str, float], modules: Sequence[torch.nn.Module],
               **extra: float) -> dict[str, float]:
        """Append the epoch's record (the ranking of the last :meth:`metrics` call); keep the weights of ``modules``
        at epoch 0 and when the epoch is the best on the pick half so far."""
        row = {"epoch": epoch, **extra, **{f"val_{k}": v for k, v in metrics.items()}}
        self.history.append(row)
        if self.select_best and self._top is not None:
            state = None
            if self.choice.add(epoch, self._top):
                state = self._state = _copy(modules)
            if epoch == 0:
                self._start = state or _copy(modules)
        return row

    def restore(self, modules: Sequence[torch.nn.Module]) -> None:
        """Load the served epoch's weights: the best one when it beats epoch 0 out of sample, else epoch 0's."""
        if not self.select_best or not self.history:
            return
        self.decision = self.choice.decide()
        if not self.decision.kept:
            self.choice.best = {"epoch": 0, "metric": self.choice.best["metric"]}
        state = self._state if self.decision.kept else self._start
        if state is not None and self.best["epoch"] != self.history[-1]["epoch"]:
            for module, weights in zip(modules, state, strict=True):
                module.load_state_dict(weights)

    @property
    def selected(self) -> dict[str, float]:
        """The kept epoch's record: the served one, or the last when selection is off."""
        return next((h for h in self.history if h["epoch"] == self.best["epoch"]),
                    self.history[-1] if self.history else {})

    def summary(self) -> dict[str, Any]:
        """What a train summary records beside the history: the served epoch, its validation recall and the
        fallback test that decided it."""
        chosen = self.selected
        return {"selected_epoch": int(chosen.get("epoch", 0)),
                f"val_recall@{self.k}": float(chosen.get(f"val_recall@{self.k}", float("nan"))),
                "val_documents": len(self.rows),
                **({"fallback_test": self.decision.as_dict()} if self.decision is not None else {})}


def _copy(modules: Sequence[torch.nn.Module]) -> list[dict[str, torch.Tensor]]:
    return [{k: v.detach().cpu().clone() for k, v in m.state_dict().items()} for m in modules]


def mlflow_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """Metric names MLflow accepts (no ``@``), as :class:`~xc_core.methods.encoder.training.MlflowSink` writes them."""
    return {k.replace("@", "_at_"): float(v) for k, v in metrics.items()}
