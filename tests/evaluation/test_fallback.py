"""The one fallback rule: a learned choice is served only when it beats doing nothing on held-out rows."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.evaluation.fallback import FallbackPolicy, against_fallback, cross_fitted, row_folds


def _one_label_each(n: int, labels: int = 20) -> sp.csr_matrix:
    """Row i's only positive is label 0 (its rankings below decide hits by where 0 sits)."""
    return sp.csr_matrix((np.ones(n), (np.arange(n), np.zeros(n, int))), shape=(n, labels))


def _ranking(n: int, hit_rows: np.ndarray, k: int = 10) -> np.ndarray:
    top = np.tile(np.arange(1, k + 1), (n, 1))
    top[hit_rows, 0] = 0
    return top


def test_row_folds_split_every_row_once_and_are_seeded() -> None:
    folds = row_folds(11, 3, seed=3)
    assert sorted(np.concatenate(folds).tolist()) == list(range(11)) and [len(f) for f in folds] == [4, 4, 3]
    np.testing.assert_array_equal(folds[0], row_folds(11, 3, seed=3)[0])
    assert not np.array_equal(folds[0], row_folds(11, 3, seed=4)[0])


def test_cross_fitting_tests_every_row_and_sees_a_gain_half_the_rows_could_not() -> None:
    """A candidate that finds the label on 14 more and 4 fewer of 600 rows: on a held-out half (300 rows) the interval
    reaches below 0, on all 600 rows cross-fitted it does not — the same data, twice the rows tested. The noise
    candidates beside it never win a fold's pick."""
    n = 600
    truth = sp.csr_matrix((np.ones(n), (np.arange(n), np.zeros(n, int))), shape=(n, 30))
    fallback = np.tile(np.arange(1, 6), (n, 1))
    fallback[::2, 0] = 0  # half the rows find their label first
    better = fallback.copy()
    gain_rows = np.flatnonzero(fallback[:, 0] != 0)[:14]
    lose_rows = np.flatnonzero(fallback[:, 0] == 0)[:4]
    better[gain_rows, 0], better[lose_rows, 0] = 0, 29
    tops = {"fallback": fallback, "better": better}
    rng = np.random.default_rng(0)
    for i in range(5):  # noise: swaps the first label of random rows
        noisy = fallback.copy()
        rows = rng.choice(n, 40, replace=False)
        noisy[rows, 0] = np.where(noisy[rows, 0] == 0, 29, 0)
        tops[f"noise{i}"] = noisy

    def select(rows: np.ndarray) -> str:
        return max(tops, key=lambda key: (float((tops[key][rows, 0] == 0).mean()), key == "fallback"))

    policy = FallbackPolicy()
    decision, served = cross_fitted("demo", select, tops.__getitem__, fallback, truth, None, "P@1", policy,
                                    row_folds(n, 5, seed=0))
    assert served == "better" and decision.kept and decision.tested_on_rows == n and decision.agreement == 1.0
    assert decision.detectable["P@1"] > 0 and decision.low > 0
    half = row_folds(n, 2, seed=0)[1]
    held_out = against_fallback("demo", better[half], fallback[half], truth[half], None, "P@1", policy)
    assert held_out.detectable["P@1"] > decision.detectable["P@1"]  # half the rows, a wider interval
    assert not held_out.kept and held_out.low <= 0  # the half/half rule would have served the fallback


def test_a_clear_gain_is_served_and_noise_is_not() -> None:
    n = 300
    truth, fallback = _one_label_each(n), _ranking(n, np.arange(100))
    clear = against_fallback("x", _ranking(n, np.arange(160)), fallback, truth, np.ones(20), "P@1", FallbackPolicy())
    assert clear.kept and clear.low > 0 and clear.gain == pytest.approx(0.2) and "served" in clear.reason
    noise = against_fallback("x", _ranking(n, np.r_[np.arange(3, 100), np.arange(100, 105)]), fallback, truth,
                             np.ones(20), "P@1", FallbackPolicy())
    assert not noise.kept and noise.low <= 0 < noise.high and "fallback is served" in noise.reason


def test_a_gain_on_the_selection_metric_that_loses_p_at_1_is_not_served() -> None:
    """R@10 rises a lot while P@1 falls a lot: a stage cannot buy recall with the gate's primary metric."""
    n = 300
    truth = _one_label_each(n)
    fallback = _ranking(n, np.arange(150))  # half the rows hit at rank 1, the rest never
    candidate = np.tile(np.arange(1, 11), (n, 1))
    candidate[:, 4] = 0  # every row finds its label, but at rank 5
    decision = against_fallback("x", candidate, fallback, truth, np.ones(20), "R@10", FallbackPolicy())
    assert decision.low > 0 and decision.guards["P@1"][2] < 0
    assert not decision.kept and "loses P@1" in decision.reason


