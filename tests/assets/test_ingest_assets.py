"""The Dagster code location loads, and both ingestion assets materialize on a real Dagster instance."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from xc_assets.definitions import defs
from xc_assets.defs.assets.ingest_assets import quarantine, raw_events
from xc_assets.defs.resources import XcHome
from xc_core.logs.store import EventStore


def test_definitions_load_with_ingestion_assets_and_job() -> None:
    repo = defs.get_repository_def()
    keys = {key.to_user_string() for key in repo.asset_graph.get_all_asset_keys()}
    assert {"raw_events", "quarantine"} <= keys
    assert repo.get_job("ingest_job") is not None


def test_materializing_one_partition_stores_that_day_and_reports_rejects(aol_slice: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [raw_events, quarantine],
            instance=instance,
            partition_key="2006-03-15",
            resources={"xc_home": XcHome(home=str(home))},
            run_config={"ops": {"raw_events": {"config": {"source": "aol", "paths": [str(aol_slice)]}}}},
        )
        assert result.success
        meta = result.asset_materializations_for_node("raw_events")[0].metadata
        read, accepted, rejected, outside = (meta[k].value for k in
                                             ("rows_read", "rows_accepted", "rows_rejected", "rows_outside_partitions"))
        assert accepted + rejected + outside == read > 0
        assert "reject_sample" in meta and "rejects_by_reason" in meta
        days = EventStore(home).days()
        assert [d.isoformat() for d in days] == ["2006-03-15"]
        assert meta["events_stored"].value == EventStore(home).scan().collect().height > 0
        assert instance.get_latest_materialization_event(dg.AssetKey("quarantine")) is not None


def test_run_config_markets_override_the_home_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "xc.yaml").write_text("ingest:\n  markets: [en-US]\n")
    path = tmp_path / "zh.jsonl"
    path.write_text("".join(json.dumps({"ts": f"2006-03-15 10:{i:02d}:00", "user_id": f"u{i}", "market": "zh-CN",
                                        "query_text": f"query {i}"}) + "\n" for i in range(10)))
    config = {"source": "events", "paths": [str(path)]}
    with dg.instance_for_test() as instance:
        refused = dg.materialize([raw_events], instance=instance, partition_key="2006-03-15", raise_on_error=False,
                                 resources={"xc_home": XcHome(home=str(home))},
                                 run_config={"ops": {"raw_events": {"config": config}}})
        assert not refused.success  # the home file's markets apply: every row is rejected, and the run says so
        failure = next(e for e in refused.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
        assert "unknown_market 10" in str(failure.event_specific_data) and "--markets zh-CN" in str(
            failure.event_specific_data)
        accepted = dg.materialize([raw_events], instance=instance, partition_key="2006-03-15",
                                  resources={"xc_home": XcHome(home=str(home))},
                                  run_config={"ops": {"raw_events": {"config": {**config, "markets": ["zh-CN"]}}}})
        assert accepted.success
        assert accepted.asset_materializations_for_node("raw_events")[0].metadata["events_stored"].value == 10
