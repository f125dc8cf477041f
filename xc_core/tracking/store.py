"""Where MLflow runs go: ``MLFLOW_TRACKING_URI`` if set, else PostgreSQL when ``XC_POSTGRES_URL`` names a server
(:mod:`xc_core.storage`), else the home's own store, a sqlite database
``<home>/mlflow/mlflow.db`` with artifacts in ``<home>/mlflow/artifacts``. One store per home: ``make run``,
``make ui`` and the bare ``xc`` CLI resolve it here from the same home, and ``make mlflow-ui`` serves the same
folder (``$(XC_HOME)/mlflow``). An http tracking server that is configured but down is an error, never a
silent fallback."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

from xc_core.provenance import git_commit  # noqa: F401  # the one commit stamp, re-exported for tracking's callers
from xc_core.storage import ARTIFACT_ROOT_ENV, database_url, postgres_server


def tracking_uri(home: Path) -> str:
    """``MLFLOW_TRACKING_URI`` when set (an http server must answer), else the PostgreSQL database of
    ``XC_POSTGRES_URL`` (:mod:`xc_core.storage`), else the home's sqlite file."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        if uri.startswith("http"):
            _require_server(uri)
        return uri
    if postgres_server() is not None:
        return database_url("mlflow")
    store = store_dir(home)
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}"


def store_dir(home: Path) -> Path:
    """The home's MLflow store folder: ``mlflow.db`` and ``artifacts/`` (the Makefile names the same one)."""
    return home / "mlflow"


def activate(uri: str) -> None:
    """Point MLflow's fluent API (``start_run``, ``register_model``) at ``uri``.

    ``mlflow.set_tracking_uri`` also exports ``MLFLOW_TRACKING_URI``, which :func:`tracking_uri` reads as the
    user's choice: every later home of the same process (a Dagster code server, a test session) would then
    silently write to the first home's store. The variable is put back as the user left it."""
    import mlflow

    before = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    if before is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = before


def _require_server(uri: str) -> None:
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5)  # configured by the user
    except OSError as exc:
        raise ConnectionError(f"MLflow tracking server {uri} is not reachable ({exc}); start it (make mlflow-ui) "
                              "or unset MLFLOW_TRACKING_URI to use the local sqlite store") from exc


def artifact_root(uri: str, home: Path) -> str | None:
    """Where new experiments keep their artifacts: ``XC_ARTIFACT_ROOT`` when set; beside a sqlite store; the home's
    ``mlflow/artifacts`` for a PostgreSQL store (the default would be ./mlruns of the current directory); None for
    a tracking server, which has its own."""
    configured = os.environ.get(ARTIFACT_ROOT_ENV, "").strip()
    if configured:
        return configured.rstrip("/")
    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///")).parent.joinpath("artifacts").as_uri()
    if uri.startswith("postgres"):  # postgresql://, postgresql+psycopg2:// …
        return (store_dir(home) / "artifacts").resolve().as_uri()
    return None


def ensure_experiment(name: str, home: Path) -> str:
    """The experiment id of ``name``, created with an explicit artifact location when missing."""
    import mlflow

    uri = tracking_uri(home)
    activate(uri)
    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    root = artifact_root(uri, home)
    return mlflow.create_experiment(name, artifact_location=f"{root}/{name}" if root else None)
