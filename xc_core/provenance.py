"""What code made a record: the code version (a hash of xc_core's sources) and the git commit of the checkout.

A model or evaluation is reused only when it records the current code version (``stages.results``): the commit
alone cannot say that, since uncommitted edits change the code without changing HEAD, while a commit that touches
only docs or tests changes HEAD without changing what a model runs."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

#: the sources the code version covers: the xc_core package (this file's folder)
SOURCE_ROOT = Path(__file__).resolve().parent


def code_version(root: Path = SOURCE_ROOT) -> str:
    """Short sha256 over every ``*.py`` under ``root``, each as its path relative to ``root`` and its bytes, in
    path order: the same sources give the same version wherever the checkout lies."""
    digest = hashlib.sha256()
    for relative in sorted(path.relative_to(root).as_posix() for path in root.rglob("*.py")):
        data = (root / relative).read_bytes()
        # the path and length delimit each file, so moving bytes from one file into the next changes the hash
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:12]


def git_commit(folder: Path | None = None) -> str:
    """``git rev-parse HEAD`` of the checkout xc runs from (marked when it has uncommitted changes), else unknown."""
    cwd = folder or SOURCE_ROOT.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head} (with uncommitted changes)" if dirty else head


def code_stamp() -> dict[str, str]:
    """What a training or evaluation record carries: ``code_version`` and ``git_commit``."""
    return {"code_version": code_version(), "git_commit": git_commit()}


def outdated(record: dict[str, Any], current: str | None = None) -> str | None:
    """Why ``record`` (a train or evaluation summary) was not made by the current code, or None when it was:
    its ``code_version`` equals ``current`` (default: :func:`code_version`). A record without one is outdated."""
    found = record.get("code_version")
    if found is None:
        return "it records no code version"
    now = current if current is not None else code_version()
    if found != now:
        return f"it was made by code version {found} (commit {record.get('git_commit', 'unknown')}), now {now}"
    return None
