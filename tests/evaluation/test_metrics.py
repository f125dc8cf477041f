"""XC metrics: hand-computed values, a per-row reference of pyxclib's definitions, and properties."""

from __future__ import annotations

from math import log, log2

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from xc_core.evaluation.metrics import (
    PROPENSITY_CONSTANTS,
    evaluate,
    filter_predictions,
    ideal_weights,
    inverse_propensity,
    metric_terms,
    ndcg_per_row,
    precision_per_row,
    psp_denominator_per_row,
    psp_numerator_per_row,
    recall_per_row,
    top_k,
)

D2, D3 = 1 / log2(3), 1 / log2(4)  # DCG discounts of ranks 2 and 3 (rank 1: 1)


def _csr(entries: dict[tuple[int, int], float], shape: tuple[int, int]) -> sp.csr_matrix:
    """CSR with exactly these stored entries (explicit zeros kept)."""
    if not entries:
        return sp.csr_matrix(shape)
    (rows, cols), data = zip(*entries.keys(), strict=True), list(entries.values())
    matrix = sp.csr_matrix((np.array(data, dtype=np.float64), (np.array(rows), np.array(cols))), shape=shape)
    assert matrix.nnz == len(entries)
    return matrix


# Two rows, four labels. Row 0: positives {0, 2}, ranked 0 (hit), 1, 2 (hit).
# Row 1: positive {1}, ranked 3, 1 (hit), then nothing (padded).
Y_TRUE = sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 1, 0, 0]], dtype=np.float64))
Y_SCORE = sp.csr_matrix(np.array([[0.9, 0.8, 0.7, 0], [0, 0.5, 0, 0.6]]))
WEIGHTS = np.array([1.0, 2.0, 4.0, 8.0])


def test_top_k_orders_by_score_and_pads_short_rows_with_minus_one() -> None:
    assert top_k(Y_SCORE, 3).tolist() == [[0, 1, 2], [3, 1, -1]]


