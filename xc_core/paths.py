"""Where xc reads and writes: one place that resolves the home folder and the shared data, and names each
stage's folder in the home (every layer reads another stage's output through these, so they live at the bottom)."""

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


# ---- the home's layout: one folder per (stage, data set[, method, profile]) ------------------------------

def dataset_slug(name: str) -> str:
    """A data set's folder name: its registered name, or the last part of an XC-repository folder's path."""
    return Path(name).name if ("/" in name or Path(name).is_dir()) else name


def dataset_dir(home: Path, name: str) -> Path:
    return home / "datasets" / dataset_slug(name)


def graphs_dir(home: Path, name: str) -> Path:
    return home / "graphs" / dataset_slug(name)


def anchors_dir(home: Path, name: str) -> Path:
    return home / "anchor_sets" / dataset_slug(name)


def model_dir(home: Path, dataset: str, method: str, profile: str) -> Path:
    return home / "models" / dataset_slug(dataset) / f"{method}-{profile}"


def home_of_model(folder: Path) -> Path | None:
    """The home a :func:`model_dir` folder lies in; None for a folder not laid out as one."""
    folder = Path(folder)
    return folder.parents[2] if len(folder.parents) > 2 and folder.parents[1].name == "models" else None


def vectors_dir(home: Path) -> Path:
    """The home's store of encodings (``encoders/vector_cache.py``): safe to delete at any time."""
    return home / "cache" / "vectors"


def index_dir(home: Path, dataset: str, method: str, profile: str) -> Path:
    return home / "indexes" / dataset_slug(dataset) / f"{method}-{profile}"


def eval_root(home: Path, dataset: str) -> Path:
    """Every evaluation of a data set (one ``eval_dir`` per method and profile)."""
    return home / "eval" / dataset_slug(dataset)


def eval_dir(home: Path, dataset: str, method: str, profile: str, split: str = "test") -> Path:
    """A method's evaluation of the test split, or of another split (``validation``: the promotion split the
    registry gate decides on) in a sub-folder named for it, so reports reading the test's never mix them."""
    base = eval_root(home, dataset) / f"{method}-{profile}"
    return base if split == "test" else base.parent / split / base.name


def results_path(home: Path, dataset: str, profile: str) -> Path:
    """One data set's tables of the results page (the ``<data set>/results`` asset's output)."""
    return home / "results" / f"{dataset_slug(dataset)}-{profile}.json"


def report_path(home: Path, dataset: str, profile: str) -> Path:
    return home / "reports" / f"{dataset_slug(dataset)}-{profile}.html"


def abtest_dir(home: Path, dataset: str, profile: str) -> Path:
    """A data set's A/B tests at one profile: ``<treatment>-vs-<control>.json`` and ``.html`` each."""
    return home / "abtest" / dataset_slug(dataset) / profile


def abtest_cache_dir(home: Path, dataset: str) -> Path:
    """Model arms' candidates per world query row, one file per training run and K (shared by every profile)."""
    return home / "abtest" / dataset_slug(dataset) / "cache"


def gate_abtest_path(home: Path, dataset: str, profile: str, challenger: str, champion: str) -> Path:
    """The promotion gate's A/B test of registry version ``challenger`` against version ``champion`` (JSON)."""
    return abtest_dir(home, dataset, profile) / "gate" / f"v{challenger}-vs-v{champion}.json"