def test_a_guard_margin_refuses_a_loss_inside_the_interval_that_the_significance_rule_lets_through() -> None:
    """R@10 gains clearly while P@1 falls by 5 of 300 rows net, inside its interval: the default rule (lost only when
    the interval lies below 0) serves the candidate; ``guard_margin=0`` (ramen against dual_encoder) does not, and
    ``guard_margin=-3`` (a tolerance of three standard errors) does again. A P@1 tie with the same recall gain is
    served under every rule."""
    from xc_core.evaluation.fallback import guard_lost

    n = 300
    truth = _one_label_each(n)
    fallback = _ranking(n, np.arange(150))  # rows 0–149 find label 0 first, the rest never in the top 10
    candidate = fallback.copy()
    candidate[:20, 0], candidate[:20, 1] = 1, 0  # 20 hits move to rank 2, R@10 unchanged there,
    candidate[250:265, 0] = 0  # and 15 rows gain one at rank 1: P@1 −5/300, a loss inside its interval
    candidate[150:250, 9] = 0  # 100 rows now find their label at rank 10: R@10 +115/300
    tie = fallback.copy()
    tie[150:250, 9] = 0
    default = against_fallback("x", candidate, fallback, truth, np.ones(20), "R@10", FallbackPolicy())
    gain, low, high = default.guards["P@1"]
    assert default.low > 0 and gain == pytest.approx(-5 / 300) and low < 0 < high and default.kept
    strict = against_fallback("x", candidate, fallback, truth, np.ones(20), "R@10", FallbackPolicy(guard_margin=0.0))
    assert not strict.kept and "loses P@1, PSP@1 beyond its margin (+0 standard errors)" in strict.reason
    tolerant = against_fallback("x", candidate, fallback, truth, np.ones(20), "R@10", FallbackPolicy(guard_margin=-3))
    assert tolerant.kept
    assert against_fallback("x", tie, fallback, truth, np.ones(20), "R@10", FallbackPolicy(guard_margin=0.0)).kept
    # the margin reads the standard error off the interval: half-width 1.96 SE at 95%
    assert guard_lost(-0.9, -2.86, 1.06, FallbackPolicy(guard_margin=-1.0)) is False  # −0.9 > −1 SE
    assert guard_lost(-1.1, -3.06, 0.86, FallbackPolicy(guard_margin=-1.0)) is True
    assert guard_lost(-1.1, -3.06, 0.86, FallbackPolicy()) is False and guard_lost(-1, -2, -0.1, FallbackPolicy())


def test_ramen_against_dual_encoder_uses_the_point_estimate_guard_and_the_epoch_test_does_not() -> None:
    from xc_core.training.config import TrainConfig

    cfg = TrainConfig()
    assert cfg.text_only_fallback.guard_margin == 0.0 and cfg.fallback.guard_margin is None
    assert cfg.text_only_fallback.guards == cfg.fallback.guards == ("P@1", "PSP@1")
    # derived from ``fallback``: turning the rule off (or another confidence) reaches ramen's test too
    off = TrainConfig(fallback=FallbackPolicy(enabled=False, confidence=0.9), text_only_guard_margin=None)
    assert not off.text_only_fallback.enabled and off.text_only_fallback.confidence == 0.9
    assert off.text_only_fallback.guard_margin is None


def test_identical_rankings_and_a_disabled_policy() -> None:
    n = 50
    truth, top = _one_label_each(n), _ranking(n, np.arange(30))
    same = against_fallback("x", top, top, truth, None, "P@1", FallbackPolicy())
    assert not same.kept and same.gain == 0.0
    untested = against_fallback("x", top, _ranking(n, np.arange(29)), truth, None, "P@1",
                                FallbackPolicy(enabled=False))
    assert untested.kept and "disabled" in untested.reason


