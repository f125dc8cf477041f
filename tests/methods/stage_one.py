"""What a method trained on from a stage I must show (TextGNN, OAK): shared by their tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch


def assert_trained_on_from_stage_one(home: Path, method: str, recipe: dict[str, Any]) -> None:
    """``method`` trained on ``home``'s ``dual_encoder`` (a light tower, ``recipe``) starts where stage I ended
    (epoch 0's validation recall is stage I's: its own layers start as the identity on the encoder), keeps stage I's
    transformer bit for bit, trains the light tower on and records stage I; the same run with
    another seed (other validation rows than stage I's) is refused."""
    from safetensors.torch import load_file

    from xc_core.datasets.container import XCDataset
    from xc_core.encoders.tower import WEIGHTS
    from xc_core.paths import anchors_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.train import train_method
    from xc_core.training.record import TrainedModel

    data = XCDataset.load(anchors_dir(home, "synthetic"))
    base = TrainedModel.of(home, "synthetic", "dual_encoder", "tiny").summary
    record = train_method(data, method, "tiny", home, overrides={**recipe, "stage_one": "dual_encoder"})
    assert record["stage_one"] == "dual_encoder" and record["light_tower"] is True
    assert record["depends_on_run_id"] == base["mlflow_run_id"]
    assert record["history"][0]["val_recall@10"] == pytest.approx(base["val_recall@10"], abs=1e-9)
    ours, theirs = Path(record["encoder_dir"]), Path(base["encoder_dir"])
    transformer, stage = load_file(str(ours / "model.safetensors")), load_file(str(theirs / "model.safetensors"))
    assert transformer.keys() == stage.keys() and all(torch.equal(transformer[k], stage[k]) for k in stage)
    tower, start = load_file(str(ours / WEIGHTS)), load_file(str(theirs / WEIGHTS))
    assert any(not torch.equal(tower[k], start[k]) for k in start)  # the light tower trained on
    # no "the loss falls" here: stage I already fits the probe batches (OAK's task loss 0.33 on the tiny home), and the
    # layer's first steps on neighbours can raise it; learning itself is each method's own test
    assert [h["epoch"] for h in record["history"]] == list(range(recipe["epochs"] + 1))
    with pytest.raises(ValueError, match="validation split differs from stage I's"):
        train_method(data, method, get_profile("tiny").model_copy(update={"seed": 7}), home,
                     overrides={**recipe, "stage_one": "dual_encoder"})
    assert (ours / WEIGHTS).is_file()  # refused before the model folder was emptied: the trained model is kept
