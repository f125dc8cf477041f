"""Online tuning of the objective's weights λ by a bandit (RAMEN §3).

λ_l starts at 1 and every regularizer λ at 0.1. Every ``period`` iterations each λ is perturbed,
λ̂ = max(0, λ + z) with z ~ N(0, variance), λ̂ is used for the next ``period`` iterations, and then λ is
updated with the one-point gradient estimate of Flaxman et al. (2005):

    ĝ = (f(λ̂) − b) · z / variance,   λ ← max(0, λ − lr · ĝ),

where f is the reward *loss* measured at the end of the period and b a running mean of past f (a baseline
that reduces variance without biasing the estimate).

The reward. RAMEN leaves it ambiguous; minimising the regularized objective itself would drive every λ to
zero (a smaller weight always means a smaller loss). xc therefore uses the task loss L on a held-out
validation mini-batch — the λs are tuned for what retrieval needs — and keeps it pluggable: the caller
passes whatever loss it measures to :meth:`update`.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class LambdaBandit:
    def __init__(self, names: list[str], initial: dict[str, float], variance: float = 0.01, lr: float = 0.01,
                 period: int = 30, seed: int = 0, fixed: bool = False) -> None:
        self.names = list(names)
        self.lam = np.array([initial[n] for n in self.names], dtype=np.float64)
        self.variance, self.lr, self.period, self.fixed = variance, lr, period, fixed
        self.rng = np.random.default_rng(seed)
        self.baseline: float | None = None
        self.updates = 0
        self.z = np.zeros(len(self.names))
        self.trajectory: list[dict[str, Any]] = []
        self._perturb()

    def _perturb(self) -> None:
        self.z = np.zeros(len(self.names)) if self.fixed else self.rng.normal(0.0, np.sqrt(self.variance), len(self.names))

    def weights(self) -> dict[str, float]:
        """The λ̂ in use for the current period (never negative)."""
        return {n: float(v) for n, v in zip(self.names, np.maximum(self.lam + self.z, 0.0), strict=True)}

    def due(self, iteration: int) -> bool:
        """True at the end of each period (``iteration`` counts from 1)."""
        return iteration > 0 and iteration % self.period == 0

    def update(self, loss: float) -> None:
        """Close the period with the reward loss f(λ̂): one-point gradient step, then a new perturbation."""
        self.updates += 1
        record = {"iteration": self.updates * self.period, "reward": float(loss),
                  "lambda": dict(zip(self.names, self.lam.tolist(), strict=True)), "lambda_hat": self.weights()}
        if not self.fixed:
            baseline = loss if self.baseline is None else self.baseline
            gradient = (loss - baseline) * self.z / self.variance
            self.lam = np.maximum(self.lam - self.lr * gradient, 0.0)
            self.baseline = loss if self.baseline is None else 0.9 * self.baseline + 0.1 * loss
        self.trajectory.append(record)
        self._perturb()

    def state_dict(self) -> dict[str, Any]:
        return {"lam": self.lam.tolist(), "z": self.z.tolist(), "baseline": self.baseline, "updates": self.updates,
                "rng": self.rng.bit_generator.state, "trajectory": list(self.trajectory)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lam = np.array(state["lam"], dtype=np.float64)
        self.z = np.array(state["z"], dtype=np.float64)
        self.baseline, self.updates = state["baseline"], state["updates"]
        self.rng.bit_generator.state = state["rng"]
        self.trajectory = list(state["trajectory"])
