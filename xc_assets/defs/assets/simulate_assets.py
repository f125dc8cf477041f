"""The simulator in Dagster: the ``world`` (ground truth, persisted) and ``simulated_events`` (daily
partitions) that ``raw_events`` ingests through the same path as real logs."""

from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from xc_assets.defs.assets.ingest_assets import png_markdown
from xc_assets.defs.constants import INGEST_GROUP
from xc_assets.defs.partitions import daily_partitions
from xc_assets.defs.resources import XcHome
from xc_core.simulate.config import Scale

if TYPE_CHECKING:  # the type of a metadata value; dagster exports it only from its internals
    from dagster._core.definitions.metadata import RawMetadataValue


class WorldConfig(dg.Config):
    scale: Scale = Field(default="demo", description="simulator scale")
    seed: int = Field(default=0, description="same seed, byte-identical world and events")


@dg.asset(group_name=INGEST_GROUP, kinds={"parquet"},
          description="The simulated sponsored-search world: intents, keywords, queries and their ground truth "
                      "(relevance, click model), saved so evaluation and A/B tests read it without regenerating")
def world(context: dg.AssetExecutionContext, config: WorldConfig, xc_home: XcHome) -> dg.MaterializeResult:
    from xc_core.simulate.pipeline import build_world, simulation_dir

    built = build_world(config.scale, config.seed, xc_home.path)
    context.log.info(f"world {config.scale}-seed{config.seed}: {len(built.intents)} intents, "
                     f"{len(built.keywords)} keywords, {len(built.queries)} queries")
    return dg.MaterializeResult(metadata={
        "scale": config.scale, "seed": config.seed, "intents": len(built.intents),
        "keywords": len(built.keywords), "queries": len(built.queries), "days": built.config.days,
        "start": built.config.start.isoformat(), "novel_days": built.config.novel_days,
        "path": dg.MetadataValue.path(str(simulation_dir(xc_home.path, config.scale, config.seed) / "world")),
    })


@dg.asset(deps=[world], partitions_def=daily_partitions, backfill_policy=dg.BackfillPolicy.single_run(),
          group_name=INGEST_GROUP, kinds={"parquet"},
          description="Simulated query/impression/click logs of the partition's days, one canonical file per day")
def simulated_events(context: dg.AssetExecutionContext, xc_home: XcHome) -> dg.MaterializeResult:
    from xc_core.simulate import calibration_report
    from xc_core.simulate.pipeline import days_in_window, load_current_world, simulated_day_files

    sim = load_current_world(xc_home.path)
    window = context.partition_time_window
    days = days_in_window(sim.config, window.start, window.end)
    files = simulated_day_files(sim, xc_home.path, days)
    context.log.info(f"{len(files)} simulated day files for {window.start:%Y-%m-%d}..{window.end:%Y-%m-%d}")
    metadata: dict[str, RawMetadataValue] = {"days": len(files),
                                             "files": dg.MetadataValue.json([str(f) for f in files])}
    if files:
        report = calibration_report(sim, files, files[0].parent.parent / "calibration")
        figures = report["figures"]
        metadata["calibration"] = dg.MetadataValue.md(report["markdown"])
        metadata.update({f"calibration/{k}": v for k, v in figures.items() if isinstance(v, int | float)})
        pngs = [p for p in report["files"] if str(p).endswith(".png")]
        if pngs:
            metadata["plots"] = dg.MetadataValue.md("\n\n".join(png_markdown(p) for p in map(_path, pngs)))
    return dg.MaterializeResult(metadata=metadata)


def _path(p: object):
    from pathlib import Path

    return Path(str(p))
