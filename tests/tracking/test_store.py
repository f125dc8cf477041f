"""The tracking URI from one place: the local sqlite store by default, an http server when configured — a
real `mlflow server` started here (own process session, 127.0.0.1, free port, stopped by its PID) — and a
clear error, never a silent fallback, when the configured server is down."""

from __future__ import annotations

import os
import signal
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
