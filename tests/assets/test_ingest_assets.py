"""The Dagster code location loads, and both ingestion assets materialize on a real Dagster instance."""

from __future__ import annotations

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
