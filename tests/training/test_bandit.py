"""The λ bandit: it learns on a real optimisation (a useful anchor set's λ rises, a noisy one's falls), its
step is the standardized-change update, the loss's units and steady drift change nothing, clipping, frozen
terms, seeding, exact resume, the fixed ablation."""

from __future__ import annotations

import doctest
import math
import pickle
from collections.abc import Callable, Iterator
from typing import cast

import numpy as np
import pytest
import torch

from xc_core.training import bandit as bandit_module
from xc_core.training.bandit import LambdaBandit

INITIAL = {"task": 1.0, "useful": 0.1, "noise": 0.1}  # RAMEN's initialisation: λ_l = 1, every regularizer 0.1


@pytest.fixture
def one_thread() -> Iterator[None]:
    # The model is tiny: thread hand-offs would cost more than the arithmetic (10x on two cores).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _train_with_anchor_sets(seed: int, periods: int, loss_units: float = 1.0) -> LambdaBandit:
    """A label classifier W (8 labels × 16 features) trained by SGD on 16 examples, 30% of them mislabelled, with
    two regularizers pulling W's rows toward an anchor set's label embeddings: "useful" holds every label's
    true embedding (plus noise), "noise" holds the embedding of another label, a random derangement. The
    bandit weighs the terms and is rewarded with the cross-entropy on 512 held-out, correctly labelled
    examples (times ``loss_units``), exactly as the trainer drives it: ``begin``, then ``update`` when ``due``.
    """
    labels, features = 8, 16
    g = torch.Generator().manual_seed(seed)
    truth = torch.randn(labels, features, generator=g)

    def sample(n: int, mislabel: float) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, features, generator=g)
        y = (x @ truth.T).argmax(1)
        wrong = torch.rand(n, generator=g) < mislabel
        return x, torch.where(wrong, torch.randint(0, labels, (n,), generator=g), y)

    x_train, y_train = sample(16, 0.3)
    x_val, y_val = sample(512, 0.0)
    order = torch.randperm(labels, generator=g)
    wrong_label = torch.empty_like(order)
    wrong_label[order] = torch.roll(order, 1)  # a derangement: no label keeps its own embedding
    anchors = {"useful": truth + 0.5 * torch.randn(labels, features, generator=g),
               "noise": (truth + 0.5 * torch.randn(labels, features, generator=g))[wrong_label]}
    weights = torch.zeros(labels, features, requires_grad=True)
    optimizer = torch.optim.SGD([weights], lr=0.1)
    cross_entropy = torch.nn.functional.cross_entropy

    def validation_loss() -> float:
        with torch.no_grad():
            return loss_units * float(cross_entropy(x_val @ weights.T, y_val))

    bandit = LambdaBandit(list(INITIAL), INITIAL, seed=seed)  # the paper's variance, lr and period
    bandit.begin(validation_loss())
    for iteration in range(1, periods * bandit.period + 1):
        lam = bandit.weights()
        terms = {"task": cross_entropy(x_train @ weights.T, y_train),
                 **{name: ((weights - target) ** 2).sum(1).mean() for name, target in anchors.items()}}
        optimizer.zero_grad()
        cast(torch.Tensor, sum(lam[name] * term for name, term in terms.items())).backward()  # a sum of tensors
        optimizer.step()
        if bandit.due(iteration):
            bandit.update(validation_loss())
    return bandit


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_useful_anchor_sets_lambda_rises_and_the_noisy_ones_falls(seed: int, one_thread: None) -> None:
    # Issue #11: "with one anchor set carrying the labels' signal and one of pure noise, λ of the noisy set
    # falls and λ of the useful set rises within a bounded number of steps": 60 periods of 30 iterations.
    # The loss is reported in units where it is ≈ 0.05, the triplet loss's magnitude on a real run; there
    # the level-reward bandit barely moved (median over seeds 0–19: useful 0.127, noise 0.082) and fails.
    # Over seeds 0–49 this one ends with useful ≥ 0.228 every time and noise ≤ 0.05 in 49 (max 0.059).
    lam = _train_with_anchor_sets(seed, periods=60, loss_units=0.03).lambdas()
    assert lam["useful"] >= 2 * INITIAL["useful"], lam
    assert lam["noise"] <= INITIAL["noise"] / 2, lam
    assert lam["task"] == INITIAL["task"]  # the reference weight is frozen by default


def test_the_lambdas_do_not_depend_on_the_units_of_the_loss(one_thread: None) -> None:
    # The level-reward bandit stepped by lr·loss: with a triplet loss of ≈0.05 it barely moved.
    natural, scaled = (_train_with_anchor_sets(0, periods=15, loss_units=units) for units in (1.0, 0.01))
    assert [t["reward_std"] for t in scaled.trajectory[1:]] == pytest.approx(
        [t["reward_std"] for t in natural.trajectory[1:]], rel=1e-6, abs=1e-9)
    assert np.allclose(scaled.lam, natural.lam, rtol=1e-6) and not np.allclose(natural.lam[1:], 0.1)


