"""What a method costs, measured (RAMEN Table 5: train time, prediction time and model size relative to one
reference method, the registry's ``cost_reference()``).

Per method and data set, from what training and evaluation recorded plus one timing:

- **train seconds per epoch**: the train summary's ``seconds_per_epoch``, else ``train_seconds`` (else the training
  stage's ``seconds``) over ``epochs``; ``None`` (shown "n/a") for a method that trains no epoch (the untrained
  encoder). A method built on another run's encoder (:data:`BASE_RUN_KEYS`: what its ``requires`` names, e.g. the
  classifier stage reusing its base's encoder) adds that run's seconds, so the figure is what training it from
  scratch costs.
- **query inference ms**: ``total`` is measured here, the same way for every method — its serving scorer
  (``Method.scorer``, what ``xc predict`` runs) over the same N test queries, model loaded and warmed up first;
  ``encoder`` / ``graph`` / ``search`` are what the method's predictions recorded (:data:`SPLIT_KEYS` in the
  evaluation summary; ``ms_per_query``, the ANN search every index method times, stands for ``search``).
- **parameters**: the train summary's ``parameters`` when the method records it, else counted from the files of
  the weights of the model it serves (:func:`count_parameters`; the results stage names them: the encoder's
  weights, plus the classifier stage's W).

:func:`with_ratios` divides each by the reference method's (the caller names it: ``xc_core.methods.cost_reference()``,
a layer above this one): the reference's own ratios are 1.0.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: where a method's predictions record the split of a query's inference time (ms/query) in its evaluation summary
SPLIT_KEYS = {"encoder": "encoder_ms_per_query", "graph": "graph_ms_per_query", "search": "search_ms_per_query"}
#: where a train summary names the run whose encoder it reused or builds on (training it is part of the cost)
BASE_RUN_KEYS = ("encoder_from_run", "depends_on_run_id")
SEARCH_FALLBACK = "ms_per_query"  # the ANN search time every label-index method records
TIMED_QUERIES = 256  # N: the first N test queries, the same for every method


@dataclass
class MethodCost:
    """One method's measured costs on one data set (None: not measured / not applicable)."""

    method: str
    dataset: str
    train_seconds: float | None = None  # including the base run's, when it builds on one
    base: str = ""  # the method whose trained encoder it reused or builds on (its seconds are included)
    epochs: int | None = None
    seconds_per_epoch: float | None = None
    ms_per_query: float | None = None  # total, measured by :func:`time_scorer`
    split_ms: dict[str, float] = field(default_factory=dict)  # encoder / graph / search, as recorded
    timed_queries: int = 0
    parameters: int | None = None
    parameters_from: str = ""  # "recorded" or what was counted ("encoder", "encoder + classifier W")
    ratios: dict[str, float | None] = field(default_factory=dict)  # to the reference: train, predict, size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def base_run(summary: dict[str, Any]) -> str | None:
    """The MLflow run whose trained encoder this model reused or builds on (the method its ``requires`` names),
    whose training is part of this one's cost; None when it trained everything itself."""
    found = next((summary[k] for k in BASE_RUN_KEYS if summary.get(k)), None)
    return str(found) if found else None


def train_cost(summary: dict[str, Any], base_seconds: float | None = None) -> tuple[float | None, int | None,
                                                                                      float | None]:
    """(train seconds, epochs, seconds per epoch) from a train summary; ``base_seconds``: the training of the run
    whose encoder it reused (added). Epochs: ``epochs``, else the length of its per-epoch ``history``. No epoch
    trained: seconds per epoch is None."""
    epochs = summary.get("epochs")
    history = summary.get("history")
    if not isinstance(epochs, (int, float)) and isinstance(history, list):
        epochs = len(history)
    epochs = int(epochs) if isinstance(epochs, (int, float)) else None
    seconds = summary.get("train_seconds", summary.get("seconds"))
    seconds = float(seconds) if isinstance(seconds, (int, float)) else None
    if seconds is not None and base_seconds is not None:
        seconds += base_seconds
    per_epoch = summary.get("seconds_per_epoch")
    if isinstance(per_epoch, (int, float)) and base_seconds is None:
        return seconds, epochs, float(per_epoch)
    if not epochs or seconds is None:
        return seconds, epochs, None
    return seconds, epochs, seconds / epochs


