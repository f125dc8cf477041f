"""The PostgreSQL storage's configuration (issue #66): the instance config variant, the server URL's form, a server
that does not answer. The whole run on a real server is in ``tests/test_run.py`` (it shares that module's SQLite
run to compare with)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml


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
    from xc_core.measure import free_port
    from xc_core.storage import database_url

    port = free_port()
    monkeypatch.setenv("XC_POSTGRES_URL", f"postgresql://xc:secret@127.0.0.1:{port}")
    with pytest.raises(ConnectionError, match=rf"127\.0\.0\.1:{port} is not reachable.*unset XC_POSTGRES_URL") as err:
        database_url("mlflow")
    assert "secret" not in str(err.value)
