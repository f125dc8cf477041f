"""The Dagster code location: assembles the definitions split by role under ``defs/``."""

import dagster as dg

from xc_assets.defs.assets import (eval_assets, graph_assets, ingest_assets, model_assets, registry_assets,
                                   simulate_assets)
from xc_assets.defs.jobs import ingest_job
from xc_assets.defs.resources import XcHome

defs = dg.Definitions(
    assets=[*dg.load_assets_from_modules([simulate_assets, ingest_assets]), *graph_assets.graph_table_assets,
            *graph_assets.dataset_assets, *graph_assets.anchor_assets, *model_assets.encoder_assets,
            *eval_assets.index_assets, *eval_assets.eval_assets, *eval_assets.report_assets,
            *registry_assets.challenger_assets, *registry_assets.champion_assets],
    asset_checks=[*graph_assets.graph_checks, *registry_assets.promotion_checks],
    jobs=[ingest_job],
    resources={"xc_home": XcHome()},
)
