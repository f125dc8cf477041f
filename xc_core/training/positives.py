"""How often a training pair was clicked, as the weight of drawing it as its document's positive.

A batch gives each document one positive label. Drawn uniformly, a label a query clicked on one day counts as much
as one it clicked on every day of the window, though the latter is what the query will most likely click next (the
click memory of the classifier stage reads those counts; the encoder's binary targets did not). ``click_days``
weights each known pair by the number of distinct days it was clicked before the validation days (1 for a pair
without a recorded day: a method's own pair, or an XC folder, where every weight is then 1 and the draw is
uniform)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def click_day_weights(y: sp.csr_matrix, pair_days: np.ndarray, before_day: int | None) -> np.ndarray:
    """One weight per stored entry of ``y`` (aligned with ``y.data``): the number of distinct days in ``pair_days``
    (rows ``(document, label, day)``) before ``before_day`` (None: every day) on which that pair was clicked, at least
    1. Reads no day on or after ``before_day``, so validation clicks never weigh a training draw."""
    y = sp.csr_matrix(y)
    days = pair_days if before_day is None or not len(pair_days) else pair_days[pair_days[:, 2] < before_day]
    weights = np.ones(y.nnz, dtype=np.float64)
    if not len(days):
        return weights
    distinct = np.unique(days[:, :3], axis=0)  # one click day per pair and day
    counts = sp.csr_matrix((np.ones(len(distinct)), (distinct[:, 0], distinct[:, 1])), shape=y.shape)
    counts.sum_duplicates()
    rows = np.repeat(np.arange(y.shape[0]), np.diff(y.indptr))
    found = np.asarray(counts[rows, y.indices]).ravel()
    return np.maximum(found, 1.0)
