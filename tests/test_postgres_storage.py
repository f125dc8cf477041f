"""Dagster and MLflow on a real PostgreSQL server (issue #66): the same tiny `xc run` on the embedded SQLite stores
and with ``XC_POSTGRES_URL`` set gives the same metrics, promotions and champion; there, the runs, the registry and
its aliases live in the server's databases, a sensor tick reads the run storage, and `xc predict` answers from the
champion the run promoted. The server is started on loopback and stopped by its PID (``tests/postgres.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import mlflow
import pytest
import yaml

from tests.postgres import PostgresServer

METHODS = "pretrained,dual_encoder"


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    server = PostgresServer().start()
    try:
        yield server.url
    finally:
        server.stop()


def _run(home: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from xc_assets.cli import main

    assert main(["run", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home), "--quiet", "--json",
                 "--methods", METHODS]) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["success"], summary
    return summary


def _outcome(summary: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the storage: each method's metrics, each gate's decision, the champion."""
    metrics = {m: {k: v for k, v in found.items() if "@" in k} for m, found in summary["methods"].items()}
    decisions = [(d["method"], d["version"], d["promoted"], d["reason"]) for d in summary["promotion"]]
    return {"metrics": metrics, "decisions": decisions,
            "champion": (summary["champion"]["method"], summary["champion"]["version"])}


def test_the_same_run_on_postgres_gives_the_same_models_and_the_registry_lives_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], postgres: str) -> None:
    from xc_assets.launch import instance_for
    from xc_core.tracking.store import tracking_uri

    for name in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI", "XC_POSTGRES_URL"):
        monkeypatch.delenv(name, raising=False)
    on_sqlite = _run(tmp_path / "sqlite", capsys)
    monkeypatch.setenv("XC_POSTGRES_URL", postgres)
    home = tmp_path / "postgres"
    on_postgres = _run(home, capsys)
    assert _outcome(on_postgres) == _outcome(on_sqlite)

    # the run history is in the server's xc_dagster database, under the runs' job names; no SQLite file was made
    instance = instance_for(home)
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    assert {r.job_name for r in instance.get_runs()} == {"synthetic_lineage", "synthetic_method", "synthetic_report",
                                                          "synthetic_promotion"}
    assert not list(home.rglob("*.db")), list(home.rglob("*.db"))
    # the registry too, in xc_mlflow: the champion alias the run moved; the artifacts stay files under the home
    uri = tracking_uri(home)
    assert uri == f"{postgres.replace('postgresql://', 'postgresql+psycopg2://')}/xc_mlflow"
    client = mlflow.MlflowClient(uri)
    champion = client.get_model_version_by_alias("xc-encoder-synthetic", "champion")
    assert (champion.tags["method"], str(champion.version)) == (on_postgres["champion"]["method"],
                                                                 str(on_postgres["champion"]["version"]))
    assert list((home / "mlflow" / "artifacts").rglob("MLmodel"))

    _sensor_tick_on(instance, home, monkeypatch)

    # `xc predict` answers from that champion, read from the server
    from xc_assets.cli import main

    assert main(["predict", "cheap running shoes", "--k", "3", "--home", str(home), "--quiet"]) == 0
    answer = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (answer["method"], str(answer["version"])) == (champion.tags["method"], str(champion.version))
    assert len(answer["labels"]) == 3


def _sensor_tick_on(instance: dg.DagsterInstance, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A nightly generation's training run on the server's instance, then the chain sensor's tick: it finds the
    run through the PostgreSQL run storage's tag filters and asks for the report and the gate; the gate runs and
    decides (the same model again: rejected)."""
    from xc_assets.definitions import defs
    from xc_assets.defs.sensors import GENERATION, promote_after_training
    from xc_assets.launch import method_run_config

    monkeypatch.setenv("XC_HOME", str(home))
    tags = {GENERATION: "nightly-1", "xc/methods": "pretrained", "xc/profile": "tiny", "xc/method": "pretrained"}
    trained = defs.resolve_job_def("train_eval_job").execute_in_process(
        instance=instance, partition_key="pretrained", tags=tags, run_config=method_run_config("synthetic", "tiny"),
        raise_on_error=False)
    assert trained.success
    context = dg.build_run_status_sensor_context(
        sensor_name=promote_after_training.name, dagster_instance=instance, dagster_run=trained.dagster_run,
        dagster_event=trained.get_run_success_event())
    requests = promote_after_training(context)
    assert isinstance(requests, list), requests
    assert [(r.job_name, r.tags.get("xc/method")) for r in requests] == [("report_job", None),
                                                                        ("promotion_job", "pretrained")]
    promotion = requests[1]
    gate = defs.resolve_job_def("promotion_job").execute_in_process(
        instance=instance, run_config=promotion.run_config, tags=promotion.tags, raise_on_error=False)
    assert gate.success
    [check] = gate.get_asset_check_evaluations()
    assert not check.passed and "does not beat" in (check.description or "")


def test_the_postgres_instance_config_differs_from_the_default_only_in_its_storage() -> None:
    """``xc_assets/deploy/postgres/dagster.yaml`` (what `make` uses with ``XC_POSTGRES_URL``) is the repository's
    dagster.yaml with PostgreSQL storage: the run queue, its limits and the log folders stay the same."""
    root = Path(__file__).resolve().parents[1]
    default = yaml.safe_load((root / "dagster.yaml").read_text())
    variant = yaml.safe_load((root / "xc_assets" / "deploy" / "postgres" / "dagster.yaml").read_text())
    assert variant.pop("storage") == {"postgres": {"postgres_url": {"env": "XC_DAGSTER_POSTGRES_URL"}}}
    assert default.pop("storage") == {"sqlite": {"base_dir": {"env": "XC_DAGSTER_STATE"}}}
    assert variant == default


def test_a_server_url_with_a_database_is_refused_with_the_form_to_give(monkeypatch: pytest.MonkeyPatch) -> None:
    from xc_core.storage import postgres_server

    monkeypatch.setenv("XC_POSTGRES_URL", "postgresql://xc@127.0.0.1:5432/mydb")
    with pytest.raises(ValueError, match=r"postgresql://USER\[:PASSWORD\]@HOST:PORT"):
        postgres_server()


def test_a_server_that_does_not_answer_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from xc_core.storage import database_url

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("XC_POSTGRES_URL", f"postgresql://xc:secret@127.0.0.1:{port}")
    with pytest.raises(ConnectionError, match=rf"127\.0\.0\.1:{port} is not reachable.*unset XC_POSTGRES_URL") as err:
        database_url("mlflow")
    assert "secret" not in str(err.value)
