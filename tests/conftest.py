"""Shared fixtures: small real inputs cut from the shared benchmark data, and temp homes."""

from __future__ import annotations

import atexit
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

# `make test` runs the suite on parallel workers (pytest-xdist, PYTEST_XDIST_WORKER_COUNT of them): each worker
# gets its share of the cores for torch, BLAS/OpenMP (faiss), numba and polars, set before any of them is imported
# and inherited by the processes a test starts, so that N workers never run N × cores threads.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _threads = str(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
                  "POLARS_MAX_THREADS"):
        os.environ.setdefault(_name, _threads)

import pytest  # after the thread limits above

from xc_core.datasets.container import XCDataset
from xc_core.paths import aol_archive

# Tests write MLflow runs into their temporary homes, never into a store the shell points at.
os.environ.pop("MLFLOW_TRACKING_URI", None)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Nor into the repository's home or Dagster instance, which `make` exports (XC_HOME=.xc, DAGSTER_HOME=. with its
# state in .dagster_home): what a test leaves to the defaults lands in a home of this process's own, removed at
# exit, so parallel workers never share a file (and a user's .xc never changes what a test sees).
for _name in ("DAGSTER_HOME", "XC_DAGSTER_STATE"):
    os.environ.pop(_name, None)
_default_home = tempfile.mkdtemp(prefix="xc-test-home-")
atexit.register(shutil.rmtree, _default_home, ignore_errors=True)
os.environ["XC_HOME"] = _default_home
# Registrations share one ONNX export store (``encoders/onnx_runtime.ExportCache``), as a machine's homes may: most
# tests register the same tiny encoder, and its export is most of a tiny registration's time. Each graph taken from
# it is still checked against torch; the parallel workers of one run share it (their run id names it).
_run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
_onnx_cache = (Path(tempfile.gettempdir()) / f"xc-test-onnx-{_run_id}" if _run_id
               else Path(tempfile.mkdtemp(prefix="xc-test-onnx-")))
atexit.register(shutil.rmtree, _onnx_cache, ignore_errors=True)
os.environ["XC_ONNX_CACHE"] = str(_onnx_cache)
# Likewise one migrated empty MLflow database (``tracking/store.seed_from_schema``): each test home's sqlite store
# starts as its copy instead of running MLflow's migrations again (~1.4 s a home, ~50 homes a run in the workers).
_schema_cache = (Path(tempfile.gettempdir()) / f"xc-test-mlflow-schema-{_run_id}" if _run_id
                 else Path(tempfile.mkdtemp(prefix="xc-test-mlflow-schema-")))
atexit.register(shutil.rmtree, _schema_cache, ignore_errors=True)
os.environ["XC_MLFLOW_SCHEMA_CACHE"] = str(_schema_cache)

if os.environ.get("PYTEST_XDIST_WORKER"):
    import importlib.machinery
    import sys

    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    # A worker's __main__ is execnet's `python -c` bootstrap: no __file__ and no __spec__, which pyspark reads as
    # "running doctests" and answers with sys.exit(0) when Great Expectations imports pyspark.sql.connect (every
    # GX check then ends in SystemExit). A spec named __main__ is what `python -m` leaves, and multiprocessing's
    # spawn re-imports nothing for it, as for no spec at all.
    _main = sys.modules["__main__"]
    if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
        _main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)


@pytest.fixture(autouse=True)
def _no_leaked_environment():
    """A test's environment variables end with it: ``mlflow.set_tracking_uri`` exports MLFLOW_TRACKING_URI,
    and a test that calls it must not send every later test's runs to its store (xc_core itself uses
    ``xc_core.tracking.store.activate``); the same for anything else a test or a library sets in ``os.environ``
    (on a parallel worker the next test there is any other module's)."""
    before = dict(os.environ)
    yield
    for name in set(os.environ) - set(before):
        os.environ.pop(name, None)
    for name, value in before.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
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


#: the light tower's recipe on the tiny profile (the CPU profiles' encoder training, one epoch, the last served)
TOWER_RECIPE = {"tower": True, "tower_lr": 1e-2, "select_best": False, "epochs": 1}


@pytest.fixture(scope="session")
def tower_home(tiny_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home sharing ``tiny_home``'s data (its lineage linked) where ``dual_encoder`` trained a light tower
    (:data:`TOWER_RECIPE`): the stage I that TextGNN and OAK train on from (``stage_one``)."""
    from xc_core.paths import anchors_dir
    from xc_core.stages.results import share_data
    from xc_core.stages.train import train_method

    home = tmp_path_factory.mktemp("tower-home")
    share_data(tiny_home, home)
    train_method(XCDataset.load(anchors_dir(home, "synthetic")), "dual_encoder", "tiny", home, overrides=TOWER_RECIPE)
    return home


@pytest.fixture
def tiny_data(tiny_home: Path) -> XCDataset:
    from xc_core.paths import anchors_dir

    return XCDataset.load(anchors_dir(tiny_home, "synthetic"))
