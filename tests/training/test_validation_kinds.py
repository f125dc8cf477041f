"""Validation is built as the data set's test split is: the last days of an event log (training reads only the
clicks before them; rows in the test's mix of repeated and new query texts), held-out documents elsewhere."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.training.config import TrainConfig
from xc_core.training.validation import validation_split


def test_an_event_log_validates_on_its_last_days_in_the_tests_mix(tiny_data: XCDataset) -> None:
    found = validation_split(tiny_data, TrainConfig(val_fraction=0.2, val_max=60))
    assert found.kind == "temporal" and found.first_day is not None and len(found.val_rows) > 20
    days = tiny_data.train_pair_days
    fit_pairs = set(zip(*sp.csr_matrix(found.y_fit).nonzero(), strict=True))
    assert fit_pairs == {(d, j) for d, j, day in days.tolist() if day < found.first_day}  # never the last days
    window = {(d, j) for d, j, day in days.tolist() if day >= found.first_day}
    rows, cols = found.truth.nonzero()
    assert {(int(found.val_rows[r]), int(c)) for r, c in zip(rows, cols, strict=True)} == {
        (d, j) for d, j in window if d in set(found.val_rows.tolist())}
    repeated = np.isin(found.val_rows, found.train_rows).mean()
    assert abs(repeated - (1 - tiny_data.test_novel.mean())) < 0.05 and 0 < repeated < 1
    assert validation_split(tiny_data, TrainConfig(val_fraction=0.2, val_max=60, seed=1)).val_rows.tolist() != \
        found.val_rows.tolist()


def test_without_click_days_validation_is_held_out_documents(tiny_data: XCDataset) -> None:
    folder_like = dataclasses.replace(tiny_data, train_pair_days=np.empty((0, 3), np.int64))
    found = validation_split(folder_like, TrainConfig())
    assert found.kind == "documents" and not set(found.train_rows) & set(found.val_rows)
    assert found.y_fit is folder_like.y_train
    with pytest.raises(ValueError, match="only event-log data sets record"):
        validation_split(folder_like, TrainConfig(val_split="temporal"))
