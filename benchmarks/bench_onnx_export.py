"""What a registration pays to serve a newly trained encoder on ONNX Runtime: a direct export of its weights (torch's
dynamo exporter, the baseline, measured in the same run) against writing them into the graph its architecture was
exported to once (``encoders/onnx_runtime.rebind``, what the export store does for every further set of weights of
that architecture). The "trained" weights are the model's own with every parameter moved by seeded noise; each graph
is checked against torch on texts the store's check never sees, and ONNX Runtime's speed is timed on both graphs
(the rebound graph must serve as fast as a direct export). Results are merged into
benchmarks/results/bench_onnx_export.json under the model folder's name.

    .venv/bin/python benchmarks/bench_onnx_export.py [--model PATH] [--repeats 2] [--note "..."]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.measure import machine
from xc_core.provenance import checkout_stamp, write_result

RESULTS = Path(__file__).resolve().parent / "results" / "bench_onnx_export.json"
TEXTS = ["running shoes for men", "cheap flights to rome", "zqxv unseen wordpieces", "bank",
         "a much longer query about achilles heel braces for trail running in the rain"]


def _trained_stand_in(encoder: Any, seed: int) -> Any:
    """The encoder with every parameter moved by seeded noise (1% of its spread): other weights, same architecture."""
    import torch

    other = copy.copy(encoder)
    other.model = copy.deepcopy(encoder.model)
    other.runner = other.model  # what torch's forward calls
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in other.model.parameters():
            spread = float(parameter.std()) if parameter.numel() > 1 else 1.0
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.01 * (spread or 1.0))
    return other


def _onnx_vectors(encoder: Any, graph: Path, texts: list[str]) -> tuple[np.ndarray, float]:
    """The graph's vectors for ``texts`` and its milliseconds per text over 256 texts (after one warm-up)."""
    encoder.use_onnx(graph)
    try:
        vectors = encoder.encode(texts)
        batch = [f"{texts[i % len(texts)]} {i}" for i in range(256)]
        encoder.encode(batch[:8])
        start = time.perf_counter()
        encoder.encode(batch)
        return vectors, (time.perf_counter() - start) * 1000 / len(batch)
    finally:
        encoder.use_onnx(None)


def measure(model: Path, repeats: int) -> dict[str, Any]:
    from xc_core.encoders.onnx_runtime import export, export_template, rebind
    from xc_core.encoders.text import EncoderConfig, TextEncoder

    encoder = TextEncoder(EncoderConfig(model_path=str(model), max_length=32))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        _, binding = export_template(encoder, folder / "template.onnx")
        template_s = time.perf_counter() - start
        for seed in range(repeats):
            other = _trained_stand_in(encoder, seed)
            start = time.perf_counter()
            export(other, folder / "direct.onnx")
            direct_s = time.perf_counter() - start
            start = time.perf_counter()
            rebind(folder / "template.onnx", binding, other, folder / "rebound.onnx")
            rebind_s = time.perf_counter() - start
            torch_vectors = other.encode(TEXTS)
            direct, direct_ms = _onnx_vectors(other, folder / "direct.onnx", TEXTS)
            rebound, rebound_ms = _onnx_vectors(other, folder / "rebound.onnx", TEXTS)
            rows.append({"seed": seed, "direct_export_s": round(direct_s, 2), "rebind_s": round(rebind_s, 2),
                         "ratio": round(direct_s / rebind_s, 1),
                         "max_abs_rebound_vs_torch": float(np.abs(rebound - torch_vectors).max()),
                         "max_abs_rebound_vs_direct": float(np.abs(rebound - direct).max()),
                         "onnx_ms_per_text": {"direct": round(direct_ms, 3), "rebound": round(rebound_ms, 3)}})
    return {"bench": "bench_onnx_export", "machine": machine(), "code": checkout_stamp(), "model": str(model),
            "parameters": sum(p.numel() for p in encoder.model.parameters()), "bound_initializers": len(binding),
            "template_export_s": round(template_s, 2), "runs": rows,
            "median_ratio": float(np.median([r["ratio"] for r in rows])),
            "baseline": "a direct dynamo export of the same weights, timed in the same run",
            "load_average_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    from xc_core.encoders.text import default_model_path

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="an HF model folder (default: the shipped MiniLM)")
    parser.add_argument("--repeats", type=int, default=2, help="sets of other weights, each exported both ways")
    parser.add_argument("--note", default="", help="recorded with the result (e.g. what else shared the cores)")
    parser.add_argument("--no-save", action="store_true", help="do not update benchmarks/results")
    args = parser.parse_args()
    model = args.model or default_model_path()
    result = measure(model, args.repeats)
    if args.note:
        result["note"] = args.note
    print(json.dumps(result, indent=2))
    if not args.no_save:
        merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        merged[Path(model).name] = result
        write_result(RESULTS, json.dumps(merged, indent=2) + "\n")


if __name__ == "__main__":
    main()
