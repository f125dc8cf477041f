"""Out-of-fold rows for the classifier stage: every scored training document is ranked by a W (and a lexical
channel) refit without it, so the fusion is chosen and tested on thousands of rows instead of a small validation
split.

Folds follow the data set's split kind, so a validation row meets the model as a test query does:

- **temporal** (event logs: the data set carries ``train_pair_days``): rolling origin. The last ``temporal_span`` of
  the training window is cut into ``time_blocks`` blocks of days; for a block, W is refit on the clicks *before* it, and
  the queries clicked in the block are scored against the labels clicked in the block. A query text asked before
  the block has its own row in that W, as a repeated query meets W in the test period; a query first asked in the
  block is novel to it. Document folds would make every scored row novel to W — the mismatch that kept every
  ``-clf`` of the event-log sets on its fallback.
  Sized for power: while the blocks score fewer than ``min_rows`` rows, one more block of the same width is added
  before the first (up to ``max_blocks``, and only while the first block's W still fits on at least a third of the
  window's days). A small log, or a fine-tuned encoder whose own training queries are never scored, otherwise tests
  its fusion on too few rows to see a gain of 2 points.
- **documents** (XC folders, wikispeedia: a test document is a document never trained on): ``folds`` seeded
  folds of the labelled training documents; W is refit on the other folds.

Rows the encoder itself trained on (a fine-tuned base's training documents) are never scored: the encoder would
look better on them than on any test query. Each fold scores at most ``max_rows / <number of folds>`` seeded rows
(the cost of the fusion grid; the refits see all their rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from xc_core import seeds
from xc_core.datasets.container import XCDataset
from xc_core.seeds import Stream
from xc_core.training.validation import binary_pairs

FoldKind = Literal["auto", "temporal", "documents"]


@dataclass
class Fold:
    """One refit: W is trained on ``y_fit[fit_rows]``; ``score_rows`` are ranked against ``truth`` (one row each)."""

    name: str  # "days 42-47" or "fold 2/3"
    fit_rows: np.ndarray
    y_fit: sp.csr_matrix  # all training documents × labels (only ``fit_rows`` are read)
    score_rows: np.ndarray
    truth: sp.csr_matrix  # len(score_rows) × labels
    # all training documents × labels: click days before the block (memory.py; only ``fit_rows`` are read); None: each
    # pair of ``y_fit`` counts once
    clicks: sp.csr_matrix | None = None
    #: how the fold was cut: a block of days (rolling origin) or a document fold — an event log whose window is too
    #: short for its blocks (e.g. once the validation days are held out) gets document folds
    kind: Literal["temporal", "documents"] = "documents"
    #: a block of days: its first day (days from the window's start); None for a document fold
    first_day: int | None = None

    @property
    def fit_clicks(self) -> sp.csr_matrix:
        """The fit rows' click days (their 0/1 labels where the fold records none)."""
        return sp.csr_matrix((self.y_fit if self.clicks is None else self.clicks)[self.fit_rows], dtype=np.float32)

    @property
    def untrained(self) -> np.ndarray:
        """Labels without a positive in this fold's fit rows (they keep their text vector in W)."""
        return np.diff(sp.csr_matrix(self.y_fit[self.fit_rows]).tocsc().indptr) == 0

    @property
    def label_bins(self) -> np.ndarray:
        """Each label's frequency bin over this fold's fit rows (``label_quantiles``: 0 = tail), as the test's bins
        are over the training documents W is fit on: the tail guard and the tail offset read them."""
        from xc_core.evaluation.analyses import label_quantiles

        return label_quantiles(sp.csr_matrix(self.y_fit[self.fit_rows]))


def fold_kind(dataset: XCDataset, kind: FoldKind = "auto") -> Literal["temporal", "documents"]:
    """``auto``: temporal when the data set records click days (event logs), else documents."""
    if kind == "temporal" and not len(dataset.train_pair_days):
        raise ValueError(f"{dataset.name}: temporal folds need click days (train_pair_days), which only event-log "
                         "data sets record: use fold_kind 'documents', or rebuild the data set with `xc dataset`")
    if kind != "auto":
        return kind
    return "temporal" if len(dataset.train_pair_days) else "documents"


