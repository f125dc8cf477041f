"""Where MLflow runs go: ``MLFLOW_TRACKING_URI`` if set, else PostgreSQL when ``XC_POSTGRES_URL`` names a server
(:mod:`xc_core.storage`), else the home's own store, a sqlite database
``<home>/mlflow/mlflow.db`` with artifacts in ``<home>/mlflow/artifacts``. One store per home: ``make run``,
``make ui`` and the bare ``xc`` CLI resolve it here from the same home, and ``make mlflow-ui`` serves the same
folder (``$(XC_HOME)/mlflow``). An http tracking server that is configured but down is an error, never a
silent fallback."""

from __future__ import annotations

import logging
import os
import shutil
import urllib.request
from pathlib import Path

from xc_core.provenance import git_commit  # noqa: F401  # the one commit stamp, re-exported for tracking's callers
from xc_core.storage import ARTIFACT_ROOT_ENV, database_url, postgres_server

log = logging.getLogger(__name__)

#: a folder for migrated empty MLflow databases, one per MLflow version, shared by the homes of a machine
SCHEMA_CACHE_ENV = "XC_MLFLOW_SCHEMA_CACHE"


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
    database = store / "mlflow.db"
    if not database.exists() and os.environ.get(SCHEMA_CACHE_ENV):
        seed_from_schema(database, Path(os.environ[SCHEMA_CACHE_ENV]))
    return f"sqlite:///{database}"


def seed_from_schema(database: Path, cache: Path) -> None:
    """Start a new sqlite store ``database`` as a copy of an empty database MLflow migrated itself.

    MLflow creates a new store by running all its schema migrations (1.5–2 s a store on this machine kind), which
    every new home pays: each seed's, each test's. With a cache folder, the migrations run once per MLflow version
    into ``cache/mlflow-<version>-schema.db`` and each new store starts as its copy. MLflow then opens it as its own:
    every table present, the schema checked against its head revision, and the Default experiment created with this
    store's artifact root (the copy holds no experiment). A copy never replaces a database another process created
    meanwhile; when the template cannot be made, MLflow initializes the store as without a cache."""
    try:
        template = _schema_template(cache)
    except Exception as exc:  # a read-only or full cache folder: the store is still made, the slow way
        log.warning("MLflow schema cache %s unusable (%s); MLflow migrates %s itself", cache, exc, database)
        return
    staged = database.with_name(f".{database.name}.{os.getpid()}.seed")
    shutil.copyfile(template, staged)
    try:
        os.link(staged, database)  # fails, harmlessly, if the database appeared since the caller looked
    except FileExistsError:
        pass
    finally:
        staged.unlink()


def _schema_template(cache: Path) -> Path:
    """The migrated empty database of the installed MLflow in ``cache``, made (atomically) when missing."""
    from importlib.metadata import version

    template = cache / f"mlflow-{version('mlflow')}-schema.db"
    if template.exists():
        return template
    import sqlalchemy
    from mlflow.store.db.utils import _initialize_tables  # what MLflow's store runs on an empty database

    cache.mkdir(parents=True, exist_ok=True)
    staged = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    engine = sqlalchemy.create_engine(f"sqlite:///{staged}")
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()
    os.replace(staged, template)
    return template


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
