"""The validation rows every trainer and selection shares: the split of the training documents, the label space they
are scored in, exact top-k search and recall — below the trainer and the checkpoint selection, which both use them.

Validation is built as the data set's test split is, by :func:`validation_split`:

- **documents** (XC folders, wikispeedia: a test document was never trained on): a seeded share of the training
  documents, held out of training entirely (:func:`split_validation`);
- **temporal** (event logs, which record each training click's day): the last days of the training window. The
  queries clicked in those days are the validation rows, scored against what they clicked then; training sees only
  the clicks before them — so a query asked before is a *repeated* query, trained on with its earlier clicks, and a
  query first asked in those days is new. The rows are a seeded sample of those days' queries in the mix of
  repeated and new texts the days themselves hold: the training window's own stand-in for the period after it.
  Nothing here reads the test split — the test period's make-up is not known when a model ships, and
  a selection steered by it (the former "test mix": synthetic 89% repeated, aol-1000 13%) is tuned to the test.

Both are sized for power, not a fixed 5%: the share ``val_fraction`` with a floor (``val_min`` rows, at most
``val_min_share`` of the documents) and a cap (``val_max``). A model records the settings that fix its split
(:func:`split_record`), and everything that rebuilds the split later reads them from the model, never the profile."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import scipy.sparse as sp

from xc_core import seeds
from xc_core.seeds import Stream
from xc_core.training.config import TrainConfig

if TYPE_CHECKING:
    from xc_core.datasets.container import XCDataset

#: the TrainConfig fields that fix a model's validation rows: recorded with every trained model (``validation_split``
#: in its record), read back by ``xc eval --split validation``, IRENE and the classifier stage
SPLIT_FIELDS = ("seed", "val_split", "val_fraction", "val_min", "val_min_share", "val_max", "val_from_unused",
                "max_train_docs", "train_share", "train_before_day")


def train_subsample(rows: np.ndarray, cfg: TrainConfig) -> np.ndarray:
    """The training rows an encoder trains on: a seeded subsample of ``rows`` of at most ``max_train_docs`` and
    ``train_share`` of them (sorted), or all of them."""
    cap = len(rows) if cfg.max_train_docs is None else min(len(rows), cfg.max_train_docs)
    cap = min(cap, int(round(cfg.train_share * len(rows))))
    if cap >= len(rows):
        return rows
    keep = seeds.rng(cfg.seed, Stream.TRAIN_SUBSAMPLE).choice(len(rows), cap, replace=False)
    return np.sort(rows[keep])


class SplitSettingsMissing(LookupError, ValueError):
    """A model trained before its validation settings were recorded (the CLI prints one line and exits 2)."""


def split_record(cfg: TrainConfig) -> dict[str, Any]:
    """The settings of ``cfg`` that fix the validation split, as a model records them."""
    return {key: getattr(cfg, key) for key in SPLIT_FIELDS}


def recorded_split_config(record: dict[str, Any], what: str) -> TrainConfig:
    """The TrainConfig a model's validation rows were drawn with, from its record; refused in one line without it."""
    settings = record.get("validation_split")
    if not settings:
        raise SplitSettingsMissing(f"{what}: this model was trained before xc recorded its validation settings, so its "
                                   "validation rows cannot be rebuilt — retrain it (`xc train`) and try again")
    return TrainConfig(**settings)


