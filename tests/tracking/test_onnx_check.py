"""The ONNX check at registration (``tracking/served.py``): an export is kept only when the served model's own search
ranks sample queries' labels as on torch, up to ties; one that ranks otherwise is dropped and torch serves. (An
export that ranks alike is kept: the OAK and serving tests register such models.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xc_core.encoders.onnx_runtime import export
from xc_core.encoders.text import EncoderConfig, TextEncoder
from xc_core.encoders.tiny import build_tiny_bert
from xc_core.index import IndexConfig, LabelIndex
from xc_core.tracking.served import Labels, ServedModel, _onnx_ranks_as_torch

LABELS = ["running shoes", "trail runners", "cheap flights", "flights to rome", "bank of america", "credit cards",
          "achilles heel brace", "knee brace", "pizza near me", "sushi delivery", "garden hose", "lawn mower"]
SAMPLE = ["shoes for running", "flight to rome", "heel brace", "pizza delivery", "mortgage rates"]


class _EncoderModel:
    """The encoder family's pyfunc model in one line: texts → the encoder's vectors."""

    def __init__(self, encoder: TextEncoder) -> None:
        self.predict = encoder.encode


def _encoder(folder: Path, seed: int) -> TextEncoder:
    return TextEncoder(EncoderConfig(model_path=str(build_tiny_bert(folder, seed=seed)), max_length=16))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[ServedModel, TextEncoder]:
    encoder = _encoder(tmp_path_factory.mktemp("tiny-bert"), seed=0)
    index = LabelIndex.build(encoder.encode(LABELS), None, IndexConfig(kind="flat"))
    return ServedModel(_EncoderModel(encoder), index, Labels([str(i) for i in range(len(LABELS))], LABELS), {}), encoder


def test_an_export_that_ranks_otherwise_is_dropped_and_torch_serves(served: tuple[ServedModel, TextEncoder],
                                                                    tmp_path: Path) -> None:
    model, encoder = served
    path = tmp_path / "encoder.onnx"
    export(_encoder(tmp_path / "other-bert", seed=1), path)  # another network's graph: other vectors, other labels
    before = model.search(SAMPLE, 10)
    runtime = _onnx_ranks_as_torch(model, encoder, path, SAMPLE, {"encoder_runtime": "onnxruntime", "onnx": "ok"})
    assert runtime["encoder_runtime"] == "torch" and not path.exists(), runtime
    assert "differ from torch's beyond ties" in runtime["onnx"]
    assert encoder.onnx is None and np.array_equal(model.search(SAMPLE, 10)[1], before[1])  # left on torch
