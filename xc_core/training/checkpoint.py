"""Atomic checkpoints: encoder weights (safetensors), optimizer, scheduler, bandit, clusters, anchors and
the position in training, so ``--resume`` continues exactly where a killed run stopped.

Layout: ``<folder>/step-<n>/`` holds one complete checkpoint, written under a temp name and renamed when
complete; ``<folder>/LATEST`` (replaced atomically) names the newest one. A kill at any instant leaves
either the previous or the new checkpoint named by LATEST, never a half-written one.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np


def _write_latest(folder: Path, name: str) -> None:
    tmp = folder / f".LATEST.tmp-{os.getpid()}"
    tmp.write_text(name)
    os.replace(tmp, folder / "LATEST")


def latest(folder: Path) -> Path | None:
    pointer = folder / "LATEST"
    if not pointer.exists():
        return None
    path = folder / pointer.read_text().strip()
    return path if (path / "state.json").exists() else None


def save_encoder(folder: Path, encoder: Any) -> None:
    """Atomic save of a ``TextEncoder`` (weights as safetensors, tokenizer, its tower) as an HF folder: written under
    a temp name and renamed, so a kill mid-save leaves the previous folder (the trainer's epoch-0 and best-epoch
    copies)."""
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    encoder.save(tmp)
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)


def load_encoder_weights(encoder: Any, folder: Path) -> None:
    """Put the weights saved in an HF folder (:func:`save_encoder`, a checkpoint's ``encoder/``) into a
    ``TextEncoder``: the transformer's, and its tower's when the encoder has one."""
    from safetensors.torch import load_file

    from xc_core.encoders.tower import load_tower_weights

    encoder.model.load_state_dict(load_file(str(folder / "model.safetensors")), strict=False)
    if encoder.tower is not None:
        load_tower_weights(encoder.tower, folder)


def save_checkpoint(folder: Path, encoder: Any, state: dict[str, Any], arrays: dict[str, np.ndarray],
                    torch_state: dict[str, Any]) -> Path:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    name = f"step-{state['global_step']:08d}-e{state['epoch']}"
    tmp = folder / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    encoder.save(tmp / "encoder")
    torch.save(torch_state, tmp / "trainer_state.pt")
    np.savez(tmp / "arrays.npz", **arrays)  # type: ignore[arg-type]  # numpy stub: **dict may hold allow_pickle
    (tmp / "state.json").write_text(json.dumps(state, indent=2, default=str) + "\n")
    final = folder / name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    _write_latest(folder, name)
    for old in folder.iterdir():  # keep only the newest complete checkpoint
        if old.is_dir() and old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(folder: Path) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any], Path]:
    import torch

    path = latest(folder)
    if path is None:
        raise FileNotFoundError(f"{folder}: no complete checkpoint (LATEST missing)")
    state = json.loads((path / "state.json").read_text())
    with np.load(path / "arrays.npz", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    torch_state = torch.load(path / "trainer_state.pt", weights_only=False)
    return state, arrays, torch_state, path
