"""Schedules start stopped; the landing-folder sensor requests each file exactly once (name + content hash) over
the days its events fall on; an ingestion that stores nothing fails and says why; the nightly schedule runs once
per new state of the event store, on a log dated today."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from xc_assets.definitions import defs
from xc_assets.defs.assets.ingest_assets import quarantine, raw_events
from xc_assets.defs.resources import XcHome
from xc_assets.defs.schedules import nightly_retrain
from xc_assets.defs.sensors import file_run_key, landing_folder_sensor


def _event(ts: str, user: str = "u1") -> str:
    return json.dumps({"ts": ts, "user_id": user, "market": "MC-1", "query_text": "running shoes", "item_id": "k1",
                       "item_text": "running shoes sale", "position": 1, "impressed": True, "clicked": True})


def test_schedules_and_sensors_are_loaded_and_schedules_default_to_stopped() -> None:
    repo = defs.get_repository_def()
    schedule = repo.get_schedule_def("nightly_retrain")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert {s.name for s in repo.sensor_defs} == {"landing_folder_sensor", "keyword_landing_sensor",
                                                  "record_run_failures", "train_after_rebuild",
                                                  "promote_after_training"}
    assert repo.get_sensor_def("keyword_landing_sensor").default_status == dg.DefaultSensorStatus.STOPPED


def test_landing_sensor_requests_each_file_once_by_name_and_content(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XC_LANDING", str(tmp_path))
    (tmp_path / "day1.jsonl").write_text(_event("2006-03-01 10:00:00") + "\n")
    (tmp_path / "notes.md").write_text("not a log")
    with dg.instance_for_test() as instance:
        first = landing_folder_sensor(dg.build_sensor_context(instance=instance))
        assert isinstance(first, dg.SensorResult) and first.run_requests is not None  # what the sensor returns
        keys = [r.run_key for r in first.run_requests]
        assert keys == [file_run_key(tmp_path / "day1.jsonl")]
        assert first.run_requests[0].run_config["ops"]["raw_events"]["config"]["source"] == "events"
        (tmp_path / "copy").mkdir()
        (tmp_path / "copy" / "day1.jsonl").write_text(_event("2006-03-01 10:00:00") + "\n")
        assert file_run_key(tmp_path / "copy" / "day1.jsonl") == keys[0]  # re-delivered: same key, no new run
        (tmp_path / "day1.jsonl").write_text(_event("2006-03-02 10:00:00") + "\n")
        assert file_run_key(tmp_path / "day1.jsonl") != keys[0]  # new content: a new run


def test_landing_sensor_runs_cover_the_days_in_the_file_and_skip_files_with_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XC_LANDING", str(tmp_path))
    today = datetime.now(UTC)
    yesterday = today - timedelta(days=1)
    (tmp_path / "recent.jsonl").write_text(f"{_event(f'{yesterday:%Y-%m-%d} 23:00:00')}\n"
                                          f"{_event(f'{today:%Y-%m-%d} 01:00:00', 'u2')}\n")
    (tmp_path / "old.jsonl").write_text(_event("1999-01-01 10:00:00") + "\n")  # before the first partition
    with dg.instance_for_test() as instance:
        result = landing_folder_sensor(dg.build_sensor_context(instance=instance))
        assert isinstance(result, dg.SensorResult) and result.run_requests is not None
        (request,) = result.run_requests
        assert request.tags["xc/landing_file"] == "recent.jsonl"
        assert (request.tags["dagster/asset_partition_range_start"],
                request.tags["dagster/asset_partition_range_end"]) == (f"{yesterday:%Y-%m-%d}", f"{today:%Y-%m-%d}")
        again = landing_folder_sensor(dg.build_sensor_context(instance=instance, cursor=result.cursor))
        assert isinstance(again, dg.SensorResult) and not again.run_requests, "a file is read once"


def test_landing_sensor_reads_files_with_the_homes_markets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home that accepts only zh-CN requests no run for a file of MC-1 events (it would store nothing)."""
    home, landing = tmp_path / "home", tmp_path / "landing"
    home.mkdir()
    landing.mkdir()
    (home / "xc.yaml").write_text("ingest:\n  markets: [zh-CN]\n")
    monkeypatch.setenv("XC_HOME", str(home))
    monkeypatch.setenv("XC_LANDING", str(landing))
    (landing / "mc1.jsonl").write_text(_event("2006-03-01 10:00:00") + "\n")
    with dg.instance_for_test() as instance:
        result = landing_folder_sensor(dg.build_sensor_context(instance=instance))
        assert isinstance(result, dg.SensorResult) and not result.run_requests
        assert "mc1.jsonl: no valid event" in str(result.skip_reason)


def _ingest(home: Path, path: Path, first: str, last: str, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    days = {"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last}
    return dg.materialize([raw_events, quarantine], instance=instance, raise_on_error=False,
                          resources={"xc_home": XcHome(home=str(home))}, tags=days,
                          run_config={"ops": {"raw_events": {"config": {"source": "events", "paths": [str(path)]}}}})


def test_an_ingestion_that_stores_nothing_fails_and_names_the_files_dates(tmp_path: Path) -> None:
    log = tmp_path / "2024.jsonl"
    log.write_text(_event("2024-05-01 10:00:00") + "\n")
    with dg.instance_for_test() as instance:
        result = _ingest(tmp_path / "home", log, "2006-03-01", "2006-03-02", instance)
    assert not result.success
    (failure,) = [e for e in result.get_step_failure_events() if e.step_key == "raw_events"]
    assert failure.step_failure_data.user_failure_data is not None, "a dg.Failure with its own description"
    message = str(failure.step_failure_data.user_failure_data.description)
    assert "stored no events" in message and "2024-05-01" in message and "2006-03-01 .. 2006-03-02" in message


def test_the_nightly_schedule_runs_once_per_new_state_of_the_event_store(tmp_path: Path) -> None:
    home = XcHome(home=str(tmp_path / "home"))
    with dg.instance_for_test() as instance:
        def tick() -> dg.RunRequest | dg.SkipReason:
            # as a context manager: its resources are torn down (left open, a later test's Definitions
            # reached this test's disposed instance)
            with dg.build_schedule_context(instance=instance, resources={"xc_home": home},
                                           scheduled_execution_time=datetime.now(UTC)) as context:
                return nightly_retrain(context)  # type: ignore[return-value]  # the decorated function's own result

        assert isinstance(tick(), dg.SkipReason), "an empty store: nothing to rebuild, and it says why"
        today = f"{datetime.now(UTC):%Y-%m-%d}"
        log = tmp_path / "today.jsonl"
        log.write_text(_event(f"{today} 09:00:00") + "\n")
        assert _ingest(home.path, log, today, today, instance).success
        first = tick()
        assert isinstance(first, dg.RunRequest) and first.tags["xc/events_last_day"] == today
        same = tick()
        assert isinstance(same, dg.RunRequest) and same.run_key == first.run_key, \
            "no new events: the same run key, so Dagster launches nothing new"
        log.write_text(_event(f"{today} 10:00:00", "u3") + "\n")
        assert _ingest(home.path, log, today, today, instance).success
        second = tick()
        assert isinstance(second, dg.RunRequest) and second.run_key != first.run_key
