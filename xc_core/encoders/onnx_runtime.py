"""The encoder's forward pass on ONNX Runtime, for serving: the same tokenizer, the HF model plus xc's mean pooling
exported as one graph (dynamic batch and sequence axes); ``TextEncoder.use_onnx`` runs it (``text.OnnxForward``).

Why: serving a single query on 2 CPU cores, torch's forward is most of a request's time (aol-1000, MiniLM-L6:
5.4 ms of an 8 ms search); ONNX Runtime runs the same graph in 1.5 ms, and the top-10 labels of 1,000 test
queries were identical (``benchmarks/bench_serve.py``, docs/benchmarks.md). A served model carries the
exported graph only when, at registration, it reproduces torch's vectors on sample texts
(:func:`export_checked`) and the served model's own search on it ranks their labels as on torch, up to ties
(``tracking/served.py``: what the encoder feeds, e.g. OAK's linker, can turn vector noise into other labels);
otherwise it serves with torch and says why.

The export (torch's dynamo exporter: several seconds for MiniLM, most of a registration's time at the tiny profile)
goes through a content-addressed store (:class:`ExportCache`): a `-clf` method serves its base encoder's weights
byte for byte, and `ramen` the encoder `dual_encoder` served when its graph test finds no gain, so one pipeline run
exports the same graph several times. A stored graph is checked against torch like a fresh one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from xc_core.encoders.text import TextEncoder

log = logging.getLogger(__name__)
#: largest |torch − onnx| over the sample vectors' coordinates for the export to be used (unit vectors)
TOLERANCE = 1e-4
#: a folder of exported graphs shared by several homes (a machine's homes, a test session); default: the home's
CACHE_ENV = "XC_ONNX_CACHE"


class ExportCache:
    """Exported graphs in ``folder``: ``<key>.onnx`` and ``<key>.json`` (the exporter's name). The key hashes every
    weight and the tokenizer (:func:`~xc_core.encoders.vector_cache.weights_digest`), the source of the modules the
    graph is traced from (pooling, tower, this exporter) and torch's and onnxscript's versions. Only a graph that
    passed :func:`export_checked` is stored; files are written whole (a temporary name, then a rename), so parallel
    registrations never read half a graph."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @classmethod
    def for_home(cls, home: Path) -> ExportCache:
        """``$XC_ONNX_CACHE`` when set, else ``<home>/cache/onnx`` (safe to delete at any time)."""
        return cls(Path(os.environ[CACHE_ENV]) if os.environ.get(CACHE_ENV) else home / "cache" / "onnx")

    @staticmethod
    def key(encoder: TextEncoder) -> str:
        import onnxscript
        import torch

        from xc_core.encoders import text, tower
        from xc_core.encoders.vector_cache import weights_digest

        digest = hashlib.sha256(f"{weights_digest(encoder)}\0{torch.__version__}\0{onnxscript.__version__}\0".encode())
        for source in (str(text.__file__), str(tower.__file__), __file__):  # what the graph is traced from
            digest.update(Path(source).read_bytes())
        return digest.hexdigest()[:32]

    def fetch(self, key: str, path: Path) -> str | None:
        """Copy the graph stored under ``key`` to ``path``; its exporter's name, or None when none is stored."""
        import json

        try:
            exporter = str(json.loads((self.folder / f"{key}.json").read_text())["exporter"])
            shutil.copyfile(self.folder / f"{key}.onnx", path)
        except (OSError, ValueError, KeyError):
            return None
        return exporter

    def store(self, key: str, path: Path, exporter: str) -> None:
        """Keep the graph at ``path`` under ``key`` (the graph first, then its meta: a meta always has its graph)."""
        import json

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for name, write in ((f"{key}.onnx", lambda f: shutil.copyfile(path, f)),
                                (f"{key}.json", lambda f: f.write_text(json.dumps({"exporter": exporter})))):
                partial = self.folder / f".{name}.{os.getpid()}.partial"
                write(partial)
                os.replace(partial, self.folder / name)
        except OSError as err:  # a full or read-only disk costs the reuse, never the export
            log.warning("ONNX export cache: could not store %s (%s); check that %s is a writable folder",
                        key, err, self.folder)

    def drop(self, key: str) -> None:
        for name in (f"{key}.json", f"{key}.onnx"):
            (self.folder / name).unlink(missing_ok=True)


def export(encoder: TextEncoder, path: Path) -> str:
    """Write ``encoder`` (HF model + mean pooling + L2 norm, then its tower when it has one) to ``path``; returns the
    exporter used."""
    import torch

    from xc_core.encoders.text import mean_pool

    class Pooled(torch.nn.Module):
        def __init__(self, model: Any, tower: Any) -> None:
            super().__init__()
            self.model, self.tower = model, tower

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            pooled = mean_pool(hidden, attention_mask)
            return pooled if self.tower is None else self.tower(pooled, input_ids, attention_mask)

    module = Pooled(encoder.model, encoder.tower).eval().cpu()
    example = encoder.tokenize(["running shoes for men", "bank"])  # padded: the mask path is traced
    args = (example["input_ids"].cpu(), example["attention_mask"].cpu())
    inputs, outputs = ["input_ids", "attention_mask"], ["vectors"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
            torch.onnx.export(module, args, str(path), dynamo=True, opset_version=18, verbose=False,
                              external_data=False,
                              dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
                              input_names=inputs, output_names=outputs)
            return "torch.onnx.export(dynamo=True), opset 18"
        except Exception as exc:  # the dynamo exporter is the newer one: fall back to TorchScript's, and say so
            log.warning("dynamo ONNX export failed (%s); using the TorchScript exporter", str(exc).splitlines()[0])
            axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                    "vectors": {0: "batch"}}
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=17, dynamic_axes=axes,
                              input_names=inputs, output_names=outputs)
            return "torch.onnx.export(dynamo=False), opset 17"


