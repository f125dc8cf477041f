"""Where xc reads and writes: one place that resolves the home folder and the shared data."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The data root for everything xc writes (event store, graphs, data sets, models, MLflow).

    Precedence: the explicit argument, then ``XC_HOME``, then ``.xc/`` in the repository (gitignored).
    """
    chosen = home or os.environ.get("XC_HOME") or REPO_ROOT / ".xc"
    path = Path(chosen).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def shared_data_dir() -> Path:
    """The read-only benchmark data (aol-1000, wikispeedia): ``XC_SHARED_DATA`` or ``../shared/data``."""
    env = os.environ.get("XC_SHARED_DATA")
    return Path(env).expanduser().resolve() if env else (REPO_ROOT.parent / "shared" / "data").resolve()


def aol_archive() -> Path:
    return shared_data_dir() / "aol-1000" / "user_search_logs.tgz"
