"""The tail in view: each method's P@5 by label-frequency decile, and the best classifier stage's paired
difference to its own encoder per decile (RAMEN Table 8 reads the tail by decile; PSP hides what a decile shows).

Deciles are :func:`~xc_core.evaluation.analyses.label_quantiles` with 10 bins over the training positives (0 = tail,
with every label that has no training positive; 9 = head), each holding about a tenth of them. A method's decile
share is the P@5 its hits on that decile's labels earn (the shares sum to its P@5); the paired difference is a
bootstrap over the same test queries. The table lists the untrained encoder (the A/B control), the best encoder
method, the best ``-clf`` and the linear peer (PECOS) where each was evaluated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.evaluation.analyses import label_quantiles, paired_bootstrap_diff
from xc_core.evaluation.metrics import hit_matrix

N_DECILES = 10
K = 5


def decile_terms(y_true: sp.spmatrix, top: np.ndarray, bins: np.ndarray, k: int = K,
                 n_bins: int = N_DECILES) -> np.ndarray:
    """(rows, n_bins): each row's hits in its top ``k`` on each bin's labels, / k (column means = the shares)."""
    hits = hit_matrix(y_true, top[:, :k])
    rows, ranks = np.nonzero(hits)
    out = np.zeros((top.shape[0], n_bins))
    np.add.at(out, (rows, bins[top[rows, ranks]]), 1.0 / k)
    return out


def decile_methods(evaluated: list[str]) -> tuple[list[str], tuple[str, str] | None]:
    """The methods the table shows (the untrained encoder, the best encoder, the best ``-clf``, the peers), given
    ``evaluated`` ordered best P@1 first, and the (``-clf``, its encoder) pair to difference."""
    from xc_core.methods import get_method
    from xc_core.methods.roles import control_method
    from xc_core.stages.evaluate import PEERS

    def method(name: str) -> Any:
        try:
            return get_method(name)
        except ValueError:
            return None

    encoders = [m for m in evaluated if m not in PEERS and method(m) is not None
                and not getattr(method(m), "classifier", False)]
    classifiers = [m for m in evaluated if method(m) is not None and getattr(method(m), "classifier", False)]
    shown = [control_method()] if control_method() in evaluated else []
    shown += [m for m in (encoders[:1] + classifiers[:1]) if m not in shown]
    shown += [m for m in evaluated if m in PEERS]
    pair = None
    if classifiers and (base := method(classifiers[0]).requires.methods[:1]) and base[0] in evaluated:
        pair = (classifiers[0], base[0])
    return shown, pair


def label_decile_rows(home: Path, dataset: Any, profile: str) -> list[dict[str, Any]]:
    """One row per label decile, P@5 shares in points: the shown methods' and the pair's difference with its 95%
    interval; [] when nothing is evaluated. ``dataset``: the :class:`XCDataset` the evaluations scored."""
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import eval_root

    records = {r.method: r for r in (EvaluationRecord.load(p)
                                     for p in sorted(eval_root(home, dataset.name).glob(f"*-{profile}")))
               if r is not None and r.test_split == _split(dataset)}
    if not records:
        return []
    ordered = sorted(records, key=lambda m: -records[m].metrics.get("P@1", float("-inf")))
    shown, pair = decile_methods(ordered)
    bins = label_quantiles(dataset.y_train, N_DECILES)
    y = sp.csr_matrix(dataset.y_test)
    terms = {m: decile_terms(y, records[m].top(), bins) for m in {*shown, *(pair or ())}}
    positives = np.bincount(bins[y.indices], minlength=N_DECILES)
    rows = []
    for d in range(N_DECILES):
        row: dict[str, Any] = {"decile": d, "labels": int(np.count_nonzero(bins == d)),
                               "test positives": int(positives[d])}
        row.update({f"{m} P@5": round(100 * float(terms[m][:, d].mean()), 3) for m in shown})
        if pair is not None:
            diff, low, high, _ = paired_bootstrap_diff(terms[pair[0]][:, d], terms[pair[1]][:, d])
            row[f"{pair[0]} − {pair[1]}"] = f"{100 * diff:+.3f} [{100 * low:+.3f}, {100 * high:+.3f}]"
        rows.append(row)
    return rows


def _split(dataset: Any) -> str:
    from xc_core.evaluation.record import fingerprint_test_split

    return fingerprint_test_split(dataset)