def test_precision_recall_ndcg_match_hand_computation() -> None:
    m = evaluate(Y_TRUE, Y_SCORE, k=3)
    assert m["P@1"] == pytest.approx((1 + 0) / 2)
    assert m["P@2"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert m["P@3"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert m["R@1"] == pytest.approx((1 / 2 + 0) / 2)
    assert m["R@2"] == pytest.approx((1 / 2 + 1) / 2)
    assert m["R@3"] == pytest.approx((1 + 1) / 2)
    # nDCG: row 0 is normalised by IDCG(min(2, k)), row 1 by IDCG(1) = 1.
    assert m["nDCG@1"] == pytest.approx((1 + 0) / 2)
    assert m["nDCG@2"] == pytest.approx((1 / (1 + D2) + D2) / 2)
    assert m["nDCG@3"] == pytest.approx(((1 + D3) / (1 + D2) + D2) / 2)


def test_psp_is_a_ratio_of_totals_not_a_mean_of_row_ratios() -> None:
    m = evaluate(Y_TRUE, Y_SCORE, k=3, inv_propensity=WEIGHTS)
    # Row 0 positives weigh {1, 4}: gained 1, 1, 1+4; best 4, 4+1, 5.  Row 1 positive weighs 2:
    # gained 0, 2, 2; best 2, 2, 2.
    assert m["PSP@1"] == pytest.approx((1 + 0) / (4 + 2))  # a mean of row ratios would be (1/4 + 0)/2
    assert m["PSP@2"] == pytest.approx((1 + 2) / (5 + 2))
    assert m["PSP@3"] == pytest.approx((5 + 2) / (5 + 2))
    # PSnDCG@2: row 0 (1)/(1+D2) over (4 + 1·D2)/(1+D2); row 1 (2·D2)/1 over 2/1.
    expected = (1 / (1 + D2) + 2 * D2) / ((4 + D2) / (1 + D2) + 2)
    assert m["PSnDCG@2"] == pytest.approx(expected)


def test_ps_keys_present_only_with_propensities() -> None:
    assert list(evaluate(Y_TRUE, Y_SCORE, k=2)) == ["P@1", "P@2", "nDCG@1", "nDCG@2", "R@1", "R@2"]
    with_ps = evaluate(Y_TRUE, Y_SCORE, k=2, inv_propensity=WEIGHTS)
    assert [key for key in with_ps if key.startswith("PS")] == ["PSP@1", "PSP@2", "PSnDCG@1", "PSnDCG@2"]


def test_tied_scores_go_to_the_lower_label_index() -> None:
    y_true = sp.csr_matrix(np.array([[0, 0, 0, 1]], dtype=np.float64))
    y_score = _csr({(0, 3): 0.5, (0, 1): 0.5, (0, 2): 0.9}, (1, 4))
    assert top_k(y_score, 3).tolist() == [[2, 1, 3]]
    m = evaluate(y_true, y_score, k=3)
    assert m["P@2"] == 0.0  # label 1 wins the tie against the positive label 3
    assert m["P@3"] == pytest.approx(1 / 3)


def test_top_k_separates_scores_that_differ_beyond_float32_precision() -> None:
    y_score = _csr({(0, 0): 1.0, (0, 1): 1.0 + 2.0**-40, (0, 2): -0.0, (0, 3): 0.0, (0, 4): -1e-300}, (1, 5))
    assert top_k(y_score, 5).tolist() == [[1, 0, 2, 3, 4]]  # -0.0 and 0.0 tie: lower label first


def test_rows_without_positives_count_as_zero_but_do_not_move_psp() -> None:
    y_true = sp.csr_matrix(np.array([[1, 0], [0, 0]], dtype=np.float64))
    y_score = sp.csr_matrix(np.array([[0.9, 0.1], [0.9, 0.1]]))
    m = evaluate(y_true, y_score, k=1, inv_propensity=np.array([3.0, 1.0]))
    assert m["P@1"] == 0.5 and m["nDCG@1"] == 0.5 and m["R@1"] == 0.5
    assert m["PSP@1"] == 1.0 and m["PSnDCG@1"] == 1.0  # the empty row adds 0 to both totals


def test_rows_with_fewer_than_k_positives_keep_one_over_k_in_precision() -> None:
    y_true = sp.csr_matrix(np.array([[0, 1, 0]], dtype=np.float64))
    y_score = sp.csr_matrix(np.array([[0.2, 0.9, 0.1]]))
    m = evaluate(y_true, y_score, k=3, inv_propensity=np.ones(3))
    assert m["P@3"] == pytest.approx(1 / 3)
    assert m["nDCG@3"] == 1.0 and m["R@3"] == 1.0 and m["PSP@3"] == 1.0 and m["PSnDCG@3"] == 1.0


def test_inverse_propensity_matches_hand_computed_weights() -> None:
    # N = 4 points; label 0 in 4 of them, label 1 in 1, label 2 in none. A = 0.5, B = 1:
    # C = (ln 4 - 1)·2^0.5 = 0.5463027; w = 1 + C·(N_l + 1)^-0.5 = 1 + C/√5, 1 + C/√2 (= ln 4), 1 + C.
    y_train = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0]], dtype=np.float64))
    weights = inverse_propensity(y_train, A=0.5, B=1.0)
    np.testing.assert_allclose(weights, [1.2443140, 1.3862944, 1.5463027], atol=1e-7)
    assert weights[1] == pytest.approx(log(4))


def test_inverse_propensity_defaults_are_the_generic_constants() -> None:
    y_train = sp.random(50, 7, density=0.3, format="csr", random_state=0)
    A, B = PROPENSITY_CONSTANTS["other"]
    frequency = (y_train.toarray() != 0).sum(axis=0)
    expected = 1 + (log(50) - 1) * (B + 1) ** A * (frequency + B) ** -A
    np.testing.assert_allclose(inverse_propensity(y_train), expected)


def test_per_row_helpers_average_to_evaluate() -> None:
    top = top_k(Y_SCORE, 3)
    m = evaluate(Y_TRUE, Y_SCORE, k=3, inv_propensity=WEIGHTS)
    assert precision_per_row(Y_TRUE, top, 2).tolist() == [0.5, 0.5]
    assert recall_per_row(Y_TRUE, top, 2).mean() == pytest.approx(m["R@2"])
    assert ndcg_per_row(Y_TRUE, top, 3).mean() == pytest.approx(m["nDCG@3"])
    numerator, denominator = psp_numerator_per_row(Y_TRUE, top, WEIGHTS, 2), psp_denominator_per_row(Y_TRUE, WEIGHTS, 2)
    assert numerator.tolist() == [1.0, 2.0] and denominator.tolist() == [5.0, 2.0]
    assert numerator.sum() / denominator.sum() == pytest.approx(m["PSP@2"])


