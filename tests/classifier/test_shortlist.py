"""The fusion grid's top ranks: a partition instead of a full sort, with the full sort's order, ties included."""

from __future__ import annotations

import numpy as np

from xc_core.classifier.shortlist import best_first


def test_the_best_m_come_in_the_full_sorts_order_ties_by_the_lower_id() -> None:
    rng = np.random.default_rng(0)
    for _ in range(100):
        rows, width = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        score = rng.integers(0, 5, size=(rows, width)).astype(np.float32) / 4  # many equal scores
        score[rng.random((rows, width)) < 0.3] = -np.inf  # pads and own labels
        ids = np.stack([rng.permutation(500)[:width] for _ in range(rows)])
        for m in (1, 5, width):
            order = np.lexsort((ids, -score), axis=1)[:, :m]
            want = np.take_along_axis(score, order, axis=1)
            got_scores, got_ids = best_first(score, ids, m)
            assert np.array_equal(got_scores, want)
            assert np.array_equal(got_ids, np.where(np.isfinite(want), np.take_along_axis(ids, order, axis=1), -1))


def test_a_tie_at_the_cut_goes_to_the_lower_id() -> None:
    score = np.array([[0.5, 0.9, 0.5, 0.5]], np.float32)
    ids = np.array([[7, 3, 2, 9]])
    assert best_first(score, ids, 2)[1].tolist() == [[3, 2]]
    assert best_first(score, ids, 3)[1].tolist() == [[3, 2, 7]]