def test_a_noise_fusion_that_wins_in_sample_is_not_served() -> None:
    """A classifier W of pure noise beside a useful encoder: some alpha < 1 beats alpha = 1 on all validation rows by
    chance (the in-sample rule the stage used before served it), but not out of sample: alpha = 1 is served."""
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig
    from xc_core.classifier.stage import FusionGrid, choose_fusion

    rng = np.random.default_rng(0)
    n_labels, n_rows, dim = 200, 400, 32
    labels = rng.normal(size=(n_labels, dim)).astype(np.float32)
    labels /= np.linalg.norm(labels, axis=1, keepdims=True)
    positive = rng.integers(0, n_labels, n_rows)
    queries = labels[positive] + 0.35 * rng.normal(size=(n_rows, dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    noise = rng.normal(size=(n_labels, dim)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    truth = sp.csr_matrix((np.ones(n_rows), (np.arange(n_rows), positive)), shape=(n_rows, n_labels))
    grid = FusionGrid(queries, truth, labels, noise, 20, np.empty((0, 2), np.int64), np.ones(n_labels))
    cfg = ClassifierConfig(alphas=(0.8, 0.85, 0.9, 0.95, 1.0), lexical=LexicalConfig(weights=(0.0,)))
    served, tests, curve = choose_fusion(grid, cfg)
    in_sample = max(curve, key=lambda r: (r["P@1"], r["alpha"]))
    assert in_sample["alpha"] < 1, "the scenario must fool the in-sample rule"
    assert served["alpha"] == 1.0 and not tests["fusion"]["kept"]
    assert tests["fusion"]["tested_on_rows"] == n_rows, "cross-fitted: every row tests the choice"


def test_untrained_labels_get_an_offset_only_when_validation_shows_they_are_misranked() -> None:
    """Half the labels have no training positive (W = their text vector). Every validation row's positive sits a
    little below a decoy of the other kind: positives on untrained labels need a positive offset, positives on
    trained labels a negative one (it pushes the untrained decoys down) — each wins out of sample and is served.
    Without decoys no offset changes what matters and none is served."""
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig
    from xc_core.classifier.stage import FusionGrid, choose_fusion

    rng = np.random.default_rng(0)
    n_labels, n_rows, dim = 100, 400, 32
    labels = rng.normal(size=(n_labels, dim)).astype(np.float32)
    labels /= np.linalg.norm(labels, axis=1, keepdims=True)
    untrained = np.arange(n_labels) < 50
    cfg = ClassifierConfig(alphas=(1.0,), lexical=LexicalConfig(weights=(0.0,)))
    for case, sign in (("untrained positives", 1), ("trained positives", -1), ("no decoys", 0)):
        positive = rng.integers(0, 50, n_rows) + (0 if case == "untrained positives" else 50)
        decoy = (positive + 50) % n_labels
        noise = 0.05 * rng.normal(size=(n_rows, dim))
        queries = 0.6 * labels[positive] + (0.7 if sign else 0.0) * labels[decoy] + noise
        queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
        truth = sp.csr_matrix((np.ones(n_rows), (np.arange(n_rows), positive)), shape=(n_rows, n_labels))
        grid = FusionGrid(queries, truth, labels, labels, 20, np.empty((0, 2), np.int64), np.ones(n_labels),
                          untrained=untrained)
        served, tests, _ = choose_fusion(grid, cfg)
        test = tests["fusion"]
        assert test["kept"] is bool(sign) and np.sign(served["untrained_offset"]) == sign, (case, test["reason"])
        assert test["fallback"] == {"alpha": 1.0}


def test_row_terms_give_per_rows_terms_to_the_bit() -> None:
    """``RowTerms`` reads the truth once for many rankings of the same rows: its P@k, PSP@k and tail_P@k terms equal
    ``per_row``'s exactly (−1 pads, rows without positives, unequal propensities), and any other metric is
    ``per_row``'s own."""
    from xc_core.evaluation.analyses import tail_truth
    from xc_core.evaluation.fallback import RowTerms, per_row
    from xc_core.evaluation.metrics import ideal_weights

    rng = np.random.default_rng(5)
    n_rows, n_labels = 80, 30
    truth = sp.csr_matrix((rng.random((n_rows, n_labels)) < 0.08).astype(np.float32))
    truth[3] = 0  # a row without positives
    weights = 1.0 + 3.0 * rng.random(n_labels)
    bins = rng.integers(0, 5, n_labels)
    tail = tail_truth(truth, bins)
    best = ideal_weights(truth, weights, 5)
    terms = RowTerms(truth, weights, tail, best)
    for _ in range(5):
        top = np.argsort(rng.random((n_rows, n_labels)), axis=1)[:, :5]
        top[rng.random(top.shape) < 0.1] = -1
        for metric in ("P@1", "P@3", "P@5", "PSP@1", "PSP@5", "tail_P@5", "tail_P@1", "nDCG@3", "PSnDCG@5", "R@5",
                       "tail_PSP@5"):
            expected = per_row(metric, truth, top, weights, tail, best)
            found = terms(metric, top)
            assert found.keys() == expected.keys(), metric
            assert all(np.array_equal(found[k], expected[k]) for k in found), metric
    with pytest.raises(ValueError, match="need 10"):
        terms("R@10", top)


def test_the_fallback_tests_per_row_terms_aggregate_to_evaluate_psp_at_1_included() -> None:
    """``per_row``'s terms give ``evaluate``'s metrics: a mean for P/nDCG/R, a ratio of sums for the
    propensity-scored families at every k — at k = 1 too, where the best-gain denominator has one column (it was
    read as a mean's, and the PSP@1 guards compared weighted hits in no metric's units)."""
    from xc_core.evaluation.fallback import per_row
    from xc_core.evaluation.metrics import evaluate, top_k

    rng = np.random.default_rng(9)
    y_true = sp.random(200, 30, density=0.1, format="csr", random_state=9)
    y_score = sp.random(200, 30, density=0.5, format="csr", random_state=10)
    weights = rng.uniform(1, 4, 30)
    m = evaluate(y_true, y_score, k=5, inv_propensity=weights)
    top = top_k(y_score, 5)
    for metric in ("P@1", "P@5", "nDCG@3", "R@5"):
        assert per_row(metric, y_true, top, weights)[metric].mean() == pytest.approx(m[metric]), metric
    for metric in ("PSP@1", "PSP@5", "PSnDCG@1", "PSnDCG@5"):
        terms = per_row(metric, y_true, top, weights)
        ratio = terms[f"{metric}/numerator"].sum() / terms[f"{metric}/denominator"].sum()
        assert ratio == pytest.approx(m[metric]), metric
