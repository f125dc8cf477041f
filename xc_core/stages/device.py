"""What a lent GPU machine sends back, read here: the folders of runs that shared one device (each a
``summary.json`` and one ``<data set>.npz`` of rankings per data set), merged into one summary and one set of arrays
per data set. ``benchmarks/device_full.py`` writes them on the device and scores the merged result here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def merge_returned(folders: list[Path]) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """(one summary, each data set's arrays) of the folders that runs sharing one GPU returned: the runs and
    arrays side by side, the device seconds the longest of them (they ran at the same time)."""
    summary: dict[str, Any] = {"runs": {}, "skipped": []}
    arrays: dict[str, dict[str, np.ndarray]] = {}
    for folder in folders:
        part = json.loads((folder / "summary.json").read_text())
        summary["device"] = part["device"]
        summary["seconds"] = max(summary.get("seconds") or 0, part.get("seconds") or 0) or None
        summary["runs"].update(part["runs"])
        summary["skipped"] += part["skipped"]
        for npz in sorted(folder.glob("*.npz")):
            loaded = np.load(npz)
            arrays.setdefault(npz.stem, {}).update({key: loaded[key] for key in loaded.files})
    return summary, arrays