def out_of_fold(dataset: XCDataset, folds: int, max_rows: int, seed: int, kind: FoldKind = "auto",
                temporal_span: float = 0.3, never_score: np.ndarray | None = None, time_blocks: int = 4,
                min_rows: int = 0, max_blocks: int | None = None) -> list[Fold]:
    """The folds of the module docstring for ``dataset``'s kind (see :func:`fold_kind`).

    Args:
        dataset: the training documents to split (their click days decide temporal blocks).
        folds: document folds, when the folds are by document.
        max_rows: the most rows a fold scores (a seeded sample of its rows).
        seed: the seed of the sample and the document permutation.
        kind: ``"temporal"``, ``"documents"`` or ``"auto"`` (temporal when the data set has click days).
        temporal_span: the share of the window's last days the blocks cover.
        never_score: training rows no fold may score (e.g. the validation rows a model is selected on).
        time_blocks: the blocks of days to start with.
        min_rows: add a block of the same width before the first while the blocks score fewer rows than this.
        max_blocks: the most blocks that adding may reach (None: no cap).

    Returns:
        The folds, each with its fit rows, scored rows and their truth; document folds when the window has too few
        days for blocks.

    Raises:
        ValueError: ``kind="temporal"`` for a data set without click days.
    """
    never = np.zeros(len(dataset.train_texts), bool)
    if never_score is not None:
        never[np.asarray(never_score, np.int64)] = True
    if fold_kind(dataset, kind) == "temporal":
        found = _powered_blocks(dataset, time_blocks, temporal_span, max_rows, seed, never, min_rows, max_blocks)
        if found:
            return found
    return document_folds(dataset, folds, max_rows, seed, never)


def document_folds(dataset: XCDataset, folds: int, max_rows: int, seed: int, never: np.ndarray) -> list[Fold]:
    y = sp.csr_matrix(dataset.y_train)
    labelled = np.flatnonzero(np.diff(y.indptr) > 0)
    order = seeds.rng(seed, Stream.CLASSIFIER_FOLDS).permutation(labelled)
    clicks = dataset.click_days()
    parts = [np.sort(order[i::folds]) for i in range(folds)]
    out = []
    for i, part in enumerate(parts):
        rows = _sample(part[~never[part]], max_rows // folds, seed, i)
        out.append(Fold(f"fold {i + 1}/{folds}", np.setdiff1d(labelled, part), y, rows, y[rows], clicks))
    return out


def _powered_blocks(dataset: XCDataset, blocks: int, span: float, max_rows: int, seed: int, never: np.ndarray,
                    min_rows: int, max_blocks: int | None) -> list[Fold]:
    """``blocks`` blocks over the last ``span`` of the window, then one more of the same width before the first while
    they score fewer than ``min_rows`` rows (see the module docstring); [] when the window has too few days."""
    n_days = int(dataset.train_pair_days[:, 2].max()) + 1
    width = max(1, round(n_days * span / blocks))
    if n_days < blocks * width + 1:  # not one day left to fit the first block on
        return []
    found = temporal_folds(dataset, blocks, width, max_rows, seed, never)
    while (sum(len(f.score_rows) for f in found) < min_rows and len(found) < (max_blocks or 0)
           and 3 * (n_days - (len(found) + 1) * width) >= n_days):  # the first W keeps a third of the window
        found = temporal_folds(dataset, len(found) + 1, width, max_rows, seed, never)
    return found


def temporal_folds(dataset: XCDataset, folds: int, width: int, max_rows: int, seed: int,
                   never: np.ndarray) -> list[Fold]:
    """Rolling-origin: the last ``folds`` blocks of ``width`` days each, every one scored by a W fit on the days
    before it."""
    days = dataset.train_pair_days
    n_days = int(days[:, 2].max()) + 1
    starts = [n_days - (folds - i) * width for i in range(folds)]
    shape = dataset.y_train.shape
    out = []
    for i, start in enumerate(starts):
        before, inside = days[days[:, 2] < start], days[(days[:, 2] >= start) & (days[:, 2] < start + width)]
        y_fit = binary_pairs(before, shape)
        candidates = np.unique(inside[:, 0])
        # the block's own mix of repeated and new queries: never the test period's
        rows = _sample(candidates[~never[candidates]], max_rows // folds, seed, i)
        truth = binary_pairs(inside, shape)[rows]
        out.append(Fold(f"days {start}-{start + width - 1}", np.flatnonzero(np.diff(y_fit.indptr) > 0), y_fit,
                        rows, truth, dataset.click_days(before_day=start), "temporal", start))
    return out


def _sample(rows: np.ndarray, limit: int, seed: int, fold: int) -> np.ndarray:
    if len(rows) <= limit:
        return rows
    return np.sort(seeds.rng(seed, Stream.CLASSIFIER_FOLDS, fold).choice(rows, limit, replace=False))
