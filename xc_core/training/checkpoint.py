"""Atomic checkpoints: encoder weights (safetensors), optimizer, scheduler, bandit, clusters, anchors and
the position in training, so ``--resume`` continues exactly where a killed run stopped."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np


def save_checkpoint(folder: Path, model: Any, tokenizer: Any, state: dict[str, Any], arrays: dict[str, np.ndarray],
                    torch_state: dict[str, Any]) -> Path:
    """Write into a temp folder, then swap it in: a crash mid-save keeps the previous checkpoint."""
    import torch

    tmp = folder.with_name(f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp / "encoder", safe_serialization=True)
    tokenizer.save_pretrained(tmp / "encoder")
    torch.save(torch_state, tmp / "trainer_state.pt")
    np.savez(tmp / "arrays.npz", **arrays)
    (tmp / "state.json").write_text(json.dumps(state, indent=2, default=str) + "\n")
    old = folder.with_name(f".{folder.name}.old-{uuid.uuid4().hex[:8]}")
    if folder.exists():
        os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def load_checkpoint(folder: Path) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
    import torch

    state = json.loads((folder / "state.json").read_text())
    with np.load(folder / "arrays.npz", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    torch_state = torch.load(folder / "trainer_state.pt", weights_only=False)
    return state, arrays, torch_state
