"""Shared fixtures: small real inputs cut from the shared benchmark data, and temp homes."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from xc_core.datasets.container import XCDataset
from xc_core.paths import aol_archive

# Tests write MLflow runs into their temporary homes, never into a store the shell points at.
os.environ.pop("MLFLOW_TRACKING_URI", None)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _no_leaked_tracking_uri():
    """``mlflow.set_tracking_uri`` exports MLFLOW_TRACKING_URI; a test that calls it must not send every
    later test's runs to its store (xc_core itself uses ``xc_core.tracking.store.activate``)."""
    yield
    os.environ.pop("MLFLOW_TRACKING_URI", None)


@pytest.fixture(scope="session")
def aol_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real slice of aol-1000: the first 25 user files of the shared archive, repacked as .tgz."""
    source = aol_archive()
    if not source.exists():
        pytest.fail(f"shared data missing: {source} (see ../shared/data/README.md)")
    out = tmp_path_factory.mktemp("aol") / "slice.tgz"
    with tarfile.open(source, "r|gz") as src, tarfile.open(out, "w:gz") as dst:
        taken = 0
        for member in src:
            if not member.isfile():
                continue
            data = src.extractfile(member).read()  # type: ignore[union-attr]  # a regular file: extractfile gives its reader
            info = tarfile.TarInfo(member.name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
            taken += 1
            if taken == 25:
                break
    return out


def write_tgz(path: Path, files: dict[str, bytes]) -> Path:
    """A gzip tar whose members are ``user_search_logs/<name>`` with the given bytes."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"user_search_logs/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path

@pytest.fixture(scope="session")
def tiny_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xc_core.profiles import get_profile
    from xc_core.simulate.pipeline import simulate_into_store
    from xc_core.stages.anchor_sets import materialize_anchor_sets
    from xc_core.stages.dataset import materialize_dataset

    home = tmp_path_factory.mktemp("train-home")
    simulate_into_store("tiny", 0, home)
    dataset, _ = materialize_dataset("synthetic", home)
    materialize_anchor_sets(dataset, home, get_profile("tiny"), use_encoder=False)
    return home


@pytest.fixture
def tiny_data(tiny_home: Path) -> XCDataset:
    from xc_core.paths import anchors_dir

    return XCDataset.load(anchors_dir(tiny_home, "synthetic"))
