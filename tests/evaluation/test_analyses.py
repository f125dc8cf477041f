"""Analyses: bootstrap intervals, equi-voluminous quantiles, FN@k / DIFF@k, subsets and deciles."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.evaluation.analyses import (
    bootstrap_ci,
    bootstrap_ratio_ci,
    confidence_intervals,
    decile_metrics,
    diff_at_k,
    false_negatives_at_k,
    label_quantiles,
    paired_bootstrap_diff,
    paired_bootstrap_ratio_diff,
    per_row_metrics,
    quantile_contributions,
    seen_label_scores,
    seen_label_view,
    subset_metrics,
    trained_labels,
    untrained_positive_share,
)
from xc_core.evaluation.metrics import evaluate, top_k

# Hand example: 4 labels in 2 bins (labels 0, 1 tail; 2, 3 head), 3 rows.
BINS = np.array([0, 0, 1, 1])
Y_TRUE = sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]], dtype=np.float64))
TOP_A = np.array([[0, 1, 2], [3, 0, -1], [0, 1, 3]])  # hits: row 0 labels 0 (rank 1), 2 (rank 3); row 1 label 3
TOP_B = np.array([[2, 0, 1], [1, 3, 0], [2, 0, 1]])  # hits: row 0 labels 2, 0; row 1 labels 1, 3; row 2 label 2


def _scores(top: np.ndarray, n_labels: int) -> sp.csr_matrix:
    """A score matrix whose ranking is ``top`` (rank 1 scores highest)."""
    rows, ranks = np.nonzero(top >= 0)
    return sp.csr_matrix((top.shape[1] - ranks.astype(np.float64), (rows, top[rows, ranks])),
                         shape=(top.shape[0], n_labels))


def test_bootstrap_ci_contains_the_mean_and_narrows_with_more_rows() -> None:
    rng = np.random.default_rng(0)
    small, large = rng.normal(0.3, 1.0, 200), rng.normal(0.3, 1.0, 20_000)
    mean_s, low_s, high_s = bootstrap_ci(small, n_boot=500)
    mean_l, low_l, high_l = bootstrap_ci(large, n_boot=500)
    assert low_s <= mean_s <= high_s and low_l <= mean_l <= high_l
    assert mean_s == pytest.approx(small.mean())
    assert (high_l - low_l) < (high_s - low_s) / 5  # ~ √100 = 10× narrower


def test_bootstrap_is_reproducible_with_its_seed() -> None:
    values = np.random.default_rng(1).random(300)
    assert bootstrap_ci(values, n_boot=200, seed=7) == bootstrap_ci(values, n_boot=200, seed=7)
    assert bootstrap_ci(values, n_boot=200, seed=7) != bootstrap_ci(values, n_boot=200, seed=8)


def test_bootstrap_ratio_ci_is_the_ratio_of_totals() -> None:
    rng = np.random.default_rng(2)
    denominator = rng.uniform(1, 5, 1000)
    numerator = denominator * rng.uniform(0, 1, 1000)
    value, low, high = bootstrap_ratio_ci(numerator, denominator, n_boot=300)
    assert value == pytest.approx(numerator.sum() / denominator.sum())
    assert value != pytest.approx(np.mean(numerator / denominator), abs=1e-3)
    assert low <= value <= high


@pytest.mark.parametrize("chunk", [1 << 23, 300])  # one batch of resamples, or many (the draws must not move)
def test_scipy_bootstrap_gives_the_numbers_of_a_plain_resampling_loop(chunk: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import xc_core.evaluation.analyses as analyses

    monkeypatch.setattr(analyses, "BOOTSTRAP_CHUNK", chunk)
    rng = np.random.default_rng(3)
    a, b = rng.random(60), rng.random(60)
    num_a, num_b, den = rng.random(60), rng.random(60), rng.random(60) + 0.5

    def reference(statistic, n_boot: int = 200, seed: int = 7) -> np.ndarray:  # the pre-scipy implementation
        draws = np.random.default_rng(seed)
        per_batch = max(1, chunk // 60)
        return np.concatenate([statistic(draws.integers(0, 60, size=(min(per_batch, n_boot - start), 60)))
                               for start in range(0, n_boot, per_batch)])

    def ratio(num: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return num[idx].sum(axis=1) / den[idx].sum(axis=1)

    mean_ref = np.quantile(reference(lambda idx: a[idx].mean(axis=1)), [0.025, 0.975])
    assert bootstrap_ci(a, n_boot=200, seed=7)[1:] == pytest.approx(tuple(mean_ref), abs=1e-15)
    diff_ref = reference(lambda idx: (a - b)[idx].mean(axis=1))
    got = paired_bootstrap_diff(a, b, n_boot=200, seed=7)
    assert got[1:3] == pytest.approx(tuple(np.quantile(diff_ref, [0.025, 0.975])), abs=1e-15)
    assert got[3] == pytest.approx((1 + np.sum(np.abs(diff_ref - got[0]) >= abs(got[0]))) / 201)
    ratio_ref = reference(lambda idx: ratio(num_a, idx) - ratio(num_b, idx))
    got = paired_bootstrap_ratio_diff(num_a, den, num_b, den, n_boot=200, seed=7)
    assert got[1:3] == pytest.approx(tuple(np.quantile(ratio_ref, [0.025, 0.975])), abs=1e-15)


def test_paired_diff_of_identical_systems_is_zero_with_p_one() -> None:
    values = np.random.default_rng(3).random(500)
    diff, low, high, p = paired_bootstrap_diff(values, values.copy(), n_boot=300)
    assert diff == 0.0 and low <= 0.0 <= high and p == 1.0
    diff, low, high, p = paired_bootstrap_ratio_diff(values, values + 1, values, values + 1, n_boot=300)
    assert diff == 0.0 and low <= 0.0 <= high and p == 1.0


def test_paired_diff_detects_a_consistent_improvement() -> None:
    rng = np.random.default_rng(4)
    b = rng.random(2000)
    a = b + 0.05 + rng.normal(0, 0.1, 2000)
    diff, low, high, p = paired_bootstrap_diff(a, b, n_boot=500)
    assert diff == pytest.approx((a - b).mean())
    assert 0 < low < diff < high and p < 0.01


def test_per_row_metrics_aggregate_to_evaluate() -> None:
    rng = np.random.default_rng(5)
    y_true = sp.random(200, 30, density=0.1, format="csr", random_state=5)
    y_score = sp.random(200, 30, density=0.5, format="csr", random_state=6)
    weights = rng.uniform(1, 4, 30)
    m = evaluate(y_true, y_score, k=10, inv_propensity=weights)
    rows = per_row_metrics(y_true, top_k(y_score, 10), weights)
    assert rows["P@1"].mean() == pytest.approx(m["P@1"]) and rows["P@5"].mean() == pytest.approx(m["P@5"])
    assert rows["R@10"].mean() == pytest.approx(m["R@10"])
    for k in (1, 5):
        ratio = rows[f"PSP@{k}/numerator"].sum() / rows[f"PSP@{k}/denominator"].sum()
        assert ratio == pytest.approx(m[f"PSP@{k}"])
    table = confidence_intervals(rows, n_boot=100)
    assert table["metric"].to_list() == ["P@1", "P@5", "R@10", "PSP@1", "PSP@5"]
    assert table.filter(table["metric"] == "PSP@5")["value"].item() == pytest.approx(m["PSP@5"])
    # the paired difference reads PSP from the returned dict and from per_row.npz's spelling alike
    from xc_core.evaluation.analyses import paired_metric_diff

    saved = {k.replace("/", "__"): v for k, v in rows.items()}
    for other in (rows, saved):
        diff = paired_metric_diff(other, other, "PSP@5")
        assert diff is not None and diff[0] == pytest.approx(0.0)


def test_label_quantiles_are_equi_voluminous_on_a_skewed_matrix() -> None:
    rng = np.random.default_rng(6)
    n_points, n_labels = 1500, 2000
    frequency = (1000 / np.arange(1, n_labels + 1) ** 0.8).astype(np.int64) + 1  # Zipf-like, head 1001
    rng.shuffle(frequency)
    cols = np.repeat(np.arange(n_labels), frequency)
    rows = np.concatenate([rng.choice(n_points, size=f, replace=False) for f in frequency])
    y_train = sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(n_points, n_labels))
    bins = label_quantiles(y_train, n_bins=5)
    volume = np.bincount(bins, weights=frequency, minlength=5)
    assert np.all(np.abs(volume - frequency.sum() / 5) <= frequency.max())
    labels_per_bin = np.bincount(bins, minlength=5)
    assert np.all(np.diff(labels_per_bin) < 0)  # the tail bin 0 holds the most labels, the head bin the fewest
    for b in range(4):  # every label of a bin is at most as frequent as every label of the next
        assert frequency[bins == b].max() <= frequency[bins == b + 1].min()


def test_label_quantiles_assign_labels_by_the_midpoint_of_their_share() -> None:
    # Train frequencies 4, 1, 1, 1, 1, 0 (8 positives, 2 bins of 4). Sorted ascending: label 5 (0),
    # labels 1-4 (1 each), label 0 (4); midpoints 0, 0.5, 1.5, 2.5, 3.5, 6 of 8 -> bins 0,0,0,0,0,1.
    y_train = sp.csr_matrix(np.array([[1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 0, 0],
                                      [1, 0, 0, 1, 0, 0], [1, 0, 0, 0, 1, 0]], dtype=np.float64))
    assert label_quantiles(y_train, n_bins=2).tolist() == [1, 0, 0, 0, 0, 0]


def test_quantile_contributions_match_hand_computation_and_sum_to_the_metric() -> None:
    table = quantile_contributions(Y_TRUE, TOP_A, BINS, k=3)
    # Hits in the top 3: bin 0 once (row 0), bin 1 twice (rows 0 and 1); n = 3 rows.
    assert table["P@3"].to_list() == pytest.approx([1 / 9, 2 / 9])
    assert table["R@3"].to_list() == pytest.approx([(1 / 2) / 3, (1 / 2 + 1 / 2) / 3])
    assert table["positives"].to_list() == [2, 3] and table["labels"].to_list() == [2, 2]
    m = evaluate(Y_TRUE, _scores(TOP_A, 4), k=3)
    assert table["P@3"].sum() == pytest.approx(m["P@3"]) and table["R@3"].sum() == pytest.approx(m["R@3"])


def test_false_negatives_and_diff_match_hand_computation() -> None:
    fn_a = false_negatives_at_k(Y_TRUE, TOP_A, BINS, ks=(1, 3))
    fn_b = false_negatives_at_k(Y_TRUE, TOP_B, BINS, ks=(1, 3))
    # Positives: bin 0 = {(0,0), (1,1)}, bin 1 = {(0,2), (1,3), (2,2)}.
    assert fn_a["FN@1"].to_list() == [2 - 1, 3 - 1] and fn_a["FN@3"].to_list() == [2 - 1, 3 - 2]
    assert fn_b["FN@1"].to_list() == [2 - 1, 3 - 2] and fn_b["FN@3"].to_list() == [0, 0]
    diff = diff_at_k(fn_a, fn_b)
    assert diff.columns == ["bin", "DIFF@1", "DIFF@3"]
    assert diff["DIFF@1"].to_list() == [0, 1] and diff["DIFF@3"].to_list() == [1, 1]


def test_false_negatives_refuse_a_top_shorter_than_the_largest_k() -> None:
    with pytest.raises(ValueError):
        false_negatives_at_k(Y_TRUE, TOP_A, BINS, ks=(1, 5))


def test_subset_rows_score_like_evaluate_on_those_rows() -> None:
    y_score = _scores(TOP_A, 4)
    mask = np.array([True, False, True])
    m = subset_metrics(Y_TRUE, y_score, rows_mask=mask, k=3)
    assert m["rows"] == 2.0
    expected = evaluate(Y_TRUE[[0, 2]], y_score[[0, 2]], k=3)
    assert {key: m[key] for key in expected} == expected


def test_novel_labels_restrict_versus_rows_with_novel_positives() -> None:
    # Novel labels 2 and 3; row 3 has no novel positive and is dropped in both settings.
    y_true = sp.vstack([Y_TRUE, sp.csr_matrix(np.array([[1.0, 0, 0, 0]]))]).tocsr()
    y_score = _scores(np.vstack([TOP_A, [[0, -1, -1]]]), 4)
    novel = np.array([False, False, True, True])
    restricted = subset_metrics(y_true, y_score, labels_mask=novel, k=3, label_mode="restrict")
    general = subset_metrics(y_true, y_score, labels_mask=novel, k=3, label_mode="rows_with")
    assert restricted["rows"] == general["rows"] == 3.0
    # restrict: positives {2}, {3}, {2}; rankings [2], [3], [3] -> R@3 = (1 + 1 + 0) / 3
    assert restricted["R@3"] == pytest.approx(2 / 3)
    assert restricted["P@1"] == pytest.approx(2 / 3)
    # rows_with: all labels; R@3 = (2/2 + 1/2 + 0) / 3
    assert general["R@3"] == pytest.approx(1 / 2)


def test_decile_metrics_score_each_group_like_evaluate_alone() -> None:
    y_true = sp.random(120, 25, density=0.15, format="csr", random_state=8)
    y_score = sp.random(120, 25, density=0.4, format="csr", random_state=9)
    weights = np.random.default_rng(10).uniform(1, 3, 25)
    deciles = np.arange(120) % 4 - 1  # -1 stands for rows without a decile
    table = decile_metrics(y_true, y_score, deciles, k=3, inv_propensity=weights)
    assert table["decile"].to_list() == [-1, 0, 1, 2] and table["rows"].to_list() == [30] * 4
    for record in table.iter_rows(named=True):
        rows = np.flatnonzero(deciles == record["decile"])
        expected = evaluate(y_true[rows], y_score[rows], k=3, inv_propensity=weights)
        assert {key: record[key] for key in expected} == pytest.approx(expected)


# The seen-label view. Labels 0-2 have a training positive; label 3 has only an explicit 0 in train (no positive).
Y_TRAIN = sp.csr_matrix((np.array([1.0, 1.0, 1.0, 0.0]), (np.array([0, 1, 2, 2]), np.array([0, 1, 2, 3]))),
                        shape=(3, 4))
# Rows: {0}; {3} only (untrained); {1, 3}; no positive.
Y_SEEN = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 1], [0, 0, 0, 0]], dtype=np.float64))
# Rankings: [3, 1, 0], [3, 2], [1, 3], [0]; without label 3: [1, 0], [2], [1], [0].
S_SEEN = sp.csr_matrix(np.array([[0.7, 0.8, 0, 0.9], [0, 0, 0.5, 0.9], [0, 0.9, 0, 0.8], [0.1, 0, 0, 0]]))


def test_trained_labels_are_those_with_a_training_positive() -> None:
    assert trained_labels(Y_TRAIN).tolist() == [True, True, True, False], "an explicit 0 is no positive"


def test_seen_label_scores_drop_the_untrained_columns_entries_and_keep_shape_and_zeros() -> None:
    # an explicit zero on a trained label (row 3, label 2) is still a candidate
    scores = sp.csr_matrix(sp.vstack([S_SEEN[:3], sp.csr_matrix(([0.1, 0.0], ([0, 0], [0, 2])), shape=(1, 4))]))
    seen = seen_label_scores(scores, trained_labels(Y_TRAIN))
    assert seen.shape == (4, 4) and not np.any(seen.indices == 3)
    assert seen.nnz == scores.nnz - 3
    assert top_k(seen, 3).tolist() == [[1, 0, -1], [2, -1, -1], [1, -1, -1], [0, 2, -1]]
    np.testing.assert_array_equal(seen.toarray()[:, :3], scores.toarray()[:, :3])


def test_untrained_positive_share_counts_pairs_and_rows_with_only_untrained_positives() -> None:
    share = untrained_positive_share(Y_SEEN, trained_labels(Y_TRAIN))
    # pairs (0,0) (1,3) (2,1) (2,3): 2 of 4 on label 3; rows: only row 1 of all 4 (row 3 has no positive)
    assert share == {"pairs": 0.5, "rows": 0.25}
    assert untrained_positive_share(sp.csr_matrix((2, 4)), np.ones(4, dtype=bool)) == {"pairs": 0.0, "rows": 0.0}


def test_the_seen_label_view_reranks_over_trained_labels_and_keeps_every_row_and_positive() -> None:
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    full = evaluate(Y_SEEN, S_SEEN, k=2, inv_propensity=weights)
    view = seen_label_view(Y_SEEN, S_SEEN, Y_TRAIN, inv_propensity=weights, k=2, recall_at=(2, 10))
    assert full["P@1"] == pytest.approx(2 / 4)  # rows 1 and 2 hit with label 3 and label 1
    # row 0's top moves from label 3 to label 1 (a miss), row 1 has no trained label to hit and counts 0 of n = 4
    assert view.metrics["P@1"] == pytest.approx(1 / 4)
    np.testing.assert_array_equal(view.per_row["P@1"], [0.0, 0.0, 1.0, 0.0])
    # R@2 divides by every positive, untrained ones included: (1 + 0 + 1/2 + 0) / 4
    assert view.metrics["R@2"] == pytest.approx(0.375) and view.metrics["R@10"] == pytest.approx(0.375)
    # PSP@1 keeps the untrained positives' weights in its denominator: w* = 1, 4, 4, 0
    assert full["PSP@1"] == pytest.approx((4 + 2) / 9) and view.metrics["PSP@1"] == pytest.approx(2 / 9)
    np.testing.assert_array_equal(view.per_row["PSP@1/denominator"], [1.0, 4.0, 4.0, 0.0])
    assert (view.untrained_positive_share, view.untrained_only_rows) == (0.5, 0.25)
    assert view.metrics == evaluate(Y_SEEN, view.scores, k=2, inv_propensity=weights) | {
        "R@2": view.metrics["R@2"], "R@10": view.metrics["R@10"]}


def test_a_method_that_never_scores_untrained_labels_is_the_same_in_both_views() -> None:
    peer = sp.csr_matrix(np.array([[0.9, 0, 0, 0], [0, 0, 0.9, 0], [0.9, 0.5, 0, 0], [0.9, 0, 0, 0]]))
    full = evaluate(Y_SEEN, peer, k=5)
    view = seen_label_view(Y_SEEN, peer, Y_TRAIN)
    assert {k: view.metrics[k] for k in full} == full and view.metrics["P@1"] == pytest.approx(1 / 4)
