"""The encoder's forward pass on ONNX Runtime, for serving: the same tokenizer, the HF model plus xc's mean pooling
exported as one graph (dynamic batch and sequence axes); ``TextEncoder.use_onnx`` runs it (``text.OnnxForward``).

Why: serving a single query on 2 CPU cores, torch's forward is most of a request's time (aol-1000, MiniLM-L6:
5.4 ms of an 8 ms search); ONNX Runtime runs the same graph in 1.5 ms, and the top-10 labels of 1,000 test
queries were identical (``benchmarks/bench_serve.py``, docs/benchmarks.md). A served model carries the
exported graph only when, at registration, it reproduces torch's vectors on sample texts
(:func:`export_checked`) and the served model's own search on it ranks their labels as on torch, up to ties
(``tracking/served.py``: what the encoder feeds, e.g. OAK's linker, can turn vector noise into other labels);
otherwise it serves with torch and says why.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from xc_core.encoders.text import TextEncoder

log = logging.getLogger(__name__)
#: largest |torch − onnx| over the sample vectors' coordinates for the export to be used (unit vectors)
TOLERANCE = 1e-4


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


def export_checked(encoder: TextEncoder, path: Path, sample: list[str]) -> dict[str, Any]:
    """Export ``encoder`` to ``path`` and compare ONNX Runtime's vectors with torch's on ``sample``; the file is
    removed (serve with torch) when they differ by more than :data:`TOLERANCE` or the export fails."""
    try:
        exporter = export(encoder, path)
        torch_vectors = encoder.encode(sample)
        encoder.use_onnx(path)
        try:
            onnx_vectors = encoder.encode(sample)
        finally:
            encoder.use_onnx(None)
        gap = float(np.abs(torch_vectors - onnx_vectors).max()) if len(sample) else 0.0
    except Exception as exc:  # no ONNX is a slower server, not a broken one
        path.unlink(missing_ok=True)
        return {"encoder_runtime": "torch", "onnx": f"export failed: {type(exc).__name__}: "
                                                   f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"}
    if gap > TOLERANCE:
        path.unlink(missing_ok=True)
        return {"encoder_runtime": "torch", "onnx": f"vectors differ from torch's by {gap:.2e} > {TOLERANCE}"}
    return {"encoder_runtime": "onnxruntime", "onnx": f"{exporter}; max |torch − onnx| {gap:.1e} on "
                                                      f"{len(sample)} label texts"}
