"""The A/B stage end to end on a tiny home: `xc abtest` with trained models prints the promised JSON, saves the page
with the three paper-style tables, logs an MLflow run and lands in the data set's report; a data set without a
simulated world gets the labelled replay estimate, never invented A/B numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import numpy as np
import pytest

from xc_core.datasets.container import XCDataset
from xc_core.datasets.registry import DATASETS, DatasetSpec
from xc_core.paths import anchors_dir, dataset_dir, eval_dir, model_dir
from xc_core.stages.evaluate import evaluate_method
from xc_core.stages.report import build_report
from xc_core.stages.train import train_method
from xc_core.tracking.store import tracking_uri

ARM_KEYS = {"queries", "impressions", "clicks", "ctr", "iy", "brand_bmr", "location_bmr", "revenue"}


def _ensure_evaluated(home: Path, *methods: str) -> XCDataset:
    data = XCDataset.load(anchors_dir(home, "synthetic"))
    for method in methods:
        if not (eval_dir(home, "synthetic", method, "tiny") / "metrics.json").exists():
            train_method(data, method, "tiny", home)
            evaluate_method(data, method, "tiny", home)
    return data


def _xc(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    """``xc abtest ARGS`` in this process (the CLI's entry point and its clean output in a fresh process are
    tests/test_run.py's and tests/test_cli.py's): its one line of JSON."""
    from xc_core.cli import main

    capsys.readouterr()
    assert main(["abtest", *args]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def test_xc_abtest_prints_arms_and_lifts_saves_the_tables_and_logs_to_mlflow(
        tiny_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _ensure_evaluated(tiny_home, "pretrained", "ramen")
    out = _xc(capsys, "--dataset", "synthetic", "--control", "pretrained", "--treatment", "ramen", "--profile", "tiny",
              "--queries", "3000", "--seed", "1", "--paired", "--home", str(tiny_home))
    assert out["mode"] == "simulated" and set(out["arms"]) == {"control", "treatment"}
    for arm in out["arms"].values():
        assert ARM_KEYS <= set(arm) and arm["queries"] == 3000
    for key in ("ctr", "iy", "brand_bmr", "location_bmr", "revenue"):
        low, high = out["ci95"][key]
        assert low <= out["delta_pct"][key] <= high and 0 <= out["p_value"][key] <= 1
    assert set(out["segments"]) == {"head", "torso", "tail"} and set(out["markets"]) == {"MC-1", "MC-2", "MC-3", "MC-4"}
    page = Path(out["report"]).read_text()
    assert all(f"Table {n}" in page for n in (1, 2, 3)) and "ramen vs pretrained" in page
    run = mlflow.MlflowClient(tracking_uri(tiny_home)).get_run(out["mlflow_run_id"])
    assert run.data.metrics["delta_pct/ctr"] == pytest.approx(out["delta_pct"]["ctr"])
    # the data set's evaluation report carries the A/B section
    report = Path(build_report(data, "tiny", tiny_home)["report"]).read_text()
    assert "Simulated A/B tests" in report and "RAMEN Table 1" in report


def test_a_data_set_without_ground_truth_gets_a_labelled_replay_estimate(tiny_home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _ensure_evaluated(tiny_home, "pretrained", "ramen")
    name = "shop-logs"  # the same data and models under a data set whose registry entry has no world
    monkeypatch.setitem(DATASETS, name, DatasetSpec(name, "a user's logs", build=lambda home, seed: None))  # type: ignore[arg-type,return-value]
    shutil.copytree(dataset_dir(tiny_home, "synthetic"), dataset_dir(tiny_home, name), dirs_exist_ok=True)
    for method in ("pretrained", "ramen"):
        shutil.copytree(model_dir(tiny_home, "synthetic", method, "tiny"), model_dir(tiny_home, name, method, "tiny"),
                        dirs_exist_ok=True)
        shutil.copytree(eval_dir(tiny_home, "synthetic", method, "tiny"), eval_dir(tiny_home, name, method, "tiny"),
                        dirs_exist_ok=True)
    from xc_core.abtest import ABConfig
    from xc_core.stages.abtest import ABStage

    stage = ABStage(name, tiny_home, "tiny")
    assert stage.simulation is None
    out = stage.run("pretrained", "ramen", ABConfig(), log=False)
    assert out["mode"] == "replay" and "not an A/B test" in out["note"]
    assert "brand_bmr" not in out["delta_pct"] and set(out["delta_pct"]) == {"click_hit_rate", "hits_per_query"}
    assert "not an A/B test" in Path(out["report"]).read_text()
    with pytest.raises(LookupError, match="unknown arm 'nosuch': use bm25, oracle, random"):
        stage.run("pretrained", "nosuch", ABConfig(), log=False)
    with pytest.raises(LookupError, match="only trained models can be replayed"):
        stage.run("pretrained", "oracle", ABConfig(), log=False)


def test_replay_counts_a_shown_label_clicked_later_as_a_hit(tiny_data: XCDataset) -> None:
    from xc_core.abtest.replay import replay

    truth = tiny_data.y_test.tocsr()
    rows = [r for r in range(truth.shape[0]) if truth.indptr[r + 1] > truth.indptr[r]]
    perfect = np.full((truth.shape[0], 5), -1, dtype=np.int64)
    for r in rows:
        labels = truth.indices[truth.indptr[r]:truth.indptr[r + 1]][:5]
        perfect[r, :len(labels)] = labels
    wrong = np.full_like(perfect, -1)
    for r in rows:  # labels never clicked for the query
        wrong[r, 0] = next(j for j in range(tiny_data.n_labels) if j not in set(truth.indices[truth.indptr[r]:
                                                                                               truth.indptr[r + 1]]))
    out = replay(tiny_data, wrong, perfect, slots=5)
    assert out["arms"]["treatment"]["click_hit_rate"] == pytest.approx(100.0)
    assert out["arms"]["control"]["click_hits"] == 0 and out["delta_pct"]["click_hit_rate"] is None  # undefined
    one = np.where(np.arange(5) == 0, perfect, -1)  # only each query's first clicked label
    assert any(truth.indptr[r + 1] - truth.indptr[r] > 1 for r in rows)
    out = replay(tiny_data, one, perfect, slots=5)
    assert out["arms"]["control"]["click_hit_rate"] == pytest.approx(100.0)
    assert out["delta_pct"]["hits_per_query"] > 0 and out["ci95"]["hits_per_query"][0] > 0
