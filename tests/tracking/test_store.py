"""The tracking URI from one place: the local sqlite store by default, an http server when configured — a
real `mlflow server` started here (own process session, 127.0.0.1, free port, stopped by its PID) — and a
clear error, never a silent fallback, when the configured server is down."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from xc_core.measure import free_port
from xc_core.tracking.store import activate, ensure_experiment, tracking_uri


def test_default_is_the_homes_sqlite_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(tmp_path) == f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"


def test_a_configured_server_that_is_down_is_an_error_not_a_fallback(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ConnectionError, match="not reachable.*make mlflow-ui.*unset MLFLOW_TRACKING_URI"):
        ensure_experiment("xc-test", tmp_path)
    assert not (tmp_path / "mlflow").exists()  # nothing went to the local store instead


@pytest.mark.slow
def test_runs_go_to_a_configured_mlflow_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow

    previous = mlflow.get_tracking_uri()
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
         f"sqlite:///{tmp_path / 'server.db'}", "--default-artifact-root", str(tmp_path / "artifacts"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)  # loopback
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("mlflow server did not answer /health within 120 s")
        uri = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        assert tracking_uri(tmp_path / "home") == uri
        experiment = ensure_experiment("xc-test", tmp_path / "home")
        with mlflow.start_run(experiment_id=experiment) as run:
            mlflow.log_metric("val/recall_at_10", 0.5)
        stored = mlflow.MlflowClient(uri).get_run(run.info.run_id)
        assert stored.data.metrics == {"val/recall_at_10": 0.5}
        assert (tmp_path / "server.db").exists() and not (tmp_path / "home" / "mlflow").exists()
    finally:
        activate(previous)  # later tests must not talk to a stopped server
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def test_one_process_serving_two_homes_keeps_each_homes_store(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    previous = mlflow.get_tracking_uri()
    try:
        ensure_experiment("xc-a", tmp_path / "a")  # points MLflow's fluent API at home a's store
        assert "MLFLOW_TRACKING_URI" not in os.environ
        assert tracking_uri(tmp_path / "b") == f"sqlite:///{tmp_path / 'b' / 'mlflow' / 'mlflow.db'}"
    finally:
        activate(previous)


def _schema(database: Path) -> tuple[list[tuple[str, list[str]]], list[tuple[str]]]:
    """Each table's and index's definition as a sorted list of its lines (MLflow's migrations write a table's
    constraints in no fixed order), and the schema's revision."""
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name").fetchall()
        revision = db.execute("SELECT version_num FROM alembic_version").fetchall()
    return [(name, sorted(line.strip().rstrip(",") for line in sql.splitlines())) for name, sql in rows], revision


def test_new_stores_start_from_one_migrated_schema_and_mlflow_uses_them_as_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With XC_MLFLOW_SCHEMA_CACHE, MLflow's migrations run once into a template and each new home's store is its
    copy: the same tables and revision as a store MLflow made itself, runs logged to each, and each home's
    experiments under its own artifact root."""
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("XC_POSTGRES_URL", raising=False)
    monkeypatch.delenv("XC_MLFLOW_SCHEMA_CACHE", raising=False)
    plain = tracking_uri(tmp_path / "plain")
    mlflow.MlflowClient(plain).search_experiments()  # MLflow migrates an empty database itself

    cache = tmp_path / "schema"
    monkeypatch.setenv("XC_MLFLOW_SCHEMA_CACHE", str(cache))
    homes = [tmp_path / "a", tmp_path / "b"]
    uris = [tracking_uri(home) for home in homes]
    (template,) = cache.glob("mlflow-*-schema.db")
    with sqlite3.connect(template) as db:  # tables only: no experiment of the machine's first home in it
        assert db.execute("SELECT count(*) FROM experiments").fetchone() == (0,)
    made = template.stat().st_mtime_ns
    assert tracking_uri(homes[0]) == uris[0] and template.stat().st_mtime_ns == made  # made once, copied per home
    assert _schema(Path(uris[0].removeprefix("sqlite:///"))) == _schema(Path(plain.removeprefix("sqlite:///")))
    for home, uri in zip(homes, uris, strict=True):
        client = mlflow.MlflowClient(uri)
        assert client.get_experiment("0").name == "Default"  # made on first open, as for MLflow's own store
        experiment = ensure_experiment("xc-check", home)
        run = client.create_run(experiment)
        client.log_metric(run.info.run_id, "p_at_1", 0.5)
        assert client.get_run(run.info.run_id).data.metrics == {"p_at_1": 0.5}
        assert client.get_experiment(experiment).artifact_location.startswith((home / "mlflow").as_uri())
    # a database that is already there is never replaced
    before = Path(uris[1].removeprefix("sqlite:///")).read_bytes()
    tracking_uri(homes[1])
    assert Path(uris[1].removeprefix("sqlite:///")).read_bytes() == before


def test_an_unusable_schema_cache_leaves_the_new_store_to_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import mlflow

    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("XC_POSTGRES_URL", raising=False)
    monkeypatch.setenv("XC_MLFLOW_SCHEMA_CACHE", str(blocked))
    with caplog.at_level(logging.WARNING, logger="xc_core.tracking.store"):
        uri = tracking_uri(tmp_path / "home")
    assert f"MLflow schema cache {blocked} unusable" in caplog.text
    assert not (tmp_path / "home" / "mlflow" / "mlflow.db").exists()  # nothing half-made
    assert mlflow.MlflowClient(uri).get_experiment("0").name == "Default"  # MLflow makes the store itself