def _drive(bandit: LambdaBandit, periods: int, loss: Callable[[dict[str, float], int], float]) -> None:
    for k in range(periods):
        bandit.update(loss(bandit.weights(), k))


def _quadratic(targets: dict[str, float]) -> Callable[[dict[str, float], int], float]:
    return lambda weights, _: sum((weights[n] - t) ** 2 for n, t in targets.items())


def test_a_steady_drift_of_the_loss_and_its_scale_change_no_step() -> None:
    def run(units: float, drift: float) -> LambdaBandit:
        bandit = LambdaBandit(["task", "a", "b"], {"task": 1.0, "a": 0.1, "b": 0.1}, period=5, seed=4)
        bandit.begin(units * 3.0)
        _drive(bandit, 200, lambda w, k: units * (3.0 - drift * (k + 1) + _quadratic({"a": 0.5, "b": 0.0})(w, k)))
        return bandit

    reference = run(1.0, 0.0)
    for units, drift in ((0.001, 0.0), (1.0, 0.2), (0.01, 0.05)):
        assert np.allclose(run(units, drift).lam, reference.lam, atol=1e-9)
    assert reference.lambdas()["a"] > 0.2 and reference.lambdas()["b"] < 0.05


def test_update_steps_by_the_standardized_change_times_the_standardized_perturbation() -> None:
    bandit = LambdaBandit(["a", "b"], {"a": 0.5, "b": 0.5}, variance=0.01, lr=0.01, seed=3, frozen=[])
    bandit.begin(2.0)
    bandit.update(1.0)  # Δ = −1: only seeds the baseline
    assert np.array_equal(bandit.lam, [0.5, 0.5]) and bandit.trajectory[0]["reward_std"] is None
    z = bandit.z.copy()
    bandit.update(1.5)  # Δ = 0.5, c = 0.5 − (−1) = 1.5, scale √(c²) = 1.5: r̃ = 1, λ − lr · 1 · z / σ
    assert bandit.trajectory[1]["reward"] == 0.5 and bandit.trajectory[1]["reward_std"] == pytest.approx(1.0)
    assert np.allclose(bandit.lam, 0.5 - 0.01 * z / 0.1)
    lam, z = bandit.lam.copy(), bandit.z.copy()
    bandit.update(1.0)  # Δ = −0.5, baseline = mean(−1, 0.5) bias-corrected = (0.9·0.1·−1 + 0.1·0.5)/0.19
    baseline = (0.09 * -1.0 + 0.1 * 0.5) / 0.19
    c = -0.5 - baseline
    scale = math.sqrt((0.9 * 0.1 * 1.5 ** 2 + 0.1 * c ** 2) / 0.19)
    assert bandit.trajectory[2]["reward_std"] == pytest.approx(c / scale)
    assert np.allclose(bandit.lam, lam - 0.01 * (c / scale) * z / 0.1)


def test_without_begin_the_first_update_only_records_the_level() -> None:
    bandit = LambdaBandit(["task", "a"], {"task": 1.0, "a": 0.1})
    bandit.update(0.7)
    assert bandit.trajectory[0]["loss"] == 0.7 and bandit.trajectory[0]["reward"] is None
    bandit.update(0.6)
    assert bandit.trajectory[1]["reward"] == pytest.approx(-0.1)
    with pytest.raises(RuntimeError, match="fresh"):
        bandit.begin(0.5)  # a resumed run has its start level in the state already


def test_bandit_moves_lambdas_to_known_optima_and_stays_in_bounds() -> None:
    targets = {"task": 1.0, "a": 0.5, "b": 0.0, "c": 1.5}
    bandit = LambdaBandit(list(targets), {"task": 1.0, "a": 0.1, "b": 0.1, "c": 0.8}, seed=0, frozen=[],
                          lambda_max=1.2)
    bandit.begin(0.0)
    lowest, highest = math.inf, -math.inf
    for _ in range(1500):
        lowest, highest = min(lowest, *bandit.weights().values()), max(highest, *bandit.weights().values())
        _drive(bandit, 1, _quadratic(targets))
    lam = bandit.lambdas()
    assert abs(lam["a"] - 0.5) < 0.1 and lam["b"] < 0.05 and abs(lam["task"] - 1.0) < 0.1  # a started 0.4 away
    assert lam["c"] > 1.1  # pushed to the bound: its optimum 1.5 lies above lambda_max
    assert lowest >= 0.0 and highest <= 1.2


def test_a_lambda_at_zero_keeps_non_negative_perturbed_weights() -> None:
    bandit = LambdaBandit(["task", "r"], {"task": 1.0, "r": 0.0}, seed=1)
    seen = []
    for _ in range(200):
        seen.append(bandit.weights()["r"])
        _drive(bandit, 1, _quadratic({"r": -1.0}))  # optimum below zero: λ must stop at 0
    assert min(seen) == 0.0 and max(seen) > 0.0  # clipped, not merely positive by luck
    assert bandit.lam[1] >= 0.0


