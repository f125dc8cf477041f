"""The λ bandit: moves towards a known optimum, never below zero, seeded, resumable, fixable."""

from __future__ import annotations

import numpy as np

from xc_core.training.bandit import LambdaBandit


def _drive(bandit: LambdaBandit, targets: dict[str, float], periods: int) -> None:
    for _ in range(periods):
        w = bandit.weights()
        bandit.update(sum((w[n] - t) ** 2 for n, t in targets.items()))


def test_bandit_moves_each_lambda_towards_its_optimum_and_stays_non_negative() -> None:
    bandit = LambdaBandit(["task", "doc/a", "label/b"], {"task": 1.0, "doc/a": 0.1, "label/b": 0.1}, seed=0)
    _drive(bandit, {"task": 1.0, "doc/a": 0.5, "label/b": 0.0}, periods=3000)
    lam = dict(zip(bandit.names, bandit.lam, strict=True))
    assert abs(lam["doc/a"] - 0.5) < 0.15 < abs(0.1 - 0.5)
    assert lam["label/b"] < 0.05 and (bandit.lam >= 0).all()
    assert all(v >= 0 for v in bandit.weights().values())


def test_same_seed_same_trajectory_and_state_dict_resumes_identically() -> None:
    a, b = (LambdaBandit(["x"], {"x": 0.1}, seed=4) for _ in range(2))
    _drive(a, {"x": 0.3}, 20)
    _drive(b, {"x": 0.3}, 10)
    c = LambdaBandit(["x"], {"x": 0.1}, seed=99)
    c.load_state_dict(b.state_dict())
    _drive(c, {"x": 0.3}, 10)
    assert np.allclose(a.lam, c.lam) and a.weights() == c.weights()


def test_fixed_bandit_never_moves_and_due_marks_period_ends() -> None:
    bandit = LambdaBandit(["x", "y"], {"x": 1.0, "y": 0.1}, fixed=True, period=30)
    _drive(bandit, {"x": 0.0, "y": 1.0}, 50)
    assert bandit.weights() == {"x": 1.0, "y": 0.1}
    assert [i for i in range(1, 91) if bandit.due(i)] == [30, 60, 90]
    assert len(bandit.trajectory) == 50
