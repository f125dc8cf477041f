"""Rankings compared up to ties (``index/ties.py``): labels with equal scores may swap places, anything else may not."""

from __future__ import annotations

import numpy as np

from xc_core.index.ties import TIE, rankings_agree

#: one query; labels 7 and 3 are copies of one text (one vector, one score), 5 and 9 tie at the end of the list
SCORES = np.array([[0.9, 0.9, 0.8, 0.7, 0.7]], dtype=np.float32)
IDS = np.array([[7, 3, 4, 5, 9]])


def _agrees(scores: np.ndarray, ids: list[int]) -> bool:
    return bool(rankings_agree((SCORES, IDS), (scores, np.array([ids])))[0])


def test_tied_labels_may_swap_places_and_float_noise_is_no_change() -> None:
    assert _agrees(SCORES, [3, 7, 4, 9, 5])
    assert _agrees(SCORES + TIE / 2, [7, 3, 4, 5, 9])


def test_a_label_tied_with_the_last_may_be_one_the_reference_did_not_return() -> None:
    assert _agrees(SCORES, [7, 3, 4, 5, 11])  # 11 scores 0.7 too: the tie went on past the reference's list
    assert not _agrees(SCORES, [7, 3, 11, 5, 9])  # at rank 3 nothing ties with label 4


def test_an_untied_swap_a_moved_score_or_a_repeated_label_disagrees() -> None:
    assert not _agrees(SCORES, [7, 4, 3, 5, 9])
    assert not _agrees(SCORES + np.array([[0, 0, 2 * TIE, 0, 0]], dtype=np.float32), [7, 3, 4, 5, 9])
    assert not _agrees(SCORES, [7, 7, 4, 5, 9])


def test_missing_results_agree_only_with_missing_results() -> None:
    scores = np.array([[0.9, -np.inf]], dtype=np.float32)
    reference = (scores, np.array([[2, -1]]))
    assert rankings_agree(reference, (scores.copy(), np.array([[2, -1]])))[0]
    assert not rankings_agree(reference, (np.array([[0.9, 0.1]], dtype=np.float32), np.array([[2, 5]])))[0]
