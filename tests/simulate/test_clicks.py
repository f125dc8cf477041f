"""Clicks: position bias, relevance dependence, keyword skew, and the summary that reports them."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from xc_core.simulate import TAIL_CLICKS, SimulationSummary, World, calibration_report


def test_ctr_decreases_with_position(tiny_events: pl.DataFrame) -> None:
    ctr = (tiny_events.filter(pl.col("impressed")).group_by("position").agg(pl.col("clicked").mean())
           .sort("position")["clicked"].to_numpy())
    assert len(ctr) == 5
    assert np.all(np.diff(ctr) < 0), ctr


def test_clicks_follow_relevance(tiny_world: World, tiny_events: pl.DataFrame) -> None:
    """Within one position, more relevant ads are clicked more (the attractiveness half of the model)."""
    shown = tiny_events.filter(pl.col("impressed") & (pl.col("position") == 1))
    grades = tiny_world.grades(tiny_world.query_indices(shown["query_text"].to_list(), shown["market"].to_list()),
                               tiny_world.keyword_indices(shown["item_id"].to_list()))
    ctr = shown.with_columns(grade=pl.Series(grades)).group_by("grade").agg(pl.col("clicked").mean(), n=pl.len())
    by_grade = dict(ctr.filter(pl.col("n") >= 100).select("grade", "clicked").iter_rows())
    assert by_grade[3] > by_grade[2] > 0.0


def test_at_least_three_quarters_of_keywords_are_tail_in_the_training_period(tiny_world: World,
                                                                             tiny_events: pl.DataFrame) -> None:
    cfg = tiny_world.config
    train = tiny_events.filter(pl.col("clicked") & (pl.col("ts") < cfg.start + timedelta(days=cfg.train_days)))
    clicks = tiny_world.keywords.select(pl.col("keyword_id").alias("item_id")).join(
        train.group_by("item_id").len(), on="item_id", how="left")["len"].fill_null(0)
    assert (clicks < TAIL_CLICKS).mean() >= 0.75
    assert clicks.max() >= 5 * TAIL_CLICKS, "and a head of keywords gets many clicks"


def test_summary_counts_match_the_files(tiny_run: SimulationSummary, tiny_events: pl.DataFrame) -> None:
    assert tiny_run.events == tiny_events.height
    assert tiny_run.clicks == int(tiny_events["clicked"].sum())
    assert tiny_run.impressions == int(tiny_events["impressed"].sum())
    assert tiny_run.ctr == round(tiny_run.clicks / tiny_run.impressions, 6)
    assert tiny_run.query_events == tiny_events.select("ts", "user_id", "market", "query_text").n_unique()
    assert tiny_run.tail_keyword_share >= 0.75 and tiny_run.novel_keywords > 0
    assert 15_000 <= tiny_run.events <= 30_000 and tiny_run.intents == 50
    assert tiny_run.world_dir is not None
    saved = json.loads((tiny_run.world_dir.parent / "summary.json").read_text())
    assert saved["events"] == tiny_run.events and "seconds" not in saved


def test_calibration_report_writes_numbers_markdown_and_pngs(tiny_run: SimulationSummary, tmp_path: Path) -> None:
    assert tiny_run.world_dir is not None
    report = calibration_report(tiny_run.world_dir, tiny_run.files, tmp_path / "cal")
    f: dict[str, Any] = report["figures"]
    assert isinstance(f, dict)
    assert f["rows"] == tiny_run.events and f["clicks"] == tiny_run.clicks
    ctr = list(f["ctr_by_position"].values())
    assert all(a > b for a, b in zip(ctr, ctr[1:], strict=False))
    assert f["query_zipf_slope"] < -0.3 and f["tail_keyword_share"] == tiny_run.tail_keyword_share
    assert 0 < f["queries_with_brand"] < 1 and 0 < f["queries_with_location"] < 1
    assert f["query_kind_share"]["alias"] > 0 and f["alias_vs_canonical"] > 0
    assert f["mean_session_length"] > 1 and f["sessions"] == tiny_run.sessions
    for name in ("calibration.json", "calibration.md", "frequency.png", "ctr_by_position.png",
                 "session_length.png", "query_mix.png"):
        path = tmp_path / "cal" / name
        assert path.stat().st_size > 0, name
    assert (tmp_path / "cal" / "frequency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "CTR by position" in report["markdown"] and "frequency.png" in report["markdown"]


def test_simulator_imports_neither_dagster_nor_matplotlib() -> None:
    code = ("import sys, xc_core.simulate; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'dagster', 'matplotlib', 'torch'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
