"""The λ bandit: exact one-point update, direction to a known optimum, clipping, seeding, resume, ablation."""

from __future__ import annotations

import doctest
import math
import pickle

import numpy as np
import pytest

from xc_core.training import bandit as bandit_module
from xc_core.training.bandit import LambdaBandit


def _quadratic(weights: dict[str, float], targets: dict[str, float]) -> float:
    return sum((weights[n] - t) ** 2 for n, t in targets.items())


def _perturbation(bandit: LambdaBandit) -> np.ndarray:
    return np.array(list(bandit.weights().values())) - bandit.lam


def test_update_is_the_one_point_gradient_step_against_a_running_mean_baseline() -> None:
    bandit = LambdaBandit(["a", "b"], {"a": 0.5, "b": 0.5}, variance=0.01, lr=0.01, seed=3)
    bandit.update(2.0)  # first period: only sets the baseline b = 2.0
    assert np.array_equal(bandit.lam, [0.5, 0.5])
    z = _perturbation(bandit)
    bandit.update(3.0)  # λ − lr · (3.0 − 2.0) · z / variance = 0.5 − z
    assert np.allclose(bandit.lam, 0.5 - z)
    lam, z = bandit.lam.copy(), _perturbation(bandit)
    bandit.update(1.0)  # baseline is now 0.9 · 2.0 + 0.1 · 3.0 = 2.1
    assert np.allclose(bandit.lam, np.maximum(lam - 0.01 * (1.0 - 2.1) * z / 0.01, 0.0))


def test_bandit_moves_lambdas_to_known_optima_and_never_below_zero() -> None:
    targets = {"task": 1.0, "doc/a": 0.5, "label/b": 0.0}
    bandit = LambdaBandit(list(targets), {"task": 1.0, "doc/a": 0.1, "label/b": 0.1}, period=30, seed=0)
    lowest = math.inf
    for _ in range(1500 * 30):
        weights = bandit.weights()
        lowest = min(lowest, *weights.values(), *bandit.lam)
        bandit.step(_quadratic(weights, targets))
    assert len(bandit.trajectory) == 1500
    lam = bandit.lambdas()
    assert abs(lam["doc/a"] - 0.5) < 0.1  # started 0.4 away
    assert lam["label/b"] < 0.03 and abs(lam["task"] - 1.0) < 0.1
    assert lowest >= 0.0


def test_a_lambda_at_zero_keeps_non_negative_perturbed_weights() -> None:
    bandit = LambdaBandit(["r"], {"r": 0.0}, seed=1)
    seen = []
    for _ in range(200):
        seen.append(bandit.weights()["r"])
        bandit.update(_quadratic(bandit.weights(), {"r": -1.0}))  # optimum below zero: λ must stop at 0
    assert min(seen) == 0.0 and max(seen) > 0.0  # clipped, not merely positive by luck
    assert bandit.lam[0] >= 0.0


def test_step_rewards_the_period_with_the_mean_of_its_losses() -> None:
    bandit = LambdaBandit(["x"], {"x": 0.1}, period=3)
    closed = [bandit.step(loss) for loss in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)]
    assert closed == [False, False, True, False, False, True]
    assert [(t["iteration"], t["reward"]) for t in bandit.trajectory] == [(3, 2.0), (6, 5.0)]


def test_a_period_without_a_reported_loss_waits_for_one() -> None:
    bandit = LambdaBandit(["x"], {"x": 0.1}, period=2)
    weights = bandit.weights()
    assert [bandit.step(None) for _ in range(3)] == [False, False, False]
    assert bandit.weights() == weights  # still the same λ̂: it has not been judged yet
    assert bandit.step(4.0) is True
    assert [(t["iteration"], t["reward"]) for t in bandit.trajectory] == [(4, 4.0)]


def test_the_new_perturbation_is_drawn_when_a_period_closes() -> None:
    bandit = LambdaBandit(["x"], {"x": 0.1}, period=2)
    first = bandit.weights()
    bandit.step(1.0)
    assert bandit.weights() == first
    bandit.step(1.0)
    assert bandit.weights() != first and bandit.trajectory[0]["lambda_hat"] == first


def test_a_non_finite_reward_changes_no_lambda_nor_the_baseline() -> None:
    bandit = LambdaBandit(["x", "y"], {"x": 0.3, "y": 0.3}, seed=2)
    bandit.update(1.0)
    bandit.update(1.5)
    lam, baseline = bandit.lam.copy(), bandit.baseline
    bandit.update(float("nan"))
    assert np.array_equal(bandit.lam, lam) and bandit.baseline == baseline
    assert math.isnan(bandit.trajectory[-1]["reward"])


def test_due_marks_the_end_of_every_period() -> None:
    bandit = LambdaBandit(["x"], {"x": 0.1}, period=30)
    assert [i for i in range(0, 91) if bandit.due(i)] == [30, 60, 90]


def test_same_seed_same_trajectory_and_another_seed_another() -> None:
    def run(seed: int) -> list[dict]:
        bandit = LambdaBandit(["x", "y"], {"x": 0.1, "y": 0.1}, period=5, seed=seed)
        for _ in range(100):
            bandit.step(_quadratic(bandit.weights(), {"x": 0.5, "y": 0.0}))
        return bandit.trajectory

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_state_dict_round_trip_mid_period_continues_identically() -> None:
    def drive(bandit: LambdaBandit, iterations: int) -> None:
        for _ in range(iterations):  # a reward every other iteration, so the period's mean matters
            bandit.step(_quadratic(bandit.weights(), {"x": 0.4, "y": 0.2}) if bandit.iteration % 2 else None)

    uninterrupted = LambdaBandit(["x", "y"], {"x": 0.1, "y": 0.1}, period=7, seed=5)
    drive(uninterrupted, 200)
    first = LambdaBandit(["x", "y"], {"x": 0.1, "y": 0.1}, period=7, seed=5)
    drive(first, 95)  # 95 = 13 periods + 4 iterations: the accumulator is mid-period
    resumed = LambdaBandit(["x", "y"], {"x": 0.1, "y": 0.1}, period=7, seed=99)
    resumed.load_state_dict(pickle.loads(pickle.dumps(first.state_dict())))  # as a checkpoint would
    drive(resumed, 105)
    assert resumed.trajectory == uninterrupted.trajectory
    assert resumed.weights() == uninterrupted.weights() and np.array_equal(resumed.lam, uninterrupted.lam)


def test_loading_the_state_of_another_term_list_is_refused() -> None:
    state = LambdaBandit(["task", "doc/a"], {"task": 1.0, "doc/a": 0.1}).state_dict()
    with pytest.raises(ValueError, match="doc/a"):
        LambdaBandit(["task", "label/a"], {"task": 1.0, "label/a": 0.1}).load_state_dict(state)


def test_fixed_bandit_never_moves_but_records_rewards() -> None:
    initial = {"task": 1.0, "doc/a": 0.1}
    bandit = LambdaBandit(list(initial), initial, period=3, fixed=True)
    for _ in range(300):
        assert bandit.weights() == initial
        bandit.step(_quadratic(bandit.weights(), {"task": 0.0, "doc/a": 1.0}))
    assert bandit.lambdas() == initial and len(bandit.trajectory) == 100


def test_docstring_example_holds() -> None:
    assert doctest.testmod(bandit_module, raise_on_error=False).failed == 0
