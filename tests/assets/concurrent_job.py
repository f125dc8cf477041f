"""A job of raw_events → synthetic graph tables (+ their blocking GX check) on the code location's step
executor (Dagster's multiprocess executor, forking each step from a preloaded server), and a ``__main__`` that
runs one partition range of it on a persistent instance.

The concurrency test starts two of these processes at once on the same home and instance:

    python -m tests.assets.concurrent_job HOME FILE START END
"""

from __future__ import annotations

import sys

import dagster as dg

from xc_assets.definitions import defs
from xc_assets.defs.executor import step_executor

JOB = "ingest_and_graphs_multiprocess"


def ingest_and_graphs_job() -> dg.JobDefinition:
    """Module-level so ``dg.reconstructable`` can rebuild it in every step subprocess."""
    job = dg.define_asset_job(
        JOB, selection=dg.AssetSelection.assets("raw_events", ["synthetic", "click_graph"],
                                               ["synthetic", "cosession_queries"], ["synthetic", "coclick_items"]),
        executor_def=step_executor(max_concurrent=2))
    return dg.Definitions(assets=defs.assets, asset_checks=defs.asset_checks, jobs=[job],
                          resources=defs.resources).resolve_job_def(JOB)


def run_range(home: str, path: str, start: str, end: str) -> bool:
    instance = dg.DagsterInstance.get()  # DAGSTER_HOME: one persistent sqlite instance shared by both processes
    with dg.execute_job(
        dg.reconstructable(ingest_and_graphs_job), instance=instance,
        run_config={"ops": {"raw_events": {"config": {"source": "events", "paths": [path]}}},
                    "resources": {"xc_home": {"config": {"home": home}}}},
        tags={"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end},
    ) as result:
        return result.success


if __name__ == "__main__":
    sys.exit(0 if run_range(*sys.argv[1:5]) else 1)
