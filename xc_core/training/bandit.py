"""Online tuning of the objective's weights λ by a bandit (RAMEN §3).

The objective is λ_l·L + Σ_t (λ_x^t R_x^t + λ_z^t R_z^t). λ_l starts at 1 and every regularizer λ at 0.1
(the caller passes them as ``initial``). Every ``period`` iterations each λ is perturbed,

    λ̂ = max(0, λ + z),   z ~ N(0, variance · I)   (variance 0.01: std 0.1),

λ̂ weighs the objective for the next ``period`` iterations, and the reward f(λ̂) measured for that period
drives a one-point gradient estimate (Flaxman, Kalai & McMahan 2005, "Online convex optimization in the
bandit setting", in its Gaussian-smoothing form):

    ĝ = (f(λ̂) − b) · z / variance,   λ ← max(0, λ − lr · ĝ).

b is an exponential running mean of past rewards (``baseline_decay``). Subtracting it leaves ĝ unbiased —
b does not depend on the current z and E[z] = 0 — but removes most of its variance; an exponential rather
than a cumulative mean because the reward drifts down as the encoder learns. The first period has no
baseline yet, so it only sets b and leaves λ where it is.

The reward is a LOSS to minimise, and it is pluggable: the caller passes whatever it measures. Minimising
the regularized objective itself would drive every λ to zero (a smaller weight always means a smaller
weighted loss), so the trainer passes the task loss L on a held-out validation mini-batch: the λs are tuned
for what retrieval needs. A non-finite reward (a diverged batch) updates nothing and is only recorded.

Two ways to drive it — use one per run:

* ``step(loss)`` every iteration, with a reward loss or ``None`` when none was measured. The mean of the
  losses reported during the period is f(λ̂); ``step`` returns True when it closed a period (updated λ and
  drew a new λ̂). A period with no reported loss is extended until one arrives, so λ̂ is never judged
  without a measurement.
* ``due(iteration)`` with the caller's own 1-based iteration count, and ``update(loss)`` once when it is
  True, with a single reward measured at the end of the period (cheaper when the reward costs a forward
  pass).

``fixed=True`` (the ``ramen_no_bandit`` ablation) keeps every weight at ``initial`` forever while still
recording the rewards. ``state_dict()`` holds everything, including the RNG, so a resumed run draws the
same perturbations as an uninterrupted one.

    >>> bandit = LambdaBandit(["task", "doc/cosession"], {"task": 1.0, "doc/cosession": 0.1}, period=2)
    >>> weights = bandit.weights()            # λ̂ for the first period
    >>> [bandit.step(loss) for loss in (0.5, 0.3)]
    [False, True]
    >>> bandit.trajectory[0]["reward"]        # mean of the period's losses
    0.4
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


class LambdaBandit:
    """Bandit over the objective weights λ; see the module docstring for the update and the reward."""

    def __init__(self, names: list[str], initial: dict[str, float], variance: float = 0.01, lr: float = 0.01,
                 period: int = 30, seed: int = 0, fixed: bool = False, baseline_decay: float = 0.9) -> None:
        if not names or len(set(names)) != len(names):
            raise ValueError(f"names must be non-empty and unique, got {names}")
        if missing := [n for n in names if n not in initial]:
            raise ValueError(f"no initial λ for {missing}")
        if variance <= 0 or lr < 0 or period < 1 or not 0 <= baseline_decay < 1:
            raise ValueError("need variance > 0, lr >= 0, period >= 1 and 0 <= baseline_decay < 1")
        self.names = list(names)
        self.lam = np.array([float(initial[n]) for n in self.names], dtype=np.float64)
        if (self.lam < 0).any():
            raise ValueError(f"initial λ must be >= 0, got {initial}")
        self.variance, self.lr, self.period, self.fixed = variance, lr, period, fixed
        self.baseline_decay = baseline_decay
        self.rng = np.random.default_rng(seed)
        self.baseline: float | None = None
        self.iteration = 0  # calls to step()
        self._period_start, self._loss_sum, self._loss_count = 0, 0.0, 0
        self.trajectory: list[dict[str, Any]] = []
        self.z = self._draw()

    # -- reading -------------------------------------------------------------------------------
    def weights(self) -> dict[str, float]:
        """The λ̂ = max(0, λ + z) to weigh the objective with during the current period."""
        return self._named(np.maximum(self.lam + self.z, 0.0))

    def lambdas(self) -> dict[str, float]:
        """The unperturbed λ the bandit is learning."""
        return self._named(self.lam)

    def due(self, iteration: int) -> bool:
        """True when ``iteration`` (1-based, counted by the caller) ends a period: call ``update`` then."""
        return iteration > 0 and iteration % self.period == 0

    # -- driving -------------------------------------------------------------------------------
    def step(self, loss: float | None = None) -> bool:
        """Count one iteration and its reward loss (if measured); True when this closed a period."""
        self.iteration += 1
        if loss is not None:
            self._loss_sum, self._loss_count = self._loss_sum + float(loss), self._loss_count + 1
        if self.iteration - self._period_start < self.period or self._loss_count == 0:
            return False
        self._close(self._loss_sum / self._loss_count, self.iteration)
        self._period_start, self._loss_sum, self._loss_count = self.iteration, 0.0, 0
        return True

    def update(self, loss: float) -> None:
        """Close the current period with its reward loss f(λ̂): one-point gradient step, new perturbation."""
        self._close(float(loss), (len(self.trajectory) + 1) * self.period)

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "lam": self.lam.tolist(), "z": self.z.tolist(), "baseline": self.baseline,
                "iteration": self.iteration, "period_start": self._period_start, "loss_sum": self._loss_sum,
                "loss_count": self._loss_count, "rng": copy.deepcopy(self.rng.bit_generator.state),
                "trajectory": copy.deepcopy(self.trajectory)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # A different term list would silently pair every λ with the wrong loss.
        if state.get("names", self.names) != self.names:
            raise ValueError(f"bandit state is for {state['names']}, this bandit tunes {self.names}")
        self.lam = np.array(state["lam"], dtype=np.float64)
        self.z = np.array(state["z"], dtype=np.float64)
        self.baseline = state["baseline"]
        # .get: checkpoints written before step() existed have no accumulator to restore.
        self.iteration, self._period_start = state.get("iteration", 0), state.get("period_start", 0)
        self._loss_sum, self._loss_count = state.get("loss_sum", 0.0), state.get("loss_count", 0)
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        self.trajectory = copy.deepcopy(state["trajectory"])

    # -- internals -----------------------------------------------------------------------------
    def _named(self, values: np.ndarray) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, values, strict=True)}

    def _draw(self) -> np.ndarray:
        if self.fixed:
            return np.zeros(len(self.names))
        return self.rng.normal(0.0, math.sqrt(self.variance), len(self.names))

    def _close(self, reward: float, iteration: int) -> None:
        self.trajectory.append({"iteration": iteration, "lambda": self.lambdas(), "lambda_hat": self.weights(),
                                "reward": reward})
        if not math.isfinite(reward):
            log.warning("bandit: non-finite reward %s at iteration %d, λ left unchanged", reward, iteration)
        elif not self.fixed:
            self._gradient_step(reward)
        log.debug("bandit iteration %d: reward %.5f, λ %s", iteration, reward, self.lambdas())
        self.z = self._draw()

    def _gradient_step(self, reward: float) -> None:
        baseline = reward if self.baseline is None else self.baseline
        gradient = (reward - baseline) * self.z / self.variance
        self.lam = np.maximum(self.lam - self.lr * gradient, 0.0)
        decay = self.baseline_decay
        self.baseline = reward if self.baseline is None else decay * self.baseline + (1 - decay) * reward