def inference_split(evaluation: dict[str, Any]) -> dict[str, float]:
    """The recorded split of a query's inference time (ms/query): encoder, graph steps, search."""
    found = {part: float(evaluation[key]) for part, key in SPLIT_KEYS.items()
             if isinstance(evaluation.get(key), (int, float))}
    if "search" not in found and isinstance(evaluation.get(SEARCH_FALLBACK), (int, float)):
        found["search"] = float(evaluation[SEARCH_FALLBACK])
    return found


def time_scorer(scorer: Callable[[list[str], int], Any], queries: list[str], k: int = 100,
                warmup: int = 8) -> float:
    """Milliseconds per query of ``scorer`` over ``queries`` in one call, after a warm-up call on a few."""
    if not queries:
        return float("nan")
    scorer(queries[:warmup], k)
    started = time.perf_counter()
    scorer(queries, k)
    return 1000 * (time.perf_counter() - started) / len(queries)


def tensor_elements(path: Path) -> int:
    """Number of values in a weights file without loading it: ``.safetensors`` (header), ``.npy`` (memory-mapped),
    ``.npz``; anything else counts 0."""
    if path.suffix == ".safetensors":
        with path.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
        return sum(int(np.prod(t["shape"], dtype=np.int64)) for name, t in header.items() if name != "__metadata__")
    if path.suffix == ".npy":
        return int(np.load(path, mmap_mode="r").size)
    if path.suffix == ".npz":
        with np.load(path) as arrays:
            return sum(int(arrays[name].size) for name in arrays.files)
    return 0


#: the arrays of a hybrid-channel layer file (classifier/xrlinear/) that are weights: the kept sparse weights, the
#: dense block and the biases (its index arrays, indptr / indices / children, are not parameters)
LAYER_WEIGHTS = ("data", "dense", "biases")


def count_parameters(paths: Iterable[Path]) -> int:
    """Values in the weights a model is served from: every ``.safetensors`` file of a folder (an encoder saved
    with ``save_pretrained``), the weights of every ``layer*.npz`` of a folder (the hybrid channel's tree), or a
    weights file itself."""
    total = 0
    for path in paths:
        if path.is_dir() and not any(path.glob("*.safetensors")):
            for layer in sorted(path.glob("layer*.npz")):
                with np.load(layer, allow_pickle=False) as arrays:
                    total += sum(int(arrays[name].size) for name in LAYER_WEIGHTS if name in arrays.files)
            continue
        files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
        total += sum(tensor_elements(f) for f in files if f.exists())
    return total


def parameter_count(summary: dict[str, Any], served: dict[str, Path]) -> tuple[int | None, str]:
    """The recorded ``parameters`` when the method records them, else :func:`count_parameters` of the ``served``
    weights (part name → folder or file, e.g. {"encoder": ..., "classifier W": ...}); (None, "") without either."""
    recorded = summary.get("parameters")
    if isinstance(recorded, (int, float)):
        return int(recorded), "recorded"
    found = {part: path for part, path in served.items() if path.exists()}
    return (count_parameters(found.values()), " + ".join(found)) if found else (None, "")


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0 or not np.isfinite(value) or not np.isfinite(reference):
        return None
    return value / reference


def with_ratios(costs: Iterable[MethodCost], reference: str) -> list[MethodCost]:
    """Each cost's train (s/epoch), predict (ms/query) and size (parameters) over the ``reference`` method's on the
    same data set (the registry's ``cost_reference()``); None where either side is missing (no reference evaluated,
    an untrained method)."""
    rows = list(costs)
    refs = {c.dataset: c for c in rows if c.method == reference}
    for c in rows:
        ref = refs.get(c.dataset)
        c.ratios = {"train": _ratio(c.seconds_per_epoch, ref.seconds_per_epoch if ref else None),
                    "predict": _ratio(c.ms_per_query, ref.ms_per_query if ref else None),
                    "size": _ratio(None if c.parameters is None else float(c.parameters),
                                   None if ref is None or ref.parameters is None else float(ref.parameters))}
    return rows