@dataclass
class ValidationSplit:
    """Training rows, validation rows and what each is scored against.

    ``y_fit``: the labels training may read (documents kind: the data set's ``y_train``; temporal: only the clicks
    before the validation days). ``y_val``: the validation rows' truth, a documents × labels matrix read at
    ``val_rows`` (documents: ``y_train``; temporal: the clicks in the validation days)."""

    kind: Literal["documents", "temporal"]
    train_rows: np.ndarray
    val_rows: np.ndarray
    y_fit: sp.csr_matrix
    y_val: sp.csr_matrix
    first_day: int | None = None  # temporal: the first validation day (days from the window's start)

    def fit_view(self, dataset: XCDataset) -> XCDataset:
        """``dataset`` as training may see it: its ``y_train`` replaced by ``y_fit`` (the same object otherwise)."""
        if self.y_fit is dataset.y_train:
            return dataset
        return replace(dataset, y_train=self.y_fit)

    def holdout_view(self, dataset: XCDataset) -> XCDataset:
        """``dataset`` with nothing its validation rows are scored on: the labels of :meth:`fit_view` on the
        training rows only (a documents split's validation rows keep no label; a temporal split's keep their clicks
        before the validation days) and the click days before those days. Rows keep their indices, so a stage that
        fits on this view (the classifier stage) can be scored on the validation rows out of sample — the promotion
        split the gate decides on."""
        keep = np.zeros(len(dataset.train_texts), dtype=bool)
        keep[self.train_rows] = True
        labels = sp.diags(keep.astype(np.float32)) @ sp.csr_matrix(self.y_fit)
        labels = sp.csr_matrix(labels)
        labels.eliminate_zeros()
        days = dataset.train_pair_days
        kept_days = keep[days[:, 0]] if len(days) else np.zeros(0, dtype=bool)
        if self.first_day is not None and len(days):
            kept_days &= days[:, 2] < self.first_day
        return replace(dataset, y_train=labels, train_pair_days=days[kept_days])

    def trained_before(self, day: int | None, dataset: XCDataset) -> ValidationSplit:
        """This split with training limited to the clicks before ``day`` of the window (a temporal split; None or a
        documents split: the split itself). A pair first clicked on or after ``day`` is not trained on and a row
        left without a pair is no training row; a pair without a click day (one a method added) stays. The
        validation rows and their truth do not change. The encoder of the CPU profiles trains so on event logs
        (``TrainConfig.stage_cutoff``): the classifier stage's out-of-fold blocks then lie after everything it
        trained on, and the stage can score every query of a block as the test period meets it."""
        if day is None or self.kind != "temporal" or (self.first_day is not None and day >= self.first_day):
            return self
        days = dataset.train_pair_days
        shape = self.y_fit.shape
        later = binary_pairs(days[days[:, 2] >= day], shape)
        later_only = (later - later.multiply(binary_pairs(days[days[:, 2] < day], shape))).tocsr()
        y_fit = sp.csr_matrix(self.y_fit - sp.csr_matrix(self.y_fit).multiply(later_only))
        y_fit.eliminate_zeros()
        labelled = np.diff(y_fit.indptr) > 0
        return replace(self, train_rows=self.train_rows[labelled[self.train_rows]], y_fit=y_fit)

    @property
    def truth(self) -> sp.csr_matrix:
        """The validation rows' truth, one row each."""
        return sp.csr_matrix(self.y_val[self.val_rows])


def validation_split(dataset: XCDataset, cfg: TrainConfig) -> ValidationSplit:
    """The split of the module docstring for ``dataset``'s kind (``cfg.val_split``: auto = temporal where the data set
    records click days, documents elsewhere)."""
    kind = cfg.val_split
    if kind == "temporal" and not len(dataset.train_pair_days):
        raise ValueError(f"{dataset.name}: a temporal validation split needs click days (train_pair_days), which "
                         "only event-log data sets record: set val_split to 'documents' or rebuild the data set")
    if kind == "auto":
        kind = "temporal" if len(dataset.train_pair_days) else "documents"
    y = sp.csr_matrix(dataset.y_train)
    if kind == "temporal":
        found = _temporal(dataset, y, cfg)
        if found is not None:
            return found
    train, val = split_validation(len(dataset.train_texts), cfg)
    return ValidationSplit("documents", train, val, dataset.y_train, y)


def _validation_size(n: int, cfg: TrainConfig) -> int:
    floor = min(cfg.val_min, int(n * cfg.val_min_share))  # sized for power where the data allows
    return int(min(cfg.val_max, max(10, round(n * cfg.val_fraction), floor)))


