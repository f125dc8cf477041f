"""The data-set stage as the CLI and Dagster both run it: build, save, summarise."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.datasets.registry import build_dataset, dataset_dir, leaked_test_nodes


def materialize_dataset(name: str, home: Path, seed: int = 0) -> tuple[XCDataset, dict[str, Any]]:
    """Build data set ``name`` and save it under ``<home>/datasets/<name>``; return it and its summary."""
    started = time.perf_counter()
    dataset = build_dataset(name, home, seed=seed)
    leaks = leaked_test_nodes(dataset)
    if leaks:
        raise RuntimeError(f"{dataset.name}: {leaks} anchors are test-only documents — the split leaks into the "
                           "graphs; this is a bug in the builder, nothing was saved")
    path = dataset.save(dataset_dir(home, name))
    summary = {**dataset.summary(), "leaked_test_nodes": leaks, "path": str(path),
               "seconds": round(time.perf_counter() - started, 2)}
    return dataset, summary


def load_or_build(name: str, home: Path, seed: int = 0) -> XCDataset:
    path = dataset_dir(home, name)
    if (path / "meta.json").exists():
        return XCDataset.load(path)
    return materialize_dataset(name, home, seed)[0]
