"""The ONNX check at registration (``tracking/served.py``): an export is kept only when the served model's own search
ranks sample queries' labels as on torch, up to ties; one that ranks otherwise is dropped and torch serves. (An
export that ranks alike is kept: the OAK and serving tests register such models.) The export store
(``encoders/onnx_runtime.ExportCache``) gives the same graph for the same encoder, checked like a fresh one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xc_core.encoders.onnx_runtime import ExportCache, export, export_checked
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


def test_the_same_encoder_takes_its_stored_graph_and_a_damaged_one_is_exported_again(tmp_path: Path) -> None:
    cache = ExportCache(tmp_path / "store")
    encoder, other = _encoder(tmp_path / "bert", seed=0), _encoder(tmp_path / "other-bert", seed=1)
    first = export_checked(encoder, tmp_path / "a.onnx", SAMPLE, cache)
    assert first["encoder_runtime"] == "onnxruntime" and "from the export cache" not in first["onnx"], first
    [stored] = cache.folder.glob("*.onnx")
    # the same weights in another folder (a -clf's copy of its base encoder): the stored graph, byte for byte
    again = export_checked(_encoder(tmp_path / "copy", seed=0), tmp_path / "b.onnx", SAMPLE, cache)
    assert again["encoder_runtime"] == "onnxruntime" and "from the export cache" in again["onnx"], again
    assert (tmp_path / "b.onnx").read_bytes() == (tmp_path / "a.onnx").read_bytes()
    # other weights: another key, exported afresh
    assert ExportCache.key(other) != ExportCache.key(encoder)
    assert "from the export cache" not in export_checked(other, tmp_path / "c.onnx", SAMPLE, cache)["onnx"]
    assert len(list(cache.folder.glob("*.onnx"))) == 2
    # a damaged stored graph fails its check: dropped, the encoder exported again, and the fresh graph stored
    stored.write_bytes(b"not a graph")
    fixed = export_checked(encoder, tmp_path / "d.onnx", SAMPLE, cache)
    assert fixed["encoder_runtime"] == "onnxruntime" and "from the export cache" not in fixed["onnx"], fixed
    assert (tmp_path / "d.onnx").read_bytes() == (tmp_path / "a.onnx").read_bytes() == stored.read_bytes()
    assert not list(cache.folder.glob(".*partial"))
