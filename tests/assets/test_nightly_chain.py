"""The nightly chain through Dagster, tick by tick on a log dated today: the landing sensor ingests it over its own
days, the schedule rebuilds graphs → data set → anchors, the chain sensors train and evaluate every configured
method, then the report and one gated promotion per method — a new challenger evaluated and gated."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import mlflow
import polars as pl
import pytest

from xc_assets.definitions import defs
from xc_assets.defs.resources import XcHome
from xc_assets.defs.schedules import nightly_retrain
from xc_assets.defs.sensors import landing_folder_sensor, promote_after_training, train_after_rebuild
from xc_core.logs.schema import INPUT_SCHEMA
from xc_core.logs.store import EventStore
from xc_core.simulate.pipeline import simulate_into_store
from xc_core.tracking.registry import CHALLENGER, model_name
from xc_core.tracking.store import tracking_uri


def _log_dated_today(home: Path, out: Path) -> Path:
    """The simulated world's last week of events, moved so that its last day is today."""
    events = EventStore(home).scan().collect()
    last = events.get_column("ts").max()
    assert isinstance(last, datetime)
    shift = datetime.now(UTC).date() - last.date()
    week = events.filter(pl.col("ts") > last - pl.duration(days=7))
    week.with_columns(pl.col("ts") + pl.duration(days=shift.days)).select(list(INPUT_SCHEMA)).write_parquet(out)
    return out


def _execute(request: dg.RunRequest, instance: dg.DagsterInstance, job: str | None = None) -> dg.ExecuteInProcessResult:
    result = defs.resolve_job_def(job or request.job_name or "").execute_in_process(
        instance=instance, run_config=request.run_config, tags=request.tags, partition_key=request.partition_key,
        raise_on_error=False)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return result


def _after(sensor: Any, result: dg.ExecuteInProcessResult, instance: dg.DagsterInstance) -> Any:
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name, dagster_instance=instance, dagster_run=result.dagster_run,
        dagster_event=result.get_run_success_event())
    return sensor(context)


def test_a_log_dated_today_goes_from_the_landing_folder_to_a_gated_challenger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    world, home, landing = tmp_path / "world", tmp_path / "home", tmp_path / "landing"
    landing.mkdir()
    simulate_into_store("tiny", 0, world)
    simulate_into_store("tiny", 0, home)  # the data set's world (its markets, items); its events are from 2006
    _log_dated_today(world, landing / "today.parquet")
    for name, value in {"XC_HOME": str(home), "XC_LANDING": str(landing), "XC_RETRAIN_PROFILE": "tiny",
                        "XC_RETRAIN_METHODS": "pretrained,dual_encoder"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    today = f"{datetime.now(UTC):%Y-%m-%d}"
    with dg.instance_for_test() as instance:
        landed = landing_folder_sensor(dg.build_sensor_context(instance=instance))
        assert isinstance(landed, dg.SensorResult) and landed.run_requests is not None
        (ingest,) = landed.run_requests
        assert ingest.tags["dagster/asset_partition_range_end"] == today
        _execute(ingest, instance, "ingest_job")

        with dg.build_schedule_context(instance=instance, resources={"xc_home": XcHome()},
                                       scheduled_execution_time=datetime.now(UTC)) as context:  # resources torn down
            tick = nightly_retrain(context)
        assert isinstance(tick, dg.RunRequest) and tick.tags["xc/events_last_day"] == today
        rebuild = _execute(tick, instance, "retrain_job")

        trainings = _after(train_after_rebuild, rebuild, instance)
        assert [r.partition_key for r in trainings] == ["pretrained", "dual_encoder"]
        first = _execute(trainings[0], instance, "train_eval_job")
        waiting = _after(promote_after_training, first, instance)
        assert isinstance(waiting, dg.SkipReason) and "dual_encoder" in str(waiting.skip_message)
        last = _execute(trainings[1], instance, "train_eval_job")

        chain = _after(promote_after_training, last, instance)
        assert [(r.job_name, r.tags.get("xc/method")) for r in chain] == [
            ("report_job", None), ("promotion_job", "pretrained"), ("promotion_job", "dual_encoder")]
        for request in chain:
            _execute(request, instance)
    client = mlflow.MlflowClient(tracking_uri(home))
    challenger = client.get_model_version_by_alias(model_name("synthetic"), CHALLENGER)
    assert challenger.tags["method"] == "dual_encoder", "the last method of the chain was registered"
    assert challenger.tags["promotion.decision"] in {"promoted", "rejected"}, "and gated"
    assert client.get_model_version_by_alias(model_name("synthetic"), "champion") is not None
    assert challenger.tags["promotion.decided_on"] == "validation", "gated on the promotion split (issue #64)"
    evaluated = {p.name for p in (home / "eval" / "synthetic").iterdir()}
    assert evaluated == {"pretrained-tiny", "dual_encoder-tiny", "validation"}
    assert {p.name for p in (home / "eval" / "synthetic" / "validation").iterdir()} == evaluated - {"validation"}
