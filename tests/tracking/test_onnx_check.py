"""The ONNX check at registration (``tracking/served.py``): an export is kept only when the served model's own search
ranks sample queries' labels as on torch, up to ties; one that ranks otherwise is dropped and torch serves. (An
export that ranks alike is kept: the OAK and serving tests register such models.) The export store
(``encoders/onnx_runtime.ExportCache``) gives the same graph for the same encoder and its architecture's graph, with
their weights written in, for other weights; each is checked like a fresh one."""

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


def _vectors(encoder: TextEncoder, graph: Path, texts: list[str]) -> np.ndarray:
    encoder.use_onnx(graph)
    try:
        return encoder.encode(texts)
    finally:
        encoder.use_onnx(None)


def test_stored_graphs_serve_the_same_weights_and_their_architecture_other_weights_and_damage_is_made_again(
        tmp_path: Path) -> None:
    import torch

    cache = ExportCache(tmp_path / "store")
    # a fresh tower is zeros, several of its matrices equal: an export of these values may merge them into one
    # initializer, which other weights could not be written through; the architecture's graph comes from distinct
    # random parameters, so it can
    encoder, other = _encoder(tmp_path / "bert", seed=0), _encoder(tmp_path / "other-bert", seed=1)
    for each in (encoder, other):
        each.add_tower(hidden=16, bigrams=64)
    with torch.no_grad():  # a trained tower: every matrix its own
        for parameter in other.tower.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=torch.Generator().manual_seed(3)) * 0.1)
    first = export_checked(encoder, tmp_path / "a.onnx", SAMPLE, cache)
    assert first["encoder_runtime"] == "onnxruntime" and "from the export cache" not in first["onnx"], first
    stored = cache.folder / f"{ExportCache.key(encoder)}.onnx"
    template = cache.folder / f"{ExportCache.architecture_key(encoder)}.onnx"
    assert stored.exists() and template.exists()
    # the same weights in another folder (a -clf's copy of its base encoder): the stored graph, byte for byte
    copy = _encoder(tmp_path / "copy", seed=0)
    copy.add_tower(hidden=16, bigrams=64)
    assert copy.tower is not None and encoder.tower is not None
    copy.tower.load_state_dict(encoder.tower.state_dict())  # its MLP's first layer starts random
    again = export_checked(copy, tmp_path / "b.onnx", SAMPLE, cache)
    assert again["encoder_runtime"] == "onnxruntime" and "from the export cache" in again["onnx"], again
    assert (tmp_path / "b.onnx").read_bytes() == (tmp_path / "a.onnx").read_bytes()
    # other weights of the same architecture: its graph with their parameters written in, no new export; on texts
    # the check never saw (unseen words, longer texts) its vectors are a direct export's
    assert ExportCache.key(other) != ExportCache.key(encoder)
    assert ExportCache.architecture_key(other) == ExportCache.architecture_key(encoder)
    made = template.stat().st_mtime_ns
    rebound = export_checked(other, tmp_path / "c.onnx", SAMPLE, cache)
    assert rebound["encoder_runtime"] == "onnxruntime" and "graph of their architecture" in rebound["onnx"], rebound
    assert template.stat().st_mtime_ns == made and len(list(cache.folder.glob("*.onnx"))) == 3
    export(other, tmp_path / "direct.onnx")
    texts = [*LABELS, "zqxv unseen wordpieces", "a much longer query about achilles heel braces for trail running"]
    assert np.abs(_vectors(other, tmp_path / "c.onnx", texts) - _vectors(other, tmp_path / "direct.onnx", texts)
                  ).max() < 1e-5
    assert np.abs(_vectors(other, tmp_path / "c.onnx", texts) - other.encode(texts)).max() < 1e-5
    # a damaged stored graph fails its check: dropped, made again, and the new graph stored
    stored.write_bytes(b"not a graph")
    fixed = export_checked(encoder, tmp_path / "d.onnx", SAMPLE, cache)
    assert fixed["encoder_runtime"] == "onnxruntime" and "from the export cache" not in fixed["onnx"], fixed
    assert (tmp_path / "d.onnx").read_bytes() == (tmp_path / "a.onnx").read_bytes() == stored.read_bytes()
    # a damaged architecture graph: dropped, and these weights exported directly
    template.write_bytes(b"not a graph")
    third = _encoder(tmp_path / "third-bert", seed=2)
    third.add_tower(hidden=16, bigrams=64)
    direct = export_checked(third, tmp_path / "e.onnx", SAMPLE, cache)
    assert direct["encoder_runtime"] == "onnxruntime" and "architecture" not in direct["onnx"], direct
    assert not template.exists() and (cache.folder / f"{ExportCache.key(third)}.onnx").exists()
    assert not list(cache.folder.glob(".*partial"))


def test_an_architecture_found_unrebindable_is_exported_directly_without_a_template(tmp_path: Path) -> None:
    """What :func:`export_template` found once (a parameter folded into something else) is remembered: the next
    encoder of that architecture is exported directly, not through a template export that cannot serve it."""
    cache = ExportCache(tmp_path / "store")
    encoder = _encoder(tmp_path / "bert", seed=0)
    arch = ExportCache.architecture_key(encoder)
    cache.mark_unrebindable(arch, "initializer val_1 [4, 4] is no parameter of the module")
    assert cache.unrebindable(arch) == "initializer val_1 [4, 4] is no parameter of the module"
    found = export_checked(encoder, tmp_path / "a.onnx", SAMPLE, cache)
    assert found["encoder_runtime"] == "onnxruntime" and "architecture" not in found["onnx"], found
    assert not (cache.folder / f"{arch}.onnx").exists() and (cache.folder / f"{ExportCache.key(encoder)}.onnx").exists()
