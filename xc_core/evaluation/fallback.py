"""Never worse than doing nothing: the one rule every learned choice with a do-nothing alternative goes through.

A stage that *learns* a choice — the classifier's fusion weight α < 1 against the encoder alone, the lexical
channel's weight γ > 0 against none, a trained epoch against epoch 0 (the starting encoder), IRENE against its
encoder, TextGNN/OAK against their start — picks its candidate on one half of its validation rows and serves it
only when, on the *other* half (rows the pick never saw), it

- beats the fallback on the stage's selection metric with the paired bootstrap interval above 0, and
- loses none of the guard metrics (the registry gate's primary metric P@1, and PSP@1) significantly: a guard's
  interval may straddle 0, its upper end may not lie below it.

Otherwise the fallback is served and :class:`Decision` says why (MLflow, the stage's JSON, the report).
Testing the winner on the rows that picked it would be the winner's curse: the best of 11 α values on 384 rows
beats α = 1 in-sample by noise alone.

Usage::

    pick, check = halves(len(val_rows), seed)
    best = max(candidates, key=lambda c: score(c, pick))
    decision = against_fallback("fusion alpha", top_of(best)[check], top_of(fallback)[check], truth[check],
                                inv_propensity, metric="P@1", policy=FallbackPolicy())
    served = best if decision.kept else fallback

``top`` arrays are each row's ranked label columns of ``truth`` (−1 pads), as :func:`metric_terms` reads them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

from xc_core import seeds
from xc_core.evaluation.analyses import paired_metric_diff
from xc_core.evaluation.metrics import metric_terms
from xc_core.seeds import Stream


class FallbackPolicy(BaseModel):
    """How a learned choice must beat its do-nothing fallback out of sample (one policy for every stage)."""

    enabled: bool = Field(default=True, description="False: serve the candidate picked on validation untested "
                          "(only for experiments that study the rule itself)")
    guards: tuple[str, ...] = Field(default=("P@1", "PSP@1"), description="metrics the candidate may not lose "
                                    "significantly on the held-out half (P@1 is the registry gate's primary metric)")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="paired bootstrap interval of every test")
    n_boot: int = Field(default=1000, ge=100, description="bootstrap resamples")
    seed: int = 0


@dataclass
class Decision:
    """Whether the learned candidate is served, and the held-out evidence for it."""

    choice: str  # what was decided, e.g. "fusion alpha"
    kept: bool  # True: the candidate is served; False: the fallback
    reason: str
    metric: str = ""
    gain: float = float("nan")  # candidate − fallback on ``metric`` over the held-out rows
    low: float = float("nan")
    high: float = float("nan")
    guards: dict[str, list[float]] = field(default_factory=dict)  # metric → [gain, low, high]
    picked_on_rows: int = 0
    tested_on_rows: int = 0
    candidate: dict[str, Any] = field(default_factory=dict)  # the candidate's settings, for the record

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def halves(n: int, seed: int, stream: int = Stream.FALLBACK_HALVES) -> tuple[np.ndarray, np.ndarray]:
    """(pick rows, check rows): a seeded half/half split of ``n`` validation rows, each sorted."""
    order = seeds.rng(seed, stream).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2:])


def per_row(metric: str, truth: sp.csr_matrix, top: np.ndarray,
            inv_propensity: np.ndarray | None) -> dict[str, np.ndarray]:
    """``metric``'s per-row terms in :func:`~xc_core.evaluation.analyses.per_row_metrics`' layout (any k): the
    per-row values of a mean (P, nDCG, R), or ``<metric>/numerator`` and ``/denominator`` of a ratio (PSP)."""
    family, k = metric.split("@")
    depth = int(k)
    if top.shape[1] < depth:
        raise ValueError(f"{metric}: the ranking holds {top.shape[1]} labels, need {depth}")
    terms = metric_terms(truth, top[:, :depth], inv_propensity if family.startswith("PS") else None)[family]
    if terms.denominator.shape[1] == 1:
        return {metric: terms.numerator[:, -1]}
    return {f"{metric}/numerator": terms.numerator[:, -1], f"{metric}/denominator": terms.denominator[:, -1]}


def paired_metric(metric: str, truth: sp.csr_matrix, top_a: np.ndarray, top_b: np.ndarray,
                  inv_propensity: np.ndarray | None, policy: FallbackPolicy) -> tuple[float, float, float]:
    """(a − b, low, high) of ``metric`` (``P@1``, ``R@10``, ``PSP@1`` …) over the same rows, by the paired bootstrap
    the reports use (:func:`~xc_core.evaluation.analyses.paired_metric_diff`)."""
    found = paired_metric_diff(per_row(metric, truth, top_a, inv_propensity),
                               per_row(metric, truth, top_b, inv_propensity), metric,
                               alpha=1 - policy.confidence, n_boot=policy.n_boot, seed=policy.seed)
    assert found is not None  # both sides hold the metric's terms by construction
    gain, low, high, _ = found
    return float(gain), float(low), float(high)


def against_fallback(choice: str, candidate_top: np.ndarray, fallback_top: np.ndarray, truth: sp.spmatrix,
                     inv_propensity: np.ndarray | None, metric: str, policy: FallbackPolicy,
                     picked_on_rows: int = 0, candidate: dict[str, Any] | None = None) -> Decision:
    """The rule of the module docstring on held-out rows: ``candidate_top`` / ``fallback_top`` rank the labels
    (columns of ``truth``) for the same rows, which the candidate was *not* picked on. Guards that need
    propensities are skipped when ``inv_propensity`` is None."""
    truth = sp.csr_matrix(truth)
    record: dict[str, Any] = {"choice": choice, "metric": metric, "picked_on_rows": picked_on_rows,
              "tested_on_rows": int(truth.shape[0]), "candidate": dict(candidate or {})}
    if not policy.enabled:
        return Decision(kept=True, reason="fallback test disabled: the candidate picked on validation is served",
                        **record)
    if truth.shape[0] == 0 or truth.nnz == 0:
        return Decision(kept=False, reason="no held-out validation row with a positive: the fallback is served",
                        **record)
    if np.array_equal(candidate_top, fallback_top):
        return Decision(kept=False, reason="the candidate ranks every held-out row as the fallback does",
                        gain=0.0, low=0.0, high=0.0, **record)
    gain, low, high = paired_metric(metric, truth, candidate_top, fallback_top, inv_propensity, policy)
    guards = {g: list(paired_metric(g, truth, candidate_top, fallback_top, inv_propensity, policy))
              for g in policy.guards if inv_propensity is not None or not g.startswith("PS")}
    lost = [g for g, (_, _, g_high) in guards.items() if g_high < 0]
    level = f"{100 * policy.confidence:g}%"
    if low <= 0:
        reason = (f"{metric} gain {gain:+.4f} [{low:+.4f}, {high:+.4f}] on {truth.shape[0]} held-out rows: the "
                  f"{level} interval does not lie above 0, so the fallback is served")
        kept = False
    elif lost:
        reason = (f"{metric} gain {gain:+.4f} [{low:+.4f}, {high:+.4f}] but it loses {', '.join(lost)} "
                  f"significantly on the held-out rows, so the fallback is served")
        kept = False
    else:
        reason = (f"{metric} gain {gain:+.4f} [{low:+.4f}, {high:+.4f}] on {truth.shape[0]} held-out rows, no guard "
                  f"lost: the candidate is served")
        kept = True
    return Decision(kept=kept, reason=reason, gain=gain, low=low, high=high, guards=guards, **record)


#: where a training summary keeps its fallback tests (evaluation/fallback.py): the trainer's epoch, the classifier
#: stage's (alpha, lexical, untrained_offset), TextGNN/OAK's epoch and IRENE's combiner
FALLBACK_KEYS = ("epoch_fallback_test", "fallback_tests", "fallback_test")
#: the HTML report's table of a method's learned choices (its training records) against their fallbacks
FALLBACK_TABLE = "learned choices against their do-nothing fallback (validation, held-out half)"


def fallback_rows(method: str, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The fallback tests a method's training recorded, one row each: what was decided, served or not, the held-out
    gain with its interval, and the one-line reason."""
    found: list[dict[str, Any]] = []
    for key in FALLBACK_KEYS:
        value = summary.get(key) or {}
        found += list(value.values()) if key == "fallback_tests" else [value] if value else []
    return [{"method": method, **{k: t.get(k) for k in ("choice", "kept", "metric", "gain", "low", "high",
                                                           "candidate", "tested_on_rows", "reason")}}
            for t in found if isinstance(t, dict) and "kept" in t]
