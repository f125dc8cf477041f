"""One evaluation as stored in its folder (``paths.eval_dir``), read and written only here: the report, the
registry's gate and the seed tables ask this record for metrics and per-query arrays instead of opening files.

Files: ``metrics.json`` (the summary: metrics, test-split fingerprint, MLflow run, subsets, the seen-label view's
metrics under ``seen_labels``), ``per_row.npz`` (per-query terms for paired intervals; ``/`` in keys stored as
``__``), ``top100.npy`` and the method's scores of those labels ``top100_scores.npy``, ``quantiles.parquet``,
``false_negatives.parquet``, ``ci.parquet``, and the seen-label view's (``analyses.seen_label_view``: predictions
restricted to labels with a training positive) ``per_row_seen.npz`` and ``ci_seen.parquet``. An evaluation saved
before the view existed has none of the three: its record answers None for them.
On a data set with item metadata the summary also holds ``mismatch`` (brand / location mismatch in the top-k of the
queries naming one, ``evaluation.mismatch``); elsewhere, and before the measure existed, it has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from xc_core.datasets.container import XCDataset

SUMMARY, PER_ROW, TOP, TOP_SCORES, QUANTILES, FALSE_NEGATIVES, CI = (
    "metrics.json", "per_row.npz", "top100.npy", "top100_scores.npy", "quantiles.parquet", "false_negatives.parquet",
    "ci.parquet")
SEEN_PER_ROW, SEEN_CI = "per_row_seen.npz", "ci_seen.parquet"
#: summary keys of the seen-label view: its metrics, and the test split's shares on labels without a training positive
SEEN_METRICS, UNTRAINED_SHARE, UNTRAINED_ONLY_ROWS = "seen_labels", "untrained_positive_share", "untrained_only_rows"
#: summary key of the brand / location mismatch (``evaluation.mismatch``): only on data sets with item metadata
MISMATCH = "mismatch"


@dataclass(frozen=True)
class EvaluationRecord:
    folder: Path
    summary: dict[str, Any]

    @classmethod
    def load(cls, folder: Path) -> EvaluationRecord | None:
        """The evaluation saved in ``folder``, or None when nothing was evaluated there."""
        path = folder / SUMMARY
        return cls(folder, json.loads(path.read_text())) if path.exists() else None

    @classmethod
    def save(cls, folder: Path, summary: dict[str, Any], top: np.ndarray, per_row: dict[str, np.ndarray],
             quantiles: pl.DataFrame, false_negatives: pl.DataFrame, ci: pl.DataFrame,
             top_scores: np.ndarray | None = None, seen_per_row: dict[str, np.ndarray] | None = None,
             seen_ci: pl.DataFrame | None = None) -> EvaluationRecord:
        """Write every file; ``seen_per_row`` / ``seen_ci``: the seen-label view's per-row terms and intervals
        (its metrics go in ``summary[SEEN_METRICS]``). An optional file not given is removed, so a folder never
        keeps one from an earlier evaluation."""
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / TOP, top)
        _save_npz(folder / PER_ROW, per_row)
        for name, value in ((TOP_SCORES, top_scores), (SEEN_PER_ROW, seen_per_row), (SEEN_CI, seen_ci)):
            if value is None:
                (folder / name).unlink(missing_ok=True)
        if top_scores is not None:
            np.save(folder / TOP_SCORES, top_scores)
        if seen_per_row is not None:
            _save_npz(folder / SEEN_PER_ROW, seen_per_row)
        if seen_ci is not None:
            seen_ci.write_parquet(folder / SEEN_CI)
        quantiles.write_parquet(folder / QUANTILES)
        false_negatives.write_parquet(folder / FALSE_NEGATIVES)
        ci.write_parquet(folder / CI)
        (folder / SUMMARY).write_text(json.dumps(summary, indent=2, default=float) + "\n")
        return cls(folder, summary)

    @property
    def method(self) -> str:
        return str(self.summary["method"])

    @property
    def test_split(self) -> str | None:
        """Fingerprint of the test split it was scored on (None before fingerprints existed)."""
        return self.summary.get("test_split")

    @property
    def mlflow_run_id(self) -> str:
        return str(self.summary.get("mlflow_run_id", ""))

    @property
    def metrics(self) -> dict[str, float]:
        """The headline metrics (``P@1``, ``PSP@5``, ``R@10`` …), fractions; index figures left out."""
        return {k: v for k, v in self.summary.items() if "@" in k and isinstance(v, float) and not k.startswith("hnsw")}

    def per_row(self) -> dict[str, np.ndarray] | None:
        """Per-query terms (``paired_metric_diff`` reads either key spelling), or None when not saved."""
        path = self.folder / PER_ROW
        return dict(np.load(path)) if path.exists() else None

    def seen_metrics(self) -> dict[str, float] | None:
        """The seen-label view's metrics (``P@1``, ``R@10`` …, fractions): predictions restricted to labels with
        a training positive, scored against the same test split; None for an evaluation saved before the view."""
        found = self.summary.get(SEEN_METRICS)
        return {k: float(v) for k, v in found.items()} if found is not None else None

    def untrained_share(self) -> dict[str, float] | None:
        """``{"pairs": …, "rows": …}``: the share of test positive pairs on labels without a training positive, and
        of test rows whose positives all are (``analyses.untrained_positive_share``); None before the view."""
        if UNTRAINED_SHARE not in self.summary:
            return None
        return {"pairs": float(self.summary[UNTRAINED_SHARE]), "rows": float(self.summary[UNTRAINED_ONLY_ROWS])}

    def mismatch(self) -> dict[str, dict[str, Any]] | None:
        """Per attribute (``brand``, ``location``) the mismatch in the top-k of the test queries naming a value
        (``evaluation.mismatch.mismatch_summary``: ``queries``, ``rate@k`` …); None on a data set without item
        metadata, or for an evaluation saved before the measure."""
        found = self.summary.get(MISMATCH)
        return dict(found) if found else None

    def seen_per_row(self) -> dict[str, np.ndarray] | None:
        """The seen-label view's per-query terms (keys as :meth:`per_row`'s), or None when not saved."""
        path = self.folder / SEEN_PER_ROW
        return dict(np.load(path)) if path.exists() else None

    def seen_ci(self) -> dict[str, tuple[float, float, float]] | None:
        """The seen-label view's metric → (value, low, high), or None when not saved."""
        path = self.folder / SEEN_CI
        return _read_ci(path) if path.exists() else None

    def top(self) -> np.ndarray:
        return np.load(self.folder / TOP)

    def top_scores(self) -> np.ndarray | None:
        """The method's score of each label in :meth:`top` (NaN at padding); None for an evaluation saved
        before the scores were."""
        path = self.folder / TOP_SCORES
        return np.load(path) if path.exists() else None

    def quantiles(self) -> pl.DataFrame:
        return pl.read_parquet(self.folder / QUANTILES)

    def false_negatives(self) -> pl.DataFrame:
        return pl.read_parquet(self.folder / FALSE_NEGATIVES)

    def ci(self) -> dict[str, tuple[float, float, float]]:
        """metric → (value, low, high) of its bootstrap 95% interval."""
        return _read_ci(self.folder / CI)


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    np.savez(path, **{k.replace("/", "__"): v for k, v in arrays.items()})  # type: ignore[arg-type]  # numpy stub: **dict may hold allow_pickle


def _read_ci(path: Path) -> dict[str, tuple[float, float, float]]:
    return {r["metric"]: (r["value"], r["low"], r["high"]) for r in pl.read_parquet(path).iter_rows(named=True)}


def fingerprint_test_split(dataset: XCDataset) -> str:
    """Identifies the test split (queries, ground truth, label count): two evaluations may be compared
    query by query (paired bootstrap, promotion gate) only when their fingerprints are equal."""
    import hashlib

    y = dataset.y_test.tocsr()
    digest = hashlib.sha256(f"{y.shape}".encode())
    for part in (y.indptr, y.indices):
        digest.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
    digest.update("\n".join(dataset.test_texts).encode())
    return digest.hexdigest()[:16]