def test_ideal_weights_computed_once_give_the_same_terms_at_every_depth() -> None:
    """The fusion grid passes the rows' best propensity gains (computed once, at depth 5) to every ranking's terms:
    the PS terms at depths 1..5 are those computed from scratch, and a deeper ranking computes its own."""
    rng = np.random.default_rng(0)
    truth = sp.csr_matrix((rng.random((40, 30)) < 0.1).astype(np.float64))
    weights = 1.0 + rng.random(30) * 5
    ideal = ideal_weights(truth, weights, 5)
    assert ideal.shape == (40, 5) and np.all(np.diff(ideal, axis=1) <= 0), "decreasing, zero-padded"
    for depth in (1, 3, 5, 7):
        top = np.argsort(-rng.random((40, 30)), axis=1)[:, :depth]
        fresh, shared = metric_terms(truth, top, weights), metric_terms(truth, top, weights, ideal)
        for family in ("PSP", "PSnDCG"):
            np.testing.assert_array_equal(fresh[family].numerator, shared[family].numerator)
            np.testing.assert_array_equal(fresh[family].denominator, shared[family].denominator)


def test_filter_predictions_removes_the_pair_before_ranking() -> None:
    filtered = filter_predictions(Y_SCORE, np.array([[0, 0], [1, 2]]))  # (1, 2) is not stored: ignored
    assert top_k(filtered, 3).tolist() == [[1, 2, -1], [3, 1, -1]]
    assert filtered.nnz == Y_SCORE.nnz - 1


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        evaluate(Y_TRUE, Y_SCORE[:, :3], k=1)
    with pytest.raises(ValueError):
        evaluate(Y_TRUE, Y_SCORE, k=1, inv_propensity=np.ones(3))
    with pytest.raises(ValueError):
        top_k(sp.csr_matrix(np.array([[np.nan, 1.0]])), 1)


# -- a straightforward per-row reference of pyxclib's definitions ------------------------------


def reference_metrics(positives: list[set[int]], scores: list[dict[int, float]], k: int,
                      weights: np.ndarray | None) -> dict[str, float]:
    """One row at a time, in plain Python: rank by (-score, label), then pyxclib's formulas."""
    n = len(positives)
    totals: dict[str, float] = {}

    def add(key: str, value: float) -> None:
        totals[key] = totals.get(key, 0.0) + value

    for pos, row in zip(positives, scores, strict=True):
        ranked = [label for _, label in sorted((-s, label) for label, s in row.items())][:k]
        best = sorted((float(weights[label]) for label in pos), reverse=True) if weights is not None else []
        for j in range(1, k + 1):
            hits = [r for r, label in enumerate(ranked[:j]) if label in pos]
            idcg = sum(1 / log2(r + 2) for r in range(min(len(pos), j)))
            add(f"P@{j}", len(hits) / j)
            add(f"R@{j}", len(hits) / len(pos) if pos else 0.0)
            add(f"nDCG@{j}", sum(1 / log2(r + 2) for r in hits) / idcg if pos else 0.0)
            if weights is None:
                continue
            add(f"PSP@{j}/num", sum(float(weights[ranked[r]]) for r in hits))
            add(f"PSP@{j}/den", sum(best[:j]))
            add(f"PSnDCG@{j}/num", sum(float(weights[ranked[r]]) / log2(r + 2) for r in hits) / idcg if pos else 0.0)
            add(f"PSnDCG@{j}/den", sum(w / log2(r + 2) for r, w in enumerate(best[:j])) / idcg if pos else 0.0)
    out = {key: value / n for key, value in totals.items() if "/" not in key}
    for key in (key for key in totals if key.endswith("/num")):
        metric, den = key.removesuffix("/num"), totals.get(key.replace("/num", "/den"), 0.0)
        out[metric] = totals[key] / den if den > 0 else 0.0
    return out


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[set[int]], list[dict[int, float]], int, int, np.ndarray | None]:
    n_rows, n_labels = draw(st.integers(1, 6)), draw(st.integers(1, 8))
    cells = st.tuples(st.integers(0, n_rows - 1), st.integers(0, n_labels - 1))
    positive_cells = draw(st.sets(cells, max_size=n_rows * n_labels))
    # Scores on a coarse grid, so ties, explicit zeros and negative scores are frequent.
    scored = draw(st.dictionaries(cells, st.integers(-3, 5).map(lambda v: v / 2), max_size=n_rows * n_labels))
    positives = [{c for r, c in positive_cells if r == i} for i in range(n_rows)]
    scores = [{c: s for (r, c), s in scored.items() if r == i} for i in range(n_rows)]
    weights = draw(st.none() | st.lists(st.floats(0.5, 10), min_size=n_labels, max_size=n_labels).map(np.array))
    return positives, scores, n_labels, draw(st.integers(1, 6)), weights


