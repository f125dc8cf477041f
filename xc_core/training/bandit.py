"""Online tuning of the objective's weights λ by a bandit (RAMEN §3, "Bandit Learning for Regularization
Constants", after Flaxman, Kalai & McMahan 2005, "Online convex optimization in the bandit setting").

The objective is λ_l·L + Σ_t (λ_x^t R_x^t + λ_z^t R_z^t); λ_l starts at 1 and every regularizer λ at 0.1
(the caller passes them as ``initial``). Every ``period`` iterations each tuned λ is perturbed,

    λ̂ = clip(λ + z, 0, lambda_max),   z ~ N(0, variance · I)   (variance 0.01: σ = 0.1),

and λ̂ weighs the objective for the next ``period`` iterations. At the period's end the caller measures the
task loss L_k on a held-out validation batch and calls ``update(L_k)``. The period is judged by

    reward      Δ_k = L_k − L_{k−1}      (how much the period changed the validation loss: lower is better)
    centred     c_k = Δ_k − b,       b = exponential mean of the earlier Δ         (``decay`` β = 0.9)
    standardized r̃_k = c_k / max(s, min_scale),  s = exponential RMS of the c up to and including c_k

and one gradient-free step (Gaussian smoothing, the form of Flaxman et al.'s one-point estimate):

    ĝ = r̃_k · z / σ,   λ ← clip(λ − lr · ĝ, 0, lambda_max).

Both exponential means are bias-corrected as in Adam, so early on they are plain means of what was seen.
b and the earlier c do not depend on the current z and E[z] = 0, so the baseline adds no bias; s includes
c_k (as Adam's second moment includes the current gradient) so the very first step already has unit scale
and |r̃| ≤ 1/√(1−β) ≈ 3.2: no single period can throw λ far. r̃ and z/σ are both unit-scale, so ``lr`` is
the typical move of λ per period in λ's own units, whatever the magnitude of the loss: when the reward
reflects one λ's perturbation with correlation ρ, that λ drifts by ≈ ρ·lr per period (lr 0.01: 0.01 per
period at most, ≈ 0.3 over 100 periods at ρ = 0.3); ``variance`` only sets how widely λ̂ explores. The
price of unit scale: a λ whose term has no effect on the loss random-walks by ≈ lr·√k over k periods
(0.1 over 100 at lr 0.01) instead of standing still. ``min_scale`` (in the loss's units) keeps a loss that
has stopped moving altogether from being blown up into unit-scale noise.

What differs from the paper, and why:

* The paper's reward is P, the regularized mini-batch objective summed over the period. Its minimum is at
  λ = 0 (a smaller weight always means a smaller weighted loss), so we judge λ̂ by the task loss on held-out
  data instead: the λs are tuned for what retrieval needs.
* The reward is the CHANGE of that loss over the period, not its level. The level is mostly the sum of
  every earlier period's progress, which drifts down as the encoder learns and swamps the effect of the
  current λ̂; the change removes that common history. The running baseline then removes what drift is left
  in the changes (they shrink as training converges).
* The paper steps by η·P/(λ̂ − λ) = η·P/z: unbounded as z → 0, and since P > 0 always its sign is the
  sign of z whatever P says. Flaxman et al.'s estimate is f·z (over the smoothing radius), and with a
  baseline (f − b)·z/σ². This module's previous version used that on the raw loss level: with a loss of
  ≈ 0.05 and lr 0.01 a step moved λ by ≈ 0.002 — on a real run λ_reg stayed in 0.096–0.103 while λ̂ swung
  0 … 0.23. Standardizing the reward and dividing by σ, not σ², gives a step of scale ``lr`` instead.
* λ and λ̂ are clipped to [0, ``lambda_max``]; the paper only implies λ ≥ 0. The default 2 bounds a
  runaway (a regularizer may reach twice the task's weight, no more) and still lets a tuned task weight
  (``frozen=[]``, starting at 1) be perturbed upward as well as downward.
* ``frozen`` names keep their initial λ; by default the first name, which the trainer makes the task term.
  Scaling every λ by c only rescales the objective — a change of learning rate for SGD, nothing at all for
  Adam but its ε — so λ_l is redundant; tuning it (as the paper does) would add a perturbation that only
  moves the effective learning rate and puts its noise into every other λ's reward. ``frozen=[]`` tunes
  every λ, as in the paper.

Driving it: ``begin(L_0)`` once before the first iteration, with the validation loss of the starting encoder,
gives the first period a start level; without it the first ``update`` only records the level (and a resumed
run already has it in its state: call ``begin`` only on a fresh bandit). Then every iteration weigh the
terms by ``weights()``, and when ``due(iteration)`` (the caller's 1-based count) is True call
``update(L_k)``. The first measured change only seeds the baseline. A non-finite loss (a diverged batch)
moves nothing and is only recorded; the next period then has no start level and only records its end.

``fixed=True`` (the ``ramen_no_bandit`` ablation) keeps λ̂ = λ = ``initial`` forever while still recording
the losses. ``state_dict()`` holds everything, including the RNG, so a resumed run draws the same
perturbations and makes the same steps as an uninterrupted one. ``trajectory`` has one entry per period:
iteration, lambda (λ during the period), lambda_hat (λ̂), loss (L_k), reward (Δ_k) and reward_std (r̃_k);
the last two are None where the period could not be judged.

    >>> bandit = LambdaBandit(["task", "doc/cosession"], {"task": 1.0, "doc/cosession": 0.1}, period=2)
    >>> bandit.begin(0.5)                       # validation loss of the starting encoder
    >>> bandit.weights()["task"]                # the first name (the task term) is frozen
    1.0
    >>> [bandit.due(i) for i in (1, 2)]
    [False, True]
    >>> bandit.update(0.25)                     # first change Δ = −0.25 only seeds the baseline: λ stays
    >>> bandit.trajectory[0]["reward"], bandit.trajectory[0]["reward_std"], bandit.lambdas()["doc/cosession"]
    (-0.25, None, 0.1)
    >>> z = bandit.weights()["doc/cosession"] - 0.1
    >>> bandit.update(0.125)                    # Δ = −0.125: 0.125 worse than usual, one scale: r̃ = 1
    >>> bandit.trajectory[1]["reward"], bandit.trajectory[1]["reward_std"]
    (-0.125, 1.0)
    >>> round(bandit.lambdas()["doc/cosession"], 12) == round(0.1 - 0.01 * 1.0 * z / 0.1, 12)  # λ − lr·r̃·z/σ
    True
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


class LambdaBandit:
    """Bandit over the objective weights λ; see the module docstring for the reward and the update."""

    def __init__(self, names: list[str], initial: dict[str, float], variance: float = 0.01, lr: float = 0.01,
                 period: int = 30, seed: int = 0, fixed: bool = False, frozen: Sequence[str] | None = None,
                 lambda_max: float = 2.0, decay: float = 0.9, min_scale: float = 1e-6) -> None:
        if not names or len(set(names)) != len(names):
            raise ValueError(f"names must be non-empty and unique, got {names}")
        if missing := [n for n in names if n not in initial]:
            raise ValueError(f"no initial λ for {missing}")
        if variance <= 0 or lr < 0 or period < 1 or not 0 <= decay < 1 or min_scale <= 0 or lambda_max <= 0:
            raise ValueError("need variance > 0, lr >= 0, period >= 1, 0 <= decay < 1, min_scale > 0 and "
                             "lambda_max > 0")
        frozen = list(names[:1] if frozen is None else frozen)
        if unknown := [n for n in frozen if n not in names]:
            raise ValueError(f"frozen names {unknown} are not among {names}")
        self.names = list(names)
        self.lam = np.array([float(initial[n]) for n in self.names], dtype=np.float64)
        self.tuned = np.array([not fixed and n not in frozen for n in self.names])
        if (self.lam < 0).any() or (self.lam[self.tuned] > lambda_max).any():
            raise ValueError(f"initial λ must be >= 0 and tuned ones <= lambda_max={lambda_max}, got {initial}")
        self.variance, self.lr, self.period, self.fixed = variance, lr, period, fixed
        self.lambda_max, self.decay, self.min_scale = lambda_max, decay, min_scale
        self.rng = np.random.default_rng(seed)
        self.start_loss: float | None = None  # L_{k−1}: the validation loss when the current period began
        # Bias-corrected exponential means: of the changes Δ (baseline) and of the squared centred c (scale).
        self.change_mean, self.changes_seen = 0.0, 0
        self.square_mean, self.squares_seen = 0.0, 0
        self.trajectory: list[dict[str, Any]] = []
        self.z = self._draw()

    # -- reading -------------------------------------------------------------------------------
    def weights(self) -> dict[str, float]:
        """The λ̂ = clip(λ + z, 0, lambda_max) to weigh the objective with during the current period."""
        return self._named(self._perturbed())

    def lambdas(self) -> dict[str, float]:
        """The unperturbed λ the bandit is learning."""
        return self._named(self.lam)

    def due(self, iteration: int) -> bool:
        """True when ``iteration`` (1-based, counted by the caller) ends a period: call ``update`` then."""
        return iteration > 0 and iteration % self.period == 0

    # -- driving -------------------------------------------------------------------------------
    def begin(self, loss: float) -> None:
        """Record the validation task loss of the starting encoder: the first period's start level."""
        if self.trajectory:
            raise RuntimeError("begin() is for a fresh bandit; this one has closed periods (resumed run?)")
        self.start_loss = float(loss) if math.isfinite(loss) else None

    def update(self, loss: float) -> None:
        """Close the current period with the validation task loss measured at its end: judge λ̂ by the
        change since the period's start, step λ, draw the next perturbation."""
        loss = float(loss)
        change = loss - self.start_loss if self.start_loss is not None and math.isfinite(loss) else None
        standardized = self._standardize(change) if change is not None else None
        self.trajectory.append({"iteration": (len(self.trajectory) + 1) * self.period, "lambda": self.lambdas(),
                                "lambda_hat": self.weights(), "loss": loss, "reward": change,
                                "reward_std": standardized})
        if not math.isfinite(loss):
            log.warning("bandit: non-finite validation loss %s at period %d, λ left unchanged", loss,
                        len(self.trajectory))
        if standardized is not None:
            step = self.lr * standardized * self.z / math.sqrt(self.variance)
            self.lam = np.where(self.tuned, np.clip(self.lam - step, 0.0, self.lambda_max), self.lam)
        self.start_loss = loss if math.isfinite(loss) else None
        log.debug("bandit period %d: loss %.5f, reward %s, λ %s", len(self.trajectory), loss, change,
                  self.lambdas())
        self.z = self._draw()

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "lam": self.lam.tolist(), "z": self.z.tolist(),
                "start_loss": self.start_loss, "change_mean": self.change_mean, "changes_seen": self.changes_seen,
                "square_mean": self.square_mean, "squares_seen": self.squares_seen,
                "rng": copy.deepcopy(self.rng.bit_generator.state), "trajectory": copy.deepcopy(self.trajectory)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # A different term list would silently pair every λ with the wrong loss.
        if state.get("names", self.names) != self.names:
            raise ValueError(f"bandit state is for {state['names']}, this bandit tunes {self.names}")
        self.lam = np.array(state["lam"], dtype=np.float64)
        self.z = np.array(state["z"], dtype=np.float64)
        # .get: a checkpoint of the level-reward bandit has none of these; it resumes as a fresh reward.
        self.start_loss = state.get("start_loss")
        self.change_mean, self.changes_seen = state.get("change_mean", 0.0), state.get("changes_seen", 0)
        self.square_mean, self.squares_seen = state.get("square_mean", 0.0), state.get("squares_seen", 0)
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        self.trajectory = copy.deepcopy(state["trajectory"])

    # -- internals -----------------------------------------------------------------------------
    def _named(self, values: np.ndarray) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, values, strict=True)}

    def _perturbed(self) -> np.ndarray:
        return np.where(self.tuned, np.clip(self.lam + self.z, 0.0, self.lambda_max), self.lam)

    def _draw(self) -> np.ndarray:
        # Drawn for every name, then zeroed where frozen, so freezing a term does not shift the others' draws.
        return np.where(self.tuned, self.rng.normal(0.0, math.sqrt(self.variance), len(self.names)), 0.0)

    def _standardize(self, change: float) -> float | None:
        """r̃ for ``change`` (None while there is no baseline yet); folds ``change`` into the running means."""
        beta, standardized = self.decay, None
        if self.changes_seen:
            centred = change - self.change_mean / (1 - beta ** self.changes_seen)
            self.square_mean = beta * self.square_mean + (1 - beta) * centred ** 2
            self.squares_seen += 1
            scale = math.sqrt(self.square_mean / (1 - beta ** self.squares_seen))
            standardized = centred / max(scale, self.min_scale)
        self.change_mean = beta * self.change_mean + (1 - beta) * change
        self.changes_seen += 1
        return standardized
