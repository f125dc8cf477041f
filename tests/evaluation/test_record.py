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


def test_the_seen_label_view_round_trips_and_an_evaluation_without_it_reads_none(tmp_path: Path) -> None:
    summary = {"method": "pecos", "P@1": 0.5, "seen_labels": {"P@1": 0.25, "R@10": 0.375},
               "untrained_positive_share": 0.5, "untrained_only_rows": 0.25, "subsets": {}}
    per_row = {"P@1": np.array([1.0, 0.0, 1.0, 0.0])}
    seen = {"P@1": np.array([0.0, 0.0, 1.0, 0.0]), "PSP@1/numerator": np.array([0.0, 0.0, 2.0, 0.0]),
            "PSP@1/denominator": np.array([1.0, 4.0, 4.0, 0.0])}
    seen_ci = pl.DataFrame({"metric": ["P@1"], "value": [0.25], "low": [0.0], "high": [0.75]})
    tables = (pl.DataFrame({"bin": [0]}), pl.DataFrame({"bin": [0]}),
              pl.DataFrame({"metric": ["P@1"], "value": [0.5], "low": [0.0], "high": [1.0]}))
    EvaluationRecord.save(tmp_path, summary, np.array([[3], [3], [1], [0]]), per_row, *tables,
                          seen_per_row=seen, seen_ci=seen_ci)
    record = EvaluationRecord.load(tmp_path)
    assert record is not None and record.metrics == {"P@1": 0.5}, "the view's metrics are not the headline's"
    assert record.seen_metrics() == {"P@1": 0.25, "R@10": 0.375}
    assert record.untrained_share() == {"pairs": 0.5, "rows": 0.25}
    assert record.seen_ci() == {"P@1": (0.25, 0.0, 0.75)}
    rows = record.seen_per_row()
    assert rows is not None and set(rows) == {"P@1", "PSP@1__numerator", "PSP@1__denominator"}
    np.testing.assert_array_equal(rows["PSP@1__denominator"], seen["PSP@1/denominator"])
    # saved again without the view (as before it existed): no stale view is left to be read as this evaluation's
    old = {k: v for k, v in summary.items() if k not in ("seen_labels", "untrained_positive_share",
                                                        "untrained_only_rows")}
    EvaluationRecord.save(tmp_path, old, np.array([[3], [3], [1], [0]]), per_row, *tables)
    record = EvaluationRecord.load(tmp_path)
    assert record is not None and record.per_row() is not None
    assert (record.seen_metrics(), record.untrained_share(), record.seen_per_row(), record.seen_ci()) == (
        None, None, None, None)
