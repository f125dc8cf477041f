"""Schedules start stopped; the landing-folder sensor requests each file exactly once (name + content hash)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from xc_assets.definitions import defs
from xc_assets.defs.sensors import file_run_key, landing_folder_sensor


def test_schedules_and_sensors_are_loaded_and_schedules_default_to_stopped() -> None:
    repo = defs.get_repository_def()
    schedule = repo.get_schedule_def("nightly_retrain")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert {s.name for s in repo.sensor_defs} == {"landing_folder_sensor", "record_run_failures"}


def test_landing_sensor_requests_each_file_once_by_name_and_content(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XC_LANDING", str(tmp_path))
    (tmp_path / "day1.jsonl").write_text('{"ts": "2006-03-01 10:00:00"}\n')
    (tmp_path / "notes.md").write_text("not a log")
    with dg.instance_for_test() as instance:
        first = landing_folder_sensor(dg.build_sensor_context(instance=instance))
        assert isinstance(first, dg.SensorResult) and first.run_requests is not None  # what the sensor returns
        keys = [r.run_key for r in first.run_requests]
        assert keys == [file_run_key(tmp_path / "day1.jsonl")]
        assert first.run_requests[0].run_config["ops"]["raw_events"]["config"]["source"] == "events"
        (tmp_path / "copy").mkdir()
        (tmp_path / "copy" / "day1.jsonl").write_text('{"ts": "2006-03-01 10:00:00"}\n')
        assert file_run_key(tmp_path / "copy" / "day1.jsonl") == keys[0]  # re-delivered: same key, no new run
        (tmp_path / "day1.jsonl").write_text('{"ts": "2006-03-02 10:00:00"}\n')
        assert file_run_key(tmp_path / "day1.jsonl") != keys[0]  # new content: a new run