def _matrices(positives: list[set[int]], scores: list[dict[int, float]],
              n_labels: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    shape = (len(positives), n_labels)
    y_true = _csr({(i, c): 1.0 for i, pos in enumerate(positives) for c in pos}, shape)
    y_score = _csr({(i, c): s for i, row in enumerate(scores) for c, s in row.items()}, shape)
    return y_true, y_score


@settings(max_examples=300, deadline=None)
@given(problems())
def test_evaluate_agrees_with_the_per_row_reference(problem) -> None:
    positives, scores, n_labels, k, weights = problem
    y_true, y_score = _matrices(positives, scores, n_labels)
    got = evaluate(y_true, y_score, k=k, inv_propensity=weights)
    expected = reference_metrics(positives, scores, k, weights)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-6), key


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(allow_nan=False, width=64), max_size=12), min_size=1, max_size=5),
       st.integers(1, 12))
def test_top_k_agrees_with_sorting_each_row_in_python(rows: list[list[float]], k: int) -> None:
    entries = {(i, c): s for i, row in enumerate(rows) for c, s in enumerate(row)}
    expected = [[c for _, c in sorted((-s, c) for c, s in enumerate(row))][:k] for row in rows]
    expected = [row + [-1] * (k - len(row)) for row in expected]
    assert top_k(_csr(entries, (len(rows), 12)), k).tolist() == expected


@settings(max_examples=100, deadline=None)
@given(problems(), st.sampled_from([0.5, 3.0, 1000.0, 1e-3]))
def test_metrics_are_invariant_to_positive_score_scaling(problem, factor: float) -> None:
    positives, scores, n_labels, k, weights = problem
    y_true, y_score = _matrices(positives, scores, n_labels)
    assert evaluate(y_true, y_score * factor, k, weights) == evaluate(y_true, y_score, k, weights)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(0, 4), st.integers(0, 2**32 - 1))
def test_perfect_predictions_score_one_on_rows_with_at_least_k_positives(
        n_rows: int, k: int, extra: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_labels = k + extra + 2
    y_true = np.zeros((n_rows, n_labels))
    for row in y_true:
        row[rng.choice(n_labels, size=rng.integers(k, n_labels + 1), replace=False)] = 1.0
    weights = rng.uniform(1, 5, n_labels)
    y_score = sp.csr_matrix(y_true * weights)  # positives only, heaviest first
    m = evaluate(sp.csr_matrix(y_true), y_score, k, weights)
    for family in ("P", "nDCG", "PSP", "PSnDCG"):
        for j in range(1, k + 1):
            assert m[f"{family}@{j}"] == pytest.approx(1.0), f"{family}@{j}"


@settings(max_examples=100, deadline=None)
@given(problems(), st.data())
def test_filter_predictions_removes_exactly_the_given_pairs(problem, data) -> None:
    positives, scores, n_labels, _, _ = problem
    _, y_score = _matrices(positives, scores, n_labels)
    stored = {(i, c): s for i, row in enumerate(scores) for c, s in row.items()}
    cells = st.tuples(st.integers(0, len(scores) - 1), st.integers(0, n_labels - 1))
    pairs = data.draw(st.lists(cells, max_size=10))
    filtered = filter_predictions(y_score, np.array(pairs, dtype=np.int64).reshape(-1, 2)).tocoo()
    kept = {(int(r), int(c)): float(v) for r, c, v in zip(filtered.row, filtered.col, filtered.data, strict=True)}
    assert kept == {cell: s for cell, s in stored.items() if cell not in set(pairs)}


def test_chunked_ranking_and_totals_match_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    import xc_core.evaluation.metrics as metrics

    monkeypatch.setattr(metrics, "CHUNK_CELLS", 7)  # many chunks per length bucket and per total
    rng = np.random.default_rng(11)
    n_rows, n_labels, k = 40, 30, 4
    positives = [set(rng.choice(n_labels, size=rng.integers(0, 5), replace=False).tolist()) for _ in range(n_rows)]
    scores = [{int(c): float(rng.integers(0, 6))
               for c in rng.choice(n_labels, size=rng.integers(0, 25), replace=False)} for _ in range(n_rows)]
    weights = rng.uniform(1, 5, n_labels)
    y_true, y_score = _matrices(positives, scores, n_labels)
    got = evaluate(y_true, y_score, k=k, inv_propensity=weights)
    expected = reference_metrics(positives, scores, k, weights)
    assert got == pytest.approx(expected, abs=1e-12)
