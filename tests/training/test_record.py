"""A trained method is read back as a typed record (an encoder method's own entries through ``artefacts``);
nothing trained is an error that names the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xc_core.methods.encoder import artefacts
from xc_core.paths import model_dir
from xc_core.training.record import TrainedModel


def test_the_training_summary_reads_back_typed_and_a_missing_one_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="xc train --dataset wikispeedia --method ramen-clf --profile cpu"):
        TrainedModel.of(tmp_path, "wikispeedia", "ramen-clf", "cpu")
    folder = model_dir(tmp_path, "wikispeedia", "ramen", "cpu")
    folder.mkdir(parents=True)
    (folder / "train_summary.json").write_text(json.dumps({
        "dataset": "wikispeedia", "method": "ramen", "profile": "cpu", "model_uri": "models:/m-1",
        "encoder_dir": str(folder / "encoder"), "mlflow_run_id": "r1", "tracking_uri": "sqlite:///x.db",
        "classifier_dir": None, "selected_epoch": 2}))
    trained = TrainedModel.of(tmp_path, "wikispeedia", "ramen", "cpu")
    assert (trained.model_uri, trained.mlflow_run_id, trained.folder) == ("models:/m-1", "r1", folder)
    assert trained.summary["selected_epoch"] == 2, "what the method recorded of its own is kept"
    encoder_dir, max_length, classifier_dir = artefacts(trained)
    assert encoder_dir == folder / "encoder" and max_length == 32, "32: the summary predates the key"
    assert classifier_dir is None
