"""How often a training pair was clicked, as the weight of drawing it as its document's positive.

A batch gives each document one positive label. Drawn uniformly, a label a query clicked on one day counts as much
as one it clicked on every day of the window, though the latter is what the query will most likely click next (the
click memory of the classifier stage reads those counts; the encoder's binary targets did not). ``click_days``
weights each known pair by the number of days it was clicked before the validation days
(:meth:`XCDataset.click_days`; 1 for a pair without a recorded day: a method's own pair, or an XC folder, where every
weight is then 1 and the draw is uniform)."""

from __future__ import annotations

import numpy as np

from xc_core.datasets.container import XCDataset


def click_day_weights(dataset: XCDataset, before_day: int | None) -> np.ndarray:
    """One weight per stored entry of ``dataset.y_train`` (aligned with its ``data``): the days before ``before_day``
    (None: every day) on which that pair was clicked, at least 1. Reads no day on or after ``before_day``, so
    validation clicks never weigh a training draw."""
    y = dataset.y_train
    rows = np.repeat(np.arange(y.shape[0]), np.diff(y.indptr))
    found = np.asarray(dataset.click_days(before_day)[rows, y.indices], dtype=np.float64).ravel()
    return np.maximum(found, 1.0)
