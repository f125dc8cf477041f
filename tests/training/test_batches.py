"""Batching invariants: every row has its positive, and no true positive or own anchor is a negative."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xc_core.datasets.container import XCDataset
from xc_core.training.batches import BatchBuilder
from xc_core.training.clusters import balanced_kmeans, cluster_batches, cluster_size_at


def test_rows_carry_a_true_positive_and_masks_cover_every_false_negative(tiny_data: XCDataset) -> None:
    sets = list(tiny_data.anchor_sets)
    builder = BatchBuilder.from_anchor_sets(tiny_data.train_texts, tiny_data.label_texts, tiny_data.y_train,
                                            tiny_data.anchor_sets, sets, sets)
    rng = np.random.default_rng(0)
    for _ in range(5):
        ids = rng.choice(len(tiny_data.train_texts), 32, replace=False)
        batch = builder.build(ids, rng)
        y = tiny_data.y_train
        assert all(y[d, j] for d, j in zip(batch.doc_ids, batch.label_ids, strict=True))
        truth = y[batch.doc_ids][:, batch.label_ids].toarray() > 0
        same = np.array([[d == lab for lab in batch.label_texts] for d in batch.doc_texts])
        assert np.array_equal(batch.positive_mask, truth | same | np.eye(len(ids), dtype=bool))
        for name, side in batch.doc_anchors.items():
            incidence = tiny_data.anchor_sets[name].doc_matrix(len(tiny_data.train_texts))
            texts = tiny_data.anchor_sets[name].texts
            for i, d in enumerate(batch.doc_ids):
                own = {texts[a] for a in incidence[d].indices}
                if side.valid[i]:
                    assert side.texts[i] in own
                for j in np.flatnonzero(side.valid):
                    if j != i and side.texts[j] in own:
                        assert side.neighbour_mask[i, j]  # an own anchor is never pushed away


def test_balanced_kmeans_clusters_have_equal_sizes_and_batches_keep_clusters_whole() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(103, 8))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    assign = balanced_kmeans(x, cluster_size=10, seed=0)
    sizes = np.bincount(assign)
    assert sizes.max() <= 10 and sizes.sum() == 103 and len(sizes) == 11
    batches = cluster_batches(assign, batch_size=20, rng=rng)
    assert sorted(np.concatenate(batches).tolist()) == list(range(103))
    assert cluster_size_at(0, 8, 25, 64) == 8 and cluster_size_at(25, 8, 25, 64) == 16
    assert cluster_size_at(200, 8, 25, 64) == 64


def test_a_text_identical_to_the_row_own_text_is_never_a_negative() -> None:
    import scipy.sparse as sp

    from xc_core.datasets.container import AnchorSet

    # doc 0 "jupiter" has label 1 ("saturn"); doc 1 "saturn" has label 0 ("jupiter"): each row's label is the
    # other row's own text, and each row's anchor is the other row's text too.
    docs, labels = ["jupiter", "saturn"], ["jupiter", "saturn"]
    y = sp.csr_matrix(np.array([[0, 1], [1, 0]], dtype=np.float32))
    anchors = AnchorSet("links", ["saturn", "jupiter"], doc_edges=np.array([(0, 0), (1, 1)]),
                        label_edges=np.empty((0, 2), np.int64))
    builder = BatchBuilder.from_anchor_sets(docs, labels, y, {"links": anchors}, ["links"], [])
    batch = builder.build(np.array([0, 1]), np.random.default_rng(0))
    # Row 1's label "jupiter" is doc 0 itself, row 0's label "saturn" is doc 1: neither is a negative.
    assert batch.label_texts == ["saturn", "jupiter"] and batch.positive_mask.all()
    side = batch.doc_anchors["links"]
    assert side.neighbour_mask[0, 1] and side.neighbour_mask[1, 0]


def test_positives_drawn_by_click_days_favour_the_pairs_clicked_most_and_read_no_later_day() -> None:
    import scipy.sparse as sp

    from xc_core.training.batches import _pick
    from xc_core.training.positives import click_day_weights

    # document 0 clicked label 1 on days 0-5 and label 2 on day 1; document 1 clicked label 0 on day 9 only
    days = np.array([[0, 1, d] for d in range(6)] + [[0, 2, 1], [1, 0, 9], [1, 3, 2]])
    y = sp.csr_matrix((np.ones(4), ([0, 0, 1, 1], [1, 2, 0, 3])), shape=(2, 4))
    data = XCDataset(name="days", train_texts=["a", "b"], test_texts=["a"], label_texts=["w", "x", "y", "z"],
                     y_train=y, y_test=sp.csr_matrix((1, 4)), train_pair_days=days)
    np.testing.assert_array_equal(click_day_weights(data, None), [6, 1, 1, 1])
    # days on or after the cut-off (the validation days) weigh nothing; a pair left without a day weighs 1
    np.testing.assert_array_equal(click_day_weights(data, 3), [3, 1, 1, 1])
    rows = np.zeros(7000, dtype=np.int64)
    drawn = _pick(y, rows, np.random.default_rng(0), click_day_weights(data, None))
    assert abs((drawn == 1).mean() - 6 / 7) < 0.02 and set(drawn) == {1, 2}
    # equal weights draw exactly what the uniform draw draws, row for row
    every = np.arange(2).repeat(500)
    np.testing.assert_array_equal(_pick(y, every, np.random.default_rng(1), np.ones(y.nnz)),
                                  _pick(y, every, np.random.default_rng(1)))


def test_graded_positives_let_a_row_push_away_only_its_less_clicked_labels() -> None:
    import scipy.sparse as sp

    # documents 0 and 1 both clicked labels 0 and 1: document 0 label 0 on 5 days and label 1 on 1; document 1 the
    # other way round. A batch of the two where each drew its most clicked label (0 for row 0, 1 for row 1)
    y = sp.csr_matrix(np.ones((2, 2), np.float32))
    weights = np.array([5.0, 1.0, 1.0, 5.0])  # aligned with y.data: (0,0) (0,1) (1,0) (1,1)
    texts = ["query a", "query b"]
    labels = ["label x", "label y"]
    graded = BatchBuilder(texts, labels, y, {}, {}, positive_weights=weights, graded=True)
    plain = BatchBuilder(texts, labels, y, {}, {}, positive_weights=weights)
    docs, drawn = np.array([0, 1]), np.array([0, 1])
    # plain: every known label is masked; graded: a row's less clicked known label is its negative
    np.testing.assert_array_equal(plain._known(docs, drawn), [[True, True], [True, True]])
    np.testing.assert_array_equal(graded._known(docs, drawn), [[True, False], [False, True]])
    # a row that drew its less clicked label keeps the more clicked one masked (never pushed away)
    np.testing.assert_array_equal(graded._known(docs, np.array([1, 0])), [[True, True], [True, True]])


def test_graded_positives_without_click_day_weights_is_a_clear_error(tiny_data: XCDataset, tiny_home: Path,
                                                                      tmp_path: Path) -> None:
    import pytest

    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    cfg = profile.train.model_copy(update={"graded_positives": True})  # positive_weights stays "uniform"
    with pytest.raises(ValueError, match="graded_positives.*positive_weights='click_days'"):
        Trainer(tiny_data, encoder_config(profile, tiny_home), cfg, tmp_path / "refused")
