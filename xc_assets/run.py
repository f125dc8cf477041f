"""``xc run``: materialize the asset graph in-process, on the Dagster instance of ``$DAGSTER_HOME``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg

from xc_assets.defs.partitions import daily_partitions
from xc_assets.definitions import defs
from xc_assets.defs.resources import XcHome


def _instance(home: Path) -> dg.DagsterInstance:
    """The configured instance when ``DAGSTER_HOME`` is set (runs show in the UI), else one under home."""
    if os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    return dg.DagsterInstance.local_temp(tempdir=str(home / "dagster"))


def run_pipeline(dataset: str, profile: str, home: Path) -> dict[str, object]:
    """Materialize every asset for the whole partition range in one run; return a summary."""
    started = time.perf_counter()
    keys = daily_partitions.get_partition_keys()
    assets = list(defs.assets or [])
    result = dg.materialize(
        assets,
        instance=_instance(home),
        resources={"xc_home": XcHome(home=str(home))},
        tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1],
              "xc/dataset": dataset, "xc/profile": profile},
    )
    summary: dict[str, object] = {"dataset": dataset, "profile": profile, "run_id": result.run_id,
                                  "success": result.success}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        name = materialization.asset_key.to_user_string()
        meta = {k: v.value for k, v in materialization.metadata.items()
                if k in ("rows_read", "rows_accepted", "rows_rejected", "events_stored", "rows")}
        summary[name] = meta
    summary["home"] = str(home)
    summary["seconds"] = round(time.perf_counter() - started, 2)
    return summary
