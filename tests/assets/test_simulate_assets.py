"""The simulator feeds raw_events in Dagster: world → simulated_events → raw_events on a real instance."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from xc_assets.defs.assets.ingest_assets import quarantine, raw_events
from xc_assets.defs.assets.simulate_assets import simulated_events, world
from xc_assets.defs.resources import XcHome
from xc_core.logs.store import EventStore


def test_world_and_simulated_days_are_ingested_with_zero_rejects_and_calibration(tmp_path: Path) -> None:
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [world, simulated_events, raw_events, quarantine], instance=instance,
            resources={"xc_home": XcHome(home=str(tmp_path))},
            run_config={"ops": {"world": {"config": {"scale": "tiny", "seed": 3}}}},
            tags={"dagster/asset_partition_range_start": "2006-03-01",
                  "dagster/asset_partition_range_end": "2006-03-03"},
        )
    assert result.success
    meta = {e.step_materialization_data.materialization.asset_key.to_user_string():
            e.step_materialization_data.materialization.metadata for e in result.get_asset_materialization_events()}
    assert meta["simulated_events"]["days"].value == 3
    assert "calibration" in meta["simulated_events"] and "plots" in meta["simulated_events"]
    assert meta["raw_events"]["rows_rejected"].value == 0
    assert meta["raw_events"]["rows_accepted"].value == meta["raw_events"]["events_stored"].value > 0
    days = [d.isoformat() for d in EventStore(tmp_path).days()]
    assert days == ["2006-03-01", "2006-03-02", "2006-03-03"]
