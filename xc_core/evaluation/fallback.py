"""Never worse than doing nothing: the one rule every learned choice with a do-nothing alternative goes through.

A stage that *learns* a choice — the classifier's fusion (α < 1, the lexical channel's weight γ > 0, an offset on
untrained labels) against the encoder alone, a trained epoch against epoch 0 (the starting encoder), IRENE against
its encoder, TextGNN/OAK against their start — serves its candidate only when the *selection procedure* that picked
it beats the fallback out of sample, on every scored row (power before verdicts):

- the rows are cut into folds; for each fold the procedure picks its candidate on the *other* folds' rows, and the
  fold's rows get that candidate's ranking (a cross-fitted test of the whole procedure: no row is ranked by a
  candidate its own outcome helped choose, so there is no winner's curse, and every row counts, not half);
- the procedure's rankings must beat the fallback's on the stage's selection metric with the paired bootstrap
  interval above 0, and lose none of the guard metrics (the registry gate's primary metric P@1, and PSP@1)
  significantly: a guard's interval may straddle 0, its upper end may not lie below it (a policy with a
  ``guard_margin`` is stricter: the guard's gain may not fall below that many standard errors either);
- then the candidate the procedure picks on *all* rows is served (the folds' picks agree with it in
  ``agreement`` of them: the record says how stable the choice is).

One test per stage, whatever the number of candidates (α × γ × offset, or every epoch): the family-wise error is
the test's own, no Holm correction needed. Every decision states the smallest gain it could have detected — the
half-width of its interval (``detectable``, per metric) — so "the fallback is served" on 50 rows (±10 P@1) is never
read as "no gain".

Usage::

    folds = row_folds(len(truth_rows), k=2, seed=seed)
    def select(rows): return max(candidates, key=lambda c: score(c, rows))
    decision, served = cross_fitted("fusion", select, top_of, fallback_top, truth, inv_propensity, "P@1",
                                    FallbackPolicy(), folds)

``top`` arrays are each row's ranked label columns of ``truth`` (−1 pads), as :func:`metric_terms` reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

from xc_core import seeds
from xc_core.evaluation.analyses import TAIL_PREFIX, paired_metric_diff
from xc_core.evaluation.metrics import metric_terms
from xc_core.seeds import Stream


class FallbackPolicy(BaseModel):
    """How a learned choice must beat its do-nothing fallback out of sample (one policy for every stage)."""

    enabled: bool = Field(default=True, description="False: serve the candidate picked on validation untested "
                          "(only for experiments that study the rule itself)")
    guards: tuple[str, ...] = Field(default=("P@1", "PSP@1"), description="metrics the candidate may not lose "
                                    "significantly on the held-out half (P@1 is the registry gate's primary metric)")
    guard_margin: float | None = Field(default=None, description=(
        "when a guard counts as lost. None: only when its interval lies below 0 (a significant loss; the default of "
        "every stage, where a guard bounds a choice the selection metric already tested). A number m: also when its "
        "gain is below m paired standard errors (0: any loss in the point estimate). A stricter guard for a choice "
        "whose fallback is itself a trained model that the primary metric must not fall below (ramen against "
        "dual_encoder: TrainConfig.text_only_guard_margin)"))
    confidence: float = Field(default=0.95, gt=0, lt=1, description="paired bootstrap interval of every test")
    n_boot: int = Field(default=1000, ge=100, description="bootstrap resamples")
    folds: int = Field(default=5, ge=2, description="folds of the cross-fitted test over validation rows: each "
                       "fold is ranked by the candidate picked on the others")
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
    #: metric → half-width of its paired interval: the smallest gain this test could have told from 0
    detectable: dict[str, float] = field(default_factory=dict)
    folds: int = 0  # cross-fitted folds (0: a plain held-out test)
    agreement: float = float("nan")  # share of folds whose pick equals the served candidate

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def row_folds(n: int, k: int, seed: int, stream: int = Stream.FALLBACK_HALVES) -> list[np.ndarray]:
    """``k`` seeded folds of ``n`` rows (each sorted; sizes differ by at most one)."""
    order = seeds.rng(seed, stream).permutation(n)
    return [np.sort(order[i::k]) for i in range(max(1, min(k, n)))]


def per_row(metric: str, truth: sp.csr_matrix, top: np.ndarray, inv_propensity: np.ndarray | None,
            tail: sp.csr_matrix | None = None, best_gains: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """``metric``'s per-row terms in :func:`~xc_core.evaluation.analyses.per_row_metrics`' layout (any k): the
    per-row values of a mean (P, nDCG, R), or ``<metric>/numerator`` and ``/denominator`` of a ratio (PSP).
    A ``tail_`` metric (``tail_P@5``) is its base metric scored against ``tail`` (the rows' positives on the tail
    bin's labels only: :func:`~xc_core.evaluation.analyses.tail_truth`). ``best_gains``: the rows'
    propensity-scored best gains (:func:`~xc_core.evaluation.metrics.ideal_weights` of ``truth``), when the caller
    keeps them."""
    if metric.startswith(TAIL_PREFIX):
        if tail is None:
            raise ValueError(f"{metric}: pass the rows' tail positives (tail_truth) to score a tail metric")
        base = metric.removeprefix(TAIL_PREFIX)
        return {key.replace(base, metric, 1): value for key, value in per_row(base, tail, top, inv_propensity).items()}
    family, k = metric.split("@")
    depth = int(k)
    if top.shape[1] < depth:
        raise ValueError(f"{metric}: the ranking holds {top.shape[1]} labels, need {depth}")
    ps = family.startswith("PS")
    terms = metric_terms(truth, top[:, :depth], inv_propensity if ps else None, best_gains if ps else None)[family]
    if not ps:  # a mean over rows; the propensity-scored families are ratios at every k, k = 1 included
        return {metric: terms.numerator[:, -1]}
    return {f"{metric}/numerator": terms.numerator[:, -1], f"{metric}/denominator": terms.denominator[:, -1]}


class RowTerms:
    """:func:`per_row` for many rankings of the same rows: the truth's positives and the propensity weights are read
    once, so a ranking's P@k and PSP@k terms (and ``tail_P@k``) are a lookup and a cumulative sum — the same numbers
    to the bit as :func:`per_row`, which rebuilds them per call (the fusion grid scores thousands of rankings). Any
    other metric goes through :func:`per_row`."""

    def __init__(self, truth: sp.csr_matrix, inv_propensity: np.ndarray | None, tail: sp.csr_matrix | None = None,
                 best_gains: np.ndarray | None = None) -> None:
        from xc_core.evaluation.metrics import PositiveKeys, positive_labels

        self.truth, self.inv_propensity, self.tail, self.best_gains = truth, inv_propensity, tail, best_gains
        self._keys = PositiveKeys(positive_labels(truth))
        self._tail_keys = PositiveKeys(positive_labels(tail)) if tail is not None else None
        self._gains = (np.append(np.asarray(inv_propensity, dtype=np.float64).ravel(), 0.0)
                       if inv_propensity is not None and len(np.ravel(inv_propensity)) == truth.shape[1] else None)

    def __call__(self, metric: str, top: np.ndarray) -> dict[str, np.ndarray]:
        family, _, k = metric.partition("@")
        depth = int(k) if k.isdigit() else 0
        keys = self._tail_keys if family == f"{TAIL_PREFIX}P" else self._keys if family in ("P", "PSP") else None
        psp_ready = family != "PSP" or (self._gains is not None and self.best_gains is not None
                                        and self.best_gains.shape[1] >= depth)
        if keys is None or not 0 < depth <= top.shape[1] or not psp_ready:
            return per_row(metric, self.truth, top, self.inv_propensity, self.tail, self.best_gains)
        top = top[:, :depth]
        hits = keys.hits(top).astype(np.float64)
        if family != "PSP":  # as metric_terms' "P": the hits' running mean over ranks 1..k
            return {metric: (np.cumsum(hits, axis=1) / np.arange(1, depth + 1))[:, -1]}
        assert self._gains is not None and self.best_gains is not None  # psp_ready
        gained = np.cumsum(hits * self._gains[top], axis=1)[:, -1]
        return {f"{metric}/numerator": gained,
                f"{metric}/denominator": np.cumsum(self.best_gains[:, :depth], axis=1)[:, -1]}


def paired_metric(metric: str, truth: sp.csr_matrix, top_a: np.ndarray, top_b: np.ndarray,
                  inv_propensity: np.ndarray | None, policy: FallbackPolicy,
                  tail: sp.csr_matrix | None = None) -> tuple[float, float, float]:
    """(a − b, low, high) of ``metric`` (``P@1``, ``R@10``, ``PSP@1`` …) over the same rows, by the paired bootstrap
    the reports use (:func:`~xc_core.evaluation.analyses.paired_metric_diff`)."""
    found = paired_metric_diff(per_row(metric, truth, top_a, inv_propensity, tail),
                               per_row(metric, truth, top_b, inv_propensity, tail), metric,
                               alpha=1 - policy.confidence, n_boot=policy.n_boot, seed=policy.seed)
    assert found is not None  # both sides hold the metric's terms by construction
    gain, low, high, _ = found
    return float(gain), float(low), float(high)


def against_fallback(choice: str, candidate_top: np.ndarray, fallback_top: np.ndarray, truth: sp.spmatrix,
                     inv_propensity: np.ndarray | None, metric: str, policy: FallbackPolicy,
                     picked_on_rows: int = 0, candidate: dict[str, Any] | None = None,
                     tail: sp.spmatrix | None = None) -> Decision:
    """The rule of the module docstring on held-out rows: ``candidate_top`` / ``fallback_top`` rank the labels
    (columns of ``truth``) for the same rows, which the candidate was *not* picked on. Guards that need
    propensities are skipped when ``inv_propensity`` is None, tail guards (``tail_P@5``) when ``tail`` (the rows'
    positives on the tail bin's labels) is."""
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
    tail = sp.csr_matrix(tail) if tail is not None else None
    guards = {g: list(paired_metric(g, truth, candidate_top, fallback_top, inv_propensity, policy, tail))
              for g in policy.guards if (inv_propensity is not None or not g.startswith("PS"))
              and (tail is not None or not g.startswith(TAIL_PREFIX))}
    record["detectable"] = {metric: (high - low) / 2, **{g: (g_high - g_low) / 2
                                                         for g, (_, g_low, g_high) in guards.items()}}
    lost = [g for g, (g_gain, g_low, g_high) in guards.items() if guard_lost(g_gain, g_low, g_high, policy)]
    level = f"{100 * policy.confidence:g}%"
    if low <= 0:
        reason = (f"{metric} gain {gain:+.4f} [{low:+.4f}, {high:+.4f}] on {truth.shape[0]} held-out rows: the "
                  f"{level} interval does not lie above 0 (smallest detectable gain ±{(high - low) / 2:.4f}), so "
                  "the fallback is served")
        kept = False
    elif lost:
        how = ("significantly" if policy.guard_margin is None else
               f"beyond its margin ({policy.guard_margin:+g} standard errors)")
        reason = (f"{metric} gain {gain:+.4f} [{low:+.4f}, {high:+.4f}] but it loses {', '.join(lost)} {how} on the "
                  "held-out rows, so the fallback is served")
        kept = False
    else:
        reason = (f"{metric} gain {gain:+.4f} [{low:+.4f}, {high:+.4f}] on {truth.shape[0]} held-out rows, no guard "
                  f"lost: the candidate is served")
        kept = True
    return Decision(kept=kept, reason=reason, gain=gain, low=low, high=high, guards=guards, **record)


def guard_lost(gain: float, low: float, high: float, policy: FallbackPolicy) -> bool:
    """Whether a guard metric's paired difference (candidate − fallback: ``gain`` in [``low``, ``high``], the policy's
    interval) counts as lost: its interval below 0, or (``policy.guard_margin`` m) its gain below m standard errors,
    the standard error read from the interval's half-width as a normal interval's."""
    if high < 0:
        return True
    if policy.guard_margin is None:
        return False
    from statistics import NormalDist

    standard_error = (high - low) / 2 / NormalDist().inv_cdf(0.5 + policy.confidence / 2)
    return gain < policy.guard_margin * standard_error


def cross_fitted(choice: str, select: Callable[[np.ndarray], Hashable], top_of: Callable[[Any], np.ndarray],
                 fallback_top: np.ndarray, truth: sp.spmatrix, inv_propensity: np.ndarray | None, metric: str,
                 policy: FallbackPolicy, folds: Sequence[np.ndarray],
                 describe: Callable[[Any], dict[str, Any]] | None = None,
                 tail: sp.spmatrix | None = None) -> tuple[Decision, Any]:
    """The cross-fitted rule of the module docstring: ``(decision, served key)``.

    ``select(rows)`` is the whole selection procedure run on those rows only (an index array into ``truth``'s
    rows) and returns a candidate key; ``top_of(key)`` that candidate's ranking of *every* row. ``folds``
    partition the rows. The served key is ``select`` over all rows when the test keeps it, else None (the
    fallback). ``describe(key)`` gives the candidate's settings for the record; ``tail``: the rows' tail positives
    (the tail guards')."""
    truth = sp.csr_matrix(truth)
    n = truth.shape[0]
    describe = describe or (lambda key: {"candidate": key})
    procedure, picks, served = cross_fitted_ranking(select, top_of, fallback_top, folds)
    decision = against_fallback(choice, procedure, fallback_top, truth, inv_propensity, metric, policy,
                                picked_on_rows=n - min((len(f) for f in folds), default=0),
                                candidate=describe(served), tail=tail)
    decision.folds = len(folds)
    decision.agreement = float(np.mean([p == served for p in picks])) if picks else float("nan")
    decision.reason = f"cross-fitted over {len(folds)} folds ({decision.agreement:.0%} pick the served one): " + \
        decision.reason.replace("held-out rows", "out-of-fold rows")
    return decision, (served if decision.kept else None)


def cross_fitted_ranking(select: Callable[[np.ndarray], Hashable], top_of: Callable[[Any], np.ndarray],
                         fallback_top: np.ndarray, folds: Sequence[np.ndarray]) -> tuple[np.ndarray, list[Any], Any]:
    """The selection procedure's own ranking of every row, as :func:`cross_fitted` tests it: ``(procedure, picks,
    served)``, each fold's rows ranked by the key ``select`` picks on the other folds (its ``picks``, in fold
    order; with one fold, on all rows), rows in no fold ranked as ``fallback_top``, and ``served`` picked on all
    rows. Probes that rerun a selection under other settings read it instead of re-looping the folds."""
    everything = np.arange(fallback_top.shape[0])
    picks = []
    procedure = np.array(fallback_top, copy=True)
    for fold in folds:
        key = select(np.setdiff1d(everything, fold, assume_unique=True)) if len(folds) > 1 else select(everything)
        picks.append(key)
        procedure[fold] = _pad_to(top_of(key)[fold], procedure.shape[1])
    return procedure, picks, select(everything)


def _pad_to(top: np.ndarray, width: int) -> np.ndarray:
    """``top`` cut or −1-padded to ``width`` columns."""
    if top.shape[1] >= width:
        return top[:, :width]
    return np.pad(top, ((0, 0), (0, width - top.shape[1])), constant_values=-1)


#: where a training summary keeps its fallback tests (evaluation/fallback.py): the trainer's epoch, the classifier
#: stage's (alpha, lexical, untrained_offset), TextGNN/OAK's epoch, IRENE's combiner and ramen against dual_encoder
FALLBACK_KEYS = ("epoch_fallback_test", "fallback_tests", "fallback_test", "text_only_fallback_test")
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
                                                           "candidate", "tested_on_rows", "reason")},
             "detectable_P@1": (t.get("detectable") or {}).get("P@1")}
            for t in found if isinstance(t, dict) and "kept" in t]
