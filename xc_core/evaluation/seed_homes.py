"""Statistics over seed homes: homes that hold the same data set and test split, each with methods trained at one
training seed, read through their saved per-query evaluation rows (``EvaluationRecord.per_row``).

A method's per-query metrics are averaged over the seeds it was trained with, then summarised over test queries
(mean, bootstrap 95% interval); two methods are compared on the same queries (paired bootstrap), so an interval
reflects the test sample with the seed noise averaged out. Per-row keys use ``/`` (``P@1``, ``PSP@1/numerator``);
a ratio metric (PSP) is stored as a numerator and a denominator per row.

A method named ``M@SUB`` is method ``M`` evaluated in the home ``<seed home>/SUB``: a variant home below the seed
home that shares its data (``stages.results.share_data``), e.g. ``textgnn@variants/tg`` for a TextGNN trained there
on other settings. Its rows are averaged and paired exactly as the seed home's own methods are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: the metrics the seed tables report
METRICS = ("P@1", "P@5", "R@10", "PSP@1", "PSP@5")


def located(home: Path, method: str) -> tuple[Path, str]:
    """The home that evaluated ``method`` and its method name there: ``M@SUB`` → (``home/SUB``, ``M``), any other
    name → (``home``, the name)."""
    name, at, below = method.partition("@")
    return (home / below, name) if at else (home, method)


def _per_row(home: Path, dataset: str, method: str, profile: str) -> tuple[dict[str, np.ndarray], str] | None:
    """``method``'s per-query arrays in ``home`` (keys with ``/``) and the test split's fingerprint; None when the
    home holds no per-query evaluation of it."""
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import eval_dir

    home, method = located(home, method)
    record = EvaluationRecord.load(eval_dir(home, dataset, method, profile))
    saved = record.per_row() if record is not None else None
    if record is None or saved is None:
        return None
    return {k.replace("__", "/"): v for k, v in saved.items()}, record.test_split or ""


def evaluated(home: Path, dataset: str, method: str, profile: str) -> bool:
    """Whether ``home`` holds ``method``'s per-query rows (a file check: the arrays load only when used)."""
    from xc_core.evaluation.record import PER_ROW
    from xc_core.paths import eval_dir

    where, name = located(home, method)
    return (eval_dir(where, dataset, name, profile) / PER_ROW).exists()


def seed_average(homes: list[Path], dataset: str, method: str, profile: str) -> tuple[dict[str, np.ndarray], int]:
    """Per-row arrays averaged over the homes that evaluated ``method`` (and how many did); ``({}, 0)`` when none
    did. Raises ValueError when those homes hold different test splits."""
    found = [r for r in (_per_row(h, dataset, method, profile) for h in homes) if r is not None]
    if not found:
        return {}, 0
    splits = {s for _, s in found}
    if len(splits) > 1:
        raise ValueError(f"{method}: homes hold different test splits {splits}; seeds must share one split")
    keys = found[0][0].keys()
    return {k: np.mean([rows[k] for rows, _ in found], axis=0) for k in keys}, len(found)


def metric_value(rows: dict[str, np.ndarray], metric: str) -> float:
    """The test-set value of ``metric`` from per-row arrays: a mean, or a ratio of sums for a ratio metric."""
    if metric in rows:
        return float(rows[metric].mean())
    return float(rows[f"{metric}/numerator"].sum() / max(rows[f"{metric}/denominator"].sum(), 1e-12))


def metric_ci(rows: dict[str, np.ndarray], metric: str) -> tuple[float, float]:
    """(low, high) of the bootstrap 95% interval of ``metric`` over test queries."""
    from xc_core.evaluation.analyses import bootstrap_ci, bootstrap_ratio_ci

    if metric in rows:
        return bootstrap_ci(rows[metric])[1:]
    return bootstrap_ratio_ci(rows[f"{metric}/numerator"], rows[f"{metric}/denominator"])[1:]


def paired_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray], metric: str) -> tuple[float, float, float, float]:
    """(difference a − b, low, high, p) of ``metric`` on the same test queries (paired bootstrap)."""
    from xc_core.evaluation.analyses import paired_metric_diff

    aa = {k.replace("/", "__"): v for k, v in a.items()}
    bb = {k.replace("/", "__"): v for k, v in b.items()}
    result = paired_metric_diff(aa, bb, metric)
    assert result is not None, metric
    return result


def per_seed_diffs(homes: list[Path], dataset: str, profile: str, a: str, b: str, metric: str) -> list[float]:
    """``metric`` of ``a`` − ``b`` in each home that evaluated both (one value per seed, in the homes' order)."""
    out = []
    for home in homes:
        ra, rb = _per_row(home, dataset, a, profile), _per_row(home, dataset, b, profile)
        if ra is not None and rb is not None:
            out.append(metric_value(ra[0], metric) - metric_value(rb[0], metric))
    return out
