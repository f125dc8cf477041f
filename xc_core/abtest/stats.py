"""A/B statistics: every metric is a ratio of per-user sums, compared with the delta method.

Users are the randomisation unit of a live test, and one user's queries are correlated (a session reformulates
one intent), so variances are taken over users, not events (Deng et al., "Applying the Delta Method in Metric
Analytics", KDD 2018). For a ratio metric R = Σy / Σx over n users, the influence of user i is
ψ_i = (y_i − R x_i) / x̄ and Var(R) ≈ Σψ² / n². The lift Q = R_t / R_c (reported as %Δ = 100 (Q − 1)) has
Var(Q) ≈ Var(R_t)/R_c² + R_t² Var(R_c)/R_c⁴ for split users; in paired mode (the same users and events in both
arms) the influences are combined per user first, g_i = ψ_t,i / R_c − R_t ψ_c,i / R_c², so the covariance
between the arms cancels the shared noise. Intervals are normal: %Δ ± z·se; p-values two-sided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from xc_core.abtest.auction import Outcomes

#: metric → (numerator, denominator, scale); "queries" is the event count. %Δ of count metrics (revenue,
#: clicks, impressions) is per query, so a test whose arms got different traffic compares like with like.
METRICS: dict[str, tuple[str, str, float]] = {
    "ctr": ("clicks", "impressions", 100.0),
    "iy": ("relevant", "queries", 100.0),
    "brand_bmr": ("brand_bad", "brand_eligible", 100.0),
    "location_bmr": ("location_bad", "location_eligible", 100.0),
    "quickback_rate": ("quickbacks", "clicks", 100.0),
    "revenue": ("revenue", "queries", 1.0),
    "rpm": ("revenue", "queries", 1000.0),
    "clicks": ("clicks", "queries", 1.0),
    "impressions": ("impressions", "queries", 1.0),
}
#: the arm metrics a comparison across models reads: the bad-match rates, IY, CTR and revenue
AB_METRICS = ("brand_bmr", "location_bmr", "iy", "ctr", "revenue")
#: for these a rise is bad (the BMR guard and the report's colours read it)
LOWER_IS_BETTER = ("brand_bmr", "location_bmr", "quickback_rate")


@dataclass(frozen=True)
class Lift:
    pct: float
    low: float
    high: float
    p: float

    def significant(self, alpha: float) -> bool:
        return self.p < alpha


def per_user(out: Outcomes, user: np.ndarray, n_users: int) -> dict[str, np.ndarray]:
    """Per-user sums of every outcome count (and the query count)."""
    sums = {name: np.bincount(user, weights=getattr(out, name), minlength=n_users)
            for name in ("impressions", "clicks", "relevant", "brand_eligible", "brand_bad", "location_eligible",
                         "location_bad", "quickbacks", "revenue")}
    sums["queries"] = np.bincount(user, minlength=n_users).astype(np.float64)
    return sums


def arm_summary(sums: dict[str, np.ndarray]) -> dict[str, float]:
    """Totals and the ratio metrics of one arm."""
    total = {k: float(v.sum()) for k, v in sums.items()}
    out: dict[str, float] = {"queries": total["queries"], "impressions": total["impressions"],
                             "clicks": total["clicks"], "revenue": round(total["revenue"], 4)}
    for name, (num, den, scale) in METRICS.items():
        if name not in out:
            out[name] = scale * total[num] / total[den] if total[den] > 0 else float("nan")
    return out


def _ratio(y: np.ndarray, x: np.ndarray) -> tuple[float, np.ndarray]:
    """R and the per-user influence ψ (zero influence for an empty arm)."""
    sx = x.sum()
    if sx <= 0:
        return float("nan"), np.zeros_like(x)
    r = float(y.sum() / sx)
    return r, (y - r * x) / (sx / len(x))


def lift(treat: tuple[np.ndarray, np.ndarray], control: tuple[np.ndarray, np.ndarray], paired: bool,
         alpha: float = 0.05) -> Lift:
    """%Δ of the ratio Σy/Σx, treatment vs control, with its (1 − alpha) interval and p-value.

    ``treat``/``control``: (y, x) per user. Split users: each arm's own users (zero rows allowed). Paired: both
    arrays over the same users, aligned."""
    (yt, xt), (yc, xc) = treat, control
    rt, psi_t = _ratio(yt, xt)
    rc, psi_c = _ratio(yc, xc)
    if not (math.isfinite(rt) and math.isfinite(rc)) or rc == 0:
        return Lift(float("nan"), float("nan"), float("nan"), float("nan"))
    q = rt / rc
    if paired:
        g = psi_t / rc - rt * psi_c / rc**2
        var = float(np.sum(g**2)) / len(g) ** 2
    else:
        var_t = float(np.sum(psi_t**2)) / len(psi_t) ** 2
        var_c = float(np.sum(psi_c**2)) / len(psi_c) ** 2
        var = var_t / rc**2 + rt**2 * var_c / rc**4
    from scipy.stats import norm  # here, not at import: every Dagster process loads this module (0.7 s of scipy)

    se = math.sqrt(max(var, 0.0))
    z = float(norm.ppf(1 - alpha / 2))
    if se == 0:
        p = 1.0 if q == 1 else 0.0
    else:
        p = float(2 * norm.sf(abs(q - 1) / se))
    return Lift(100 * (q - 1), 100 * (q - 1 - z * se), 100 * (q - 1 + z * se), p)


def compare(treat: dict[str, np.ndarray], control: dict[str, np.ndarray], paired: bool,
            alpha: float = 0.05) -> dict[str, Lift]:
    """Every metric's lift from per-user sums."""
    return {name: lift((treat[num], treat[den]), (control[num], control[den]), paired, alpha)
            for name, (num, den, _) in METRICS.items()}


def rounded(x: float, digits: int = 4) -> float | None:
    """A figure for the JSON: rounded, or None where undefined (e.g. a lift over a control rate of 0)."""
    return round(float(x), digits) if np.isfinite(x) else None


def lifts_json(lifts: dict[str, Lift]) -> dict[str, Any]:
    """``delta_pct``, ``ci95`` and ``p_value`` keyed by metric, as the CLI prints and the report reads them."""
    return {"delta_pct": {k: rounded(v.pct) for k, v in lifts.items()},
            "ci95": {k: [rounded(v.low), rounded(v.high)] for k, v in lifts.items()},
            "p_value": {k: rounded(v.p, 6) for k, v in lifts.items()}}
