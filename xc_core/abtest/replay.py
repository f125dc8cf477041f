"""A replay estimate for logs without ground truth (aol-1000, XC-repository folders, users' own logs).

Nothing here knows whether a shown ad is relevant or would be clicked: the only evidence is the held-out
period's clicks. So the replay shows each arm's top ``slots`` labels for every test query (from its offline
evaluation) and counts a *click hit* when a shown label was clicked for that query in the held-out period.
It is labelled as what it is: a proxy for CTR under the assumption that held-out clicks mark relevance, with no
position bias, no budgets, no brand or location attributes (no bad-match rates), and every test query weighted
once. Both arms see the same queries, so the comparison is paired over queries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xc_core.abtest.stats import lift, lifts_json
from xc_core.datasets.container import XCDataset

REPLAY_NOTE = ("replay estimate, not an A/B test: this data set has no ground truth, so a shown label counts as a "
               "click hit when it was clicked for the query in the held-out period (each test query once, no "
               "position bias, no bad-match rates)")


def replay_counts(dataset: XCDataset, top: np.ndarray, slots: int) -> dict[str, np.ndarray]:
    """Per test query: labels shown (the top ``slots`` of the arm's ranking) and those of them clicked later."""
    shown = top[:, :slots]
    truth = dataset.y_test.tocsr()
    hits = np.zeros(len(shown))
    for i in range(len(shown)):
        row = truth.indices[truth.indptr[i]:truth.indptr[i + 1]]
        hits[i] = np.isin(shown[i][shown[i] >= 0], row).sum()
    return {"impressions": (shown >= 0).sum(axis=1).astype(np.float64), "hits": hits,
            "queries": np.ones(len(shown))}


def replay(dataset: XCDataset, control_top: np.ndarray, treatment_top: np.ndarray, slots: int,
           alpha: float = 0.05) -> dict[str, Any]:
    """Click-hit rate (hits / shown ×100) and hits per query of two arms on the same test queries."""
    counts = {"control": replay_counts(dataset, control_top, slots),
              "treatment": replay_counts(dataset, treatment_top, slots)}
    metrics = {"click_hit_rate": ("hits", "impressions", 100.0), "hits_per_query": ("hits", "queries", 1.0)}
    arms: dict[str, dict[str, float]] = {}
    for name, c in counts.items():
        total = {k: float(v.sum()) for k, v in c.items()}
        arms[name] = {"queries": total["queries"], "impressions": total["impressions"], "click_hits": total["hits"],
                      **{m: scale * total[num] / total[den] if total[den] else float("nan")
                         for m, (num, den, scale) in metrics.items()}}
    lifts = {m: lift((counts["treatment"][num], counts["treatment"][den]),
                     (counts["control"][num], counts["control"][den]), paired=True, alpha=alpha)
             for m, (num, den, _) in metrics.items()}
    return {"design": "replay over held-out clicks (paired over test queries)", "note": REPLAY_NOTE, "arms": arms,
            **lifts_json(lifts)}
