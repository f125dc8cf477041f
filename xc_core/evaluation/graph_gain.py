"""Where the graph should pay, measured: ``ramen`` − ``dual_encoder`` (and their ``-clf``s) on the
same test queries, on all of them, on the tail half and per query-frequency decile, beside the graph-worth check's
prediction for the data set.

Query frequency: the data set's ``test_decile`` where it records one (event logs: the query's training-window count,
decile 0 the head); elsewhere (wikispeedia, XC folders: every test document is new) the training frequency of the
query's rarest positive label, by rank into deciles, 0 the head — RAMEN's claim is about rare queries and rare
labels alike, and a held-out document has no frequency of its own. The tail half is deciles 5–9.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.analyses import paired_metric_diff

#: (graph method, its text-only fallback): the pairs the table measures, where both were evaluated
PAIRS = (("ramen", "dual_encoder"), ("ramen-clf", "dual_encoder-clf"))
METRIC = "P@1"


def query_deciles(data: XCDataset) -> tuple[np.ndarray, str]:
    """(each test query's frequency decile, 0 = head … 9 = tail; what the frequency is)."""
    if data.test_decile is not None:
        return np.asarray(data.test_decile, np.int64), "query frequency in the training window"
    frequency = np.asarray(sp.csr_matrix(data.y_train).sum(axis=0)).ravel()
    y = sp.csr_matrix(data.y_test)
    rarest = np.array([frequency[y.indices[y.indptr[i]:y.indptr[i + 1]]].min() if y.indptr[i + 1] > y.indptr[i]
                       else 0.0 for i in range(y.shape[0])])
    order = np.argsort(-rarest, kind="stable")  # most frequent first: decile 0 is the head
    decile = np.empty(len(rarest), np.int64)
    decile[order] = np.arange(len(rarest)) * 10 // max(len(rarest), 1)
    return decile, "training frequency of the query's rarest positive label"


def _subset(rows: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in rows.items()}


def gain_rows(data: XCDataset, per_row: dict[str, dict[str, np.ndarray]], seed: int = 0,
              extra_subsets: dict[str, np.ndarray] | None = None) -> list[dict[str, Any]]:
    """One row per (pair, subset): the paired P@1 difference (a fraction) with its 95% interval and the rows, for each
    pair of :data:`PAIRS` whose two methods' per-query terms are in ``per_row`` (method → its evaluation's).
    ``extra_subsets``: more named boolean masks over the test queries (e.g. the queries an anchor set covers)."""
    deciles, basis = query_deciles(data)
    return rows_by_decile(deciles, basis, per_row, seed, extra_subsets)


def rows_by_decile(deciles: np.ndarray, basis: str, per_row: dict[str, dict[str, np.ndarray]], seed: int = 0,
                   extra_subsets: dict[str, np.ndarray] | None = None) -> list[dict[str, Any]]:
    """:func:`gain_rows` on given deciles (each test query's, 0 = head; ``basis``: what the frequency is), for
    per-query terms kept apart from the data set they were scored on (a seed's saved P@1 hits)."""
    subsets = {"all": np.ones(len(deciles), bool), "tail half (deciles 5–9)": deciles >= 5,
               **{f"decile {d}": deciles == d for d in range(10)}, **(extra_subsets or {})}
    out = []
    for graph, text in PAIRS:
        if graph not in per_row or text not in per_row:
            continue
        for name, mask in subsets.items():
            if not mask.any():
                continue
            found = paired_metric_diff(_subset(per_row[graph], mask), _subset(per_row[text], mask), METRIC,
                                       seed=seed)
            if found is None:
                continue
            diff, low, high, _ = found
            out.append({"method": graph, "vs": text, "subset": name, "rows": int(mask.sum()), "basis": basis,
                        METRIC: [diff, low, high]})
    return out