def export_checked(encoder: TextEncoder, path: Path, sample: list[str],
                   cache: ExportCache | None = None) -> dict[str, Any]:
    """Export ``encoder`` to ``path`` and compare ONNX Runtime's vectors with torch's on ``sample``; the file is
    removed (serve with torch) when they differ by more than :data:`TOLERANCE` or the export fails.

    With ``cache``, a graph stored for the same encoder is taken instead of a new export and checked the same way;
    one that fails (a damaged file) is dropped and the encoder exported afresh. A fresh graph that passes is stored.
    """
    key = ExportCache.key(encoder) if cache is not None else ""
    exporter = cache.fetch(key, path) if cache is not None else None
    if exporter is not None and cache is not None:
        found = _checked(encoder, path, sample, f"{exporter}, from the export cache")
        if found["encoder_runtime"] == "onnxruntime":
            return found
        log.warning("ONNX export cache: the stored graph %s failed its check (%s); exporting again", key,
                    found["onnx"])
        cache.drop(key)
    try:
        exporter = export(encoder, path)
    except Exception as exc:  # no ONNX is a slower server, not a broken one
        path.unlink(missing_ok=True)
        return _failed(exc)
    found = _checked(encoder, path, sample, exporter)
    if cache is not None and found["encoder_runtime"] == "onnxruntime":
        cache.store(key, path, exporter)
    return found


def _failed(exc: Exception) -> dict[str, Any]:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return {"encoder_runtime": "torch", "onnx": f"export failed: {type(exc).__name__}: {first}"}


def _checked(encoder: TextEncoder, path: Path, sample: list[str], exporter: str) -> dict[str, Any]:
    """The runtime record of the graph at ``path``: ONNX Runtime when its vectors on ``sample`` are torch's within
    :data:`TOLERANCE`, else torch (the file removed)."""
    try:
        torch_vectors = encoder.encode(sample)
        encoder.use_onnx(path)
        try:
            onnx_vectors = encoder.encode(sample)
        finally:
            encoder.use_onnx(None)
        gap = float(np.abs(torch_vectors - onnx_vectors).max()) if len(sample) else 0.0
    except Exception as exc:  # a graph ONNX Runtime cannot load or run: serve with torch
        path.unlink(missing_ok=True)
        return _failed(exc)
    if gap > TOLERANCE:
        path.unlink(missing_ok=True)
        return {"encoder_runtime": "torch", "onnx": f"vectors differ from torch's by {gap:.2e} > {TOLERANCE}"}
    return {"encoder_runtime": "onnxruntime", "onnx": f"{exporter}; max |torch − onnx| {gap:.1e} on "
                                                      f"{len(sample)} label texts"}
