"""An evaluation is read back through its record exactly as it was saved; a folder without one is None."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from xc_core.evaluation.record import EvaluationRecord


def test_a_saved_evaluation_reads_back_typed(tmp_path: Path) -> None:
    assert EvaluationRecord.load(tmp_path / "nothing") is None
    summary = {"method": "ramen", "P@1": 0.5, "PSP@5": 0.25, "hnsw_recall@10": 0.99, "test_split": "abc",
               "mlflow_run_id": "run1", "subsets": {}}
    per_row = {"P@1": np.array([1.0, 0.0]), "PSP@5/numerator": np.array([0.2, 0.3])}
    ci = pl.DataFrame({"metric": ["P@1"], "value": [0.5], "low": [0.0], "high": [1.0]})
    EvaluationRecord.save(tmp_path / "e", summary, np.array([[3, 1], [2, 0]]), per_row,
                          pl.DataFrame({"bin": [0], "P@5": [0.1]}), pl.DataFrame({"bin": [0]}), ci)
    record = EvaluationRecord.load(tmp_path / "e")
    assert record is not None and record.method == "ramen" and record.test_split == "abc"
    assert record.metrics == {"P@1": 0.5, "PSP@5": 0.25}, "index figures are not metrics"
    rows = record.per_row()
    assert rows is not None and set(rows) == {"P@1", "PSP@5__numerator"}  # npz keys cannot hold "/"
    np.testing.assert_array_equal(rows["PSP@5__numerator"], per_row["PSP@5/numerator"])
    assert record.ci() == {"P@1": (0.5, 0.0, 1.0)} and record.top().tolist() == [[3, 1], [2, 0]]
    assert record.quantiles().to_dicts() == [{"bin": 0, "P@5": 0.1}]
