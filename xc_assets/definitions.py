"""The Dagster code location: assembles the definitions split by role under ``defs/``."""

import dagster as dg

from xc_assets.defs.assets import ingest_assets
from xc_assets.defs.jobs import ingest_job
from xc_assets.defs.resources import XcHome

defs = dg.Definitions(
    assets=dg.load_assets_from_modules([ingest_assets]),
    jobs=[ingest_job],
    resources={"xc_home": XcHome()},
)
