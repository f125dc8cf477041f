"""Validation is built as the data set's test split is: the last days of an event log (training reads only the
clicks before them; rows in those days' own mix of repeated and new query texts, never the test's), held-out
documents elsewhere."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.training.config import TrainConfig
from xc_core.training.validation import validation_split


def test_an_event_log_validates_on_its_last_days_in_their_own_mix(tiny_data: XCDataset) -> None:
    found = validation_split(tiny_data, TrainConfig(val_fraction=0.2, val_max=60))
    assert found.kind == "temporal" and found.first_day is not None and len(found.val_rows) > 20
    days = tiny_data.train_pair_days
    fit_pairs = set(zip(*sp.csr_matrix(found.y_fit).nonzero(), strict=True))
    assert fit_pairs == {(d, j) for d, j, day in days.tolist() if day < found.first_day}  # never the last days
    window = {(d, j) for d, j, day in days.tolist() if day >= found.first_day}
    rows, cols = found.truth.nonzero()
    assert {(int(found.val_rows[r]), int(c)) for r, c in zip(rows, cols, strict=True)} == {
        (d, j) for d, j in window if d in set(found.val_rows.tolist())}
    inside = np.unique(days[days[:, 2] >= found.first_day, 0])
    assert set(found.val_rows.tolist()) <= set(inside.tolist())
    repeated, own = np.isin(found.val_rows, found.train_rows).mean(), np.isin(inside, found.train_rows).mean()
    assert abs(repeated - own) < 0.1 and 0 < repeated < 1  # a sample of the days' queries, as they come
    assert validation_split(tiny_data, TrainConfig(val_fraction=0.2, val_max=60, seed=1)).val_rows.tolist() != \
        found.val_rows.tolist()


def test_without_click_days_validation_is_held_out_documents(tiny_data: XCDataset) -> None:
    folder_like = dataclasses.replace(tiny_data, train_pair_days=np.empty((0, 3), np.int64))
    found = validation_split(folder_like, TrainConfig())
    assert found.kind == "documents" and not set(found.train_rows) & set(found.val_rows)
    assert found.y_fit is folder_like.y_train
    with pytest.raises(ValueError, match="only event-log data sets record"):
        validation_split(folder_like, TrainConfig(val_split="temporal"))


@pytest.mark.parametrize("kind", ["temporal", "documents"])
def test_the_holdout_view_keeps_nothing_the_validation_rows_are_scored_on(tiny_data: XCDataset, kind: str) -> None:
    """What the classifier stage fits on when the gate decides on validation (issue #64): no pair of the validation
    truth, no click day from the validation days, the training rows' labels as training may read them."""
    no_days = np.empty((0, 3), np.int64)
    data = tiny_data if kind == "temporal" else dataclasses.replace(tiny_data, train_pair_days=no_days)
    found = validation_split(data, TrainConfig(val_fraction=0.2, val_max=60))
    assert found.kind == kind
    view = found.holdout_view(data)
    held = sp.csr_matrix(view.y_train)
    rows, cols = found.truth.nonzero()
    scored = {(int(found.val_rows[r]), int(c)) for r, c in zip(rows, cols, strict=True)}
    kept = set(zip(*held.nonzero(), strict=True))
    fit = set(zip(*sp.csr_matrix(found.y_fit).nonzero(), strict=True))
    assert scored and kept <= fit and not (scored - fit) & kept
    if kind == "documents":  # a held-out document keeps no label at all
        assert not scored & kept
    train = sp.csr_matrix(found.y_fit)[found.train_rows]
    assert (held[found.train_rows] != train).nnz == 0  # the training rows keep what training reads
    assert set(np.unique(held.nonzero()[0]).tolist()) <= set(found.train_rows.tolist())
    if kind == "temporal":
        assert found.first_day is not None and len(view.train_pair_days)
        assert view.train_pair_days[:, 2].max() < found.first_day
    assert view.test_texts == data.test_texts and (view.y_test != data.y_test).nnz == 0  # the test is untouched


def test_validation_ranks_tied_labels_as_the_test_metrics_do() -> None:
    """Labels with the same text score exactly alike; the test's metrics rank such ties lower label id first, and
    so must every validation ranking (torch's top-k orders ties arbitrarily: validation P@1 would drift from test
    P@1 wherever texts repeat)."""
    import torch

    from xc_core.evaluation.metrics import evaluate, to_csr
    from xc_core.training.validation import top_k_exact

    rng = np.random.default_rng(0)
    labels = rng.normal(size=(3000, 16)).astype(np.float32)
    labels[1000:1600] = labels[:600]  # 600 labels share their text with a lower id
    docs = rng.normal(size=(1500, 16)).astype(np.float32)
    top = top_k_exact(docs, labels, 10)
    scores = (torch.from_numpy(docs) @ torch.from_numpy(labels).T).numpy()
    by_score_then_id = np.lexsort((np.broadcast_to(np.arange(3000), scores.shape), -scores), axis=1)[:, :10]
    assert np.array_equal(top, by_score_then_id)
    tied = np.isclose(scores[np.arange(1500), top[:, 0]], scores[np.arange(1500), top[:, 1]], rtol=0, atol=0)
    assert tied.sum() > 100 and (top[tied, 0] < top[tied, 1]).all()
    # the test's P@1 of the same ranking, through the evaluation's own top-k, agrees row for row
    truth = sp.csr_matrix((np.ones(1500), (np.arange(1500), np.where(tied, top[:, 0], top[:, 1]))), shape=(1500, 3000))
    full = to_csr(np.take_along_axis(scores, top, axis=1), top, 3000)
    assert evaluate(truth, full, k=1)["P@1"] == pytest.approx(float(np.mean(truth[np.arange(1500), top[:, 0]])))