def test_the_first_name_is_frozen_by_default_and_frozen_names_are_checked() -> None:
    bandit = LambdaBandit(["task", "a"], {"task": 1.0, "a": 0.1})
    _drive(bandit, 50, _quadratic({"task": 0.0, "a": 0.5}))
    assert all(t["lambda_hat"]["task"] == 1.0 for t in bandit.trajectory) and bandit.lambdas()["task"] == 1.0
    everything = LambdaBandit(["task", "a"], {"task": 1.0, "a": 0.1}, frozen=[])
    assert everything.weights()["task"] != 1.0
    with pytest.raises(ValueError, match="tsak"):
        LambdaBandit(["task", "a"], {"task": 1.0, "a": 0.1}, frozen=["tsak"])
    with pytest.raises(ValueError, match="lambda_max"):
        LambdaBandit(["task", "a"], {"task": 1.0, "a": 2.5})


def test_the_new_perturbation_is_drawn_when_a_period_closes() -> None:
    bandit = LambdaBandit(["task", "x"], {"task": 1.0, "x": 0.5}, period=2)
    first = bandit.weights()
    assert bandit.weights() == first  # reading does not draw
    bandit.update(1.0)
    assert bandit.weights() != first and bandit.trajectory[0]["lambda_hat"] == first


def test_a_non_finite_loss_moves_nothing_and_the_next_period_restarts_from_its_end_level() -> None:
    bandit = LambdaBandit(["x", "y"], {"x": 0.3, "y": 0.3}, seed=2, frozen=[])
    bandit.begin(2.0)
    bandit.update(1.0)
    bandit.update(1.5)
    before = bandit.state_dict()
    bandit.update(float("nan"))
    assert np.array_equal(bandit.lam, before["lam"]) and bandit.change_mean == before["change_mean"]
    assert bandit.square_mean == before["square_mean"] and bandit.changes_seen == before["changes_seen"]
    assert math.isnan(bandit.trajectory[-1]["loss"]) and bandit.trajectory[-1]["reward"] is None
    lam = bandit.lam.copy()
    bandit.update(1.2)  # no start level: records 1.2 as the next one, no step
    assert bandit.trajectory[-1]["reward"] is None and np.array_equal(bandit.lam, lam)
    bandit.update(1.1)
    assert bandit.trajectory[-1]["reward"] == pytest.approx(-0.1) and not np.array_equal(bandit.lam, lam)


def test_due_marks_the_end_of_every_period() -> None:
    bandit = LambdaBandit(["x"], {"x": 0.1}, period=30)
    assert [i for i in range(0, 91) if bandit.due(i)] == [30, 60, 90]


def test_same_seed_same_trajectory_and_another_seed_another() -> None:
    def run(seed: int) -> list[dict]:
        bandit = LambdaBandit(["task", "x", "y"], {"task": 1.0, "x": 0.1, "y": 0.1}, period=5, seed=seed)
        _drive(bandit, 100, _quadratic({"x": 0.5, "y": 0.0}))
        return bandit.trajectory

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_state_dict_round_trip_continues_identically() -> None:
    loss = _quadratic({"x": 0.4, "y": 0.2})
    uninterrupted = LambdaBandit(["task", "x", "y"], {"task": 1.0, "x": 0.1, "y": 0.1}, seed=5)
    uninterrupted.begin(1.0)
    _drive(uninterrupted, 60, loss)
    first = LambdaBandit(["task", "x", "y"], {"task": 1.0, "x": 0.1, "y": 0.1}, seed=5)
    first.begin(1.0)
    _drive(first, 25, loss)
    resumed = LambdaBandit(["task", "x", "y"], {"task": 1.0, "x": 0.1, "y": 0.1}, seed=99)
    resumed.load_state_dict(pickle.loads(pickle.dumps(first.state_dict())))  # as a checkpoint would
    _drive(resumed, 35, loss)
    assert resumed.trajectory == uninterrupted.trajectory
    assert resumed.weights() == uninterrupted.weights() and np.array_equal(resumed.lam, uninterrupted.lam)
    assert resumed.state_dict() == uninterrupted.state_dict()


def test_loading_the_state_of_another_term_list_is_refused() -> None:
    state = LambdaBandit(["task", "doc/a"], {"task": 1.0, "doc/a": 0.1}).state_dict()
    with pytest.raises(ValueError, match="doc/a"):
        LambdaBandit(["task", "label/a"], {"task": 1.0, "label/a": 0.1}).load_state_dict(state)


def test_fixed_bandit_never_moves_but_records_the_losses() -> None:
    initial = {"task": 1.0, "doc/a": 0.1}
    bandit = LambdaBandit(list(initial), initial, period=3, fixed=True)
    bandit.begin(2.0)
    for _ in range(100):
        assert bandit.weights() == initial
        _drive(bandit, 1, _quadratic({"task": 0.0, "doc/a": 1.0}))
    assert bandit.lambdas() == initial and len(bandit.trajectory) == 100
    assert all(t["reward"] is not None for t in bandit.trajectory)


def test_docstring_example_holds() -> None:
    assert doctest.testmod(bandit_module, raise_on_error=False).failed == 0
