"""A data set is added in one place: one DatasetSpec in the registry, and every command takes it by name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from xc_core.datasets.container import XCDataset
from xc_core.datasets.registry import DATASETS, DatasetSpec
from xc_core.evaluation.record import EvaluationRecord
from xc_core.paths import eval_dir


def test_a_registered_data_set_is_built_trained_and_evaluated_by_name(
        tiny_data: XCDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from xc_core.cli import main

    def build(home: Path, seed: int) -> XCDataset:  # any builder: files, a database, an API
        return dataclasses.replace(tiny_data, name="shop-toy", anchor_sets={})

    monkeypatch.setitem(DATASETS, "shop-toy", DatasetSpec("shop-toy", "a user's own catalogue", build=build))
    home = ["--home", str(tmp_path), "--quiet"]
    assert main(["dataset", "--dataset", "shop-toy", *home]) == 0
    assert "shop-toy" in json.loads(capsys.readouterr().out.strip().splitlines()[-1])["path"]
    for command in ("train", "eval"):
        assert main([command, "--dataset", "shop-toy", "--method", "pretrained", "--profile", "tiny", *home]) == 0
    record = EvaluationRecord.load(eval_dir(tmp_path, "shop-toy", "pretrained", "tiny"))
    assert record is not None and record.summary["dataset"] == "shop-toy" and "P@1" in record.metrics
