"""Where the run history and the model registry live: embedded SQLite files under the home (the default), or one
PostgreSQL server for a team's deployment, chosen by one variable, ``XC_POSTGRES_URL``.

With ``XC_POSTGRES_URL=postgresql://USER[:PASSWORD]@HOST:PORT`` set, Dagster's run, event-log and schedule storage
go to the database ``xc_dagster`` on that server (``deploy/postgres/dagster.yaml``, or the instance ``xc`` builds
itself, ``xc_assets.launch.instance_for``) and MLflow's tracking store and registry to ``xc_mlflow``; both are
created on first use. Artifacts (models, plots) stay files under the home's ``mlflow/artifacts``, or wherever
``XC_ARTIFACT_ROOT`` points (a shared folder or an object store URI the MLflow client can write).
``MLFLOW_TRACKING_URI``, when set, still wins for MLflow (:mod:`xc_core.tracking.store`).
"""

from __future__ import annotations

import os
import re
from functools import cache

POSTGRES_ENV = "XC_POSTGRES_URL"
ARTIFACT_ROOT_ENV = "XC_ARTIFACT_ROOT"
#: the database each service keeps on the server (two, since both manage their schema with an ``alembic_version``
#: table of their own)
DATABASES = {"dagster": "xc_dagster", "mlflow": "xc_mlflow"}

_SERVER = re.compile(r"postgres(?:ql)?://[^/?#]+/?")


def postgres_server() -> str | None:
    """The server ``XC_POSTGRES_URL`` names, without a database (None: the embedded SQLite stores)."""
    url = os.environ.get(POSTGRES_ENV, "").strip()
    if not url:
        return None
    if not _SERVER.fullmatch(url):
        raise ValueError(f"{POSTGRES_ENV}={url!r}: give the server only, postgresql://USER[:PASSWORD]@HOST:PORT "
                         f"(xc keeps its databases {', '.join(DATABASES.values())} there)")
    return url.rstrip("/")


def database_url(service: str) -> str:
    """``service``'s database on the configured server (``dagster`` or ``mlflow``), created when missing, as a
    SQLAlchemy URL with the driver xc installs (``postgresql+psycopg2://…``).

    Raises:
        ValueError: no server is configured, or the service is unknown.
        ConnectionError: the server does not answer (its URL and the fix in the message).
    """
    server = postgres_server()
    if server is None:
        raise ValueError(f"{POSTGRES_ENV} is not set: the stores are the home's SQLite files")
    if service not in DATABASES:
        raise ValueError(f"unknown service {service!r}: one of {', '.join(DATABASES)}")
    _ensure_databases(server)
    # the driver named: SQLAlchemy (under both Dagster and MLflow) would take psycopg 3 for a bare postgresql://
    return f"postgresql+psycopg2://{server.split('://', 1)[1]}/{DATABASES[service]}"


@cache
def _ensure_databases(server: str) -> None:
    """Create xc's databases on ``server`` when missing (once per process and server)."""
    try:
        import psycopg2
    except ImportError as err:
        raise ImportError(f"{POSTGRES_ENV} is set but the PostgreSQL drivers are not installed: "
                          "pip install -e '.[postgres]'") from err
    try:
        connection = psycopg2.connect(f"{server}/postgres", connect_timeout=10)
    except psycopg2.OperationalError as err:
        why = " ".join(str(err).split())  # libpq's message spans lines
        raise ConnectionError(f"PostgreSQL at {_redacted(server)} is not reachable ({why}); start it, or unset "
                              f"{POSTGRES_ENV} to use the home's SQLite stores") from err
    connection.autocommit = True  # CREATE DATABASE refuses to run inside a transaction
    try:
        with connection.cursor() as cursor:
            for name in DATABASES.values():
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cursor.fetchone() is None:
                    cursor.execute(f'CREATE DATABASE "{name}"')
    finally:
        connection.close()


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def main() -> int:
    """``python -m xc_core.storage``: create xc's databases on the configured server and print their URLs."""
    if postgres_server() is None:
        print(f"{POSTGRES_ENV} is not set: Dagster and MLflow keep SQLite files under the home")
        return 0
    for service in DATABASES:
        print(f"{service}: {_redacted(database_url(service))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