def _temporal(dataset: XCDataset, y: sp.csr_matrix, cfg: TrainConfig) -> ValidationSplit | None:
    """The last days of the window that hold the validation size of queries (at most the window's second half), a
    seeded sample of their queries in the days' own mix of repeated and new texts; None when the window has no
    earlier day to train on. Reads the training window only."""
    days = dataset.train_pair_days
    n_days = int(days[:, 2].max()) + 1
    target = _validation_size(len(dataset.train_texts), cfg)
    first, lowest = n_days - 1, max(1, n_days // 2)  # at most the window's second half validates
    while first > lowest and len(np.unique(days[days[:, 2] >= first, 0])) < target:
        first -= 1
    if first < 1:
        return None
    inside = np.unique(days[days[:, 2] >= first, 0])
    rng = seeds.rng(cfg.seed, Stream.VALIDATION_SPLIT)
    val = np.sort(rng.choice(inside, min(target, len(inside)), replace=False))
    before, inside_pairs = days[days[:, 2] < first], days[days[:, 2] >= first]
    y_val = binary_pairs(inside_pairs, y.shape)
    # training keeps every pair of y_train but those first clicked in the validation days; a method that added
    # pairs of its own (AugGT) keeps them, as they have no click day
    window_only = (y_val - y_val.multiply(binary_pairs(before, y.shape))).tocsr()
    y_fit = (y - y.multiply(window_only)).tocsr()
    y_fit.eliminate_zeros()
    y_fit.data[:] = 1.0
    train = np.flatnonzero(np.diff(y_fit.indptr) > 0)
    return ValidationSplit("temporal", train, val, y_fit, y_val, first)


def binary_pairs(pairs: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """The 0/1 documents × labels matrix of ``pairs`` (document, label[, anything else])."""
    m = sp.csr_matrix((np.ones(len(pairs), np.float32), (pairs[:, 0], pairs[:, 1])), shape=shape)
    m.sum_duplicates()
    m.data[:] = 1.0
    return m


def split_validation(n: int, cfg: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (train, validation) split of the train documents (the documents kind); validation is held out of
    training."""
    rng = seeds.rng(cfg.seed, Stream.VALIDATION_SPLIT)
    order = rng.permutation(n)
    n_val = _validation_size(n, cfg)
    if cfg.val_from_unused and cfg.max_train_docs is not None:
        # documents the seeded subsample would never train on validate instead, up to val_max
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
    """(n_docs, min(k, n_labels)) indices of each document's best-scored labels, best first (exact search), ties
    broken by the lower label index as the test's metrics break them (``evaluation/metrics.py``): labels with the
    same text score exactly the same, and torch's top-k orders such ties arbitrarily — on synthetic, where 42% of
    the untrained encoder's test queries have a tied first label, validation P@1 would then differ from test P@1.
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
        out.append(_top_k_lower_index_first(scores, k))
    return np.concatenate(out) if out else np.zeros((0, k), np.int64)


def _top_k_lower_index_first(scores: Any, k: int) -> np.ndarray:
    """Each row's ``k`` best columns of a torch score matrix, best first, equal scores in ascending column order:
    every column scoring at least the row's k-th best is a candidate (``nonzero`` lists them row by row in column
    order), sorted by score with a stable sort."""
    import torch

    if k == 0:
        return np.zeros((len(scores), 0), np.int64)
    kth = torch.topk(scores, k, dim=1).values[:, -1:]
    rows, cols = torch.nonzero(scores >= kth, as_tuple=True)
    rows_np, cols_np = rows.numpy(), cols.numpy()
    order = np.lexsort((cols_np, -scores[rows, cols].numpy(), rows_np))
    rows_np, cols_np = rows_np[order], cols_np[order]
    starts = np.searchsorted(rows_np, np.arange(len(scores)))
    return cols_np[starts[:, None] + np.arange(k)].astype(np.int64)


def recall_at_k(top: np.ndarray, y: sp.csr_matrix) -> float:
    """Mean over documents of |top ∩ positives| / |positives| (rows without positives → 0)."""
    from xc_core.evaluation.metrics import recall_per_row

    return float(recall_per_row(y, top, top.shape[1]).mean()) if len(top) else 0.0
