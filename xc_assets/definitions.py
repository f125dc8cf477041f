"""The Dagster code location: assembles the definitions split by role under ``defs/``."""

import dagster as dg

from xc_assets.defs.assets import (
    abtest_assets,
    eval_assets,
    graph_assets,
    ingest_assets,
    keyword_assets,
    model_assets,
    registry_assets,
    simulate_assets,
)
from xc_assets.defs.jobs import (
    add_keywords_job,
    ingest_job,
    promotion_job,
    report_job,
    retrain_job,
    train_eval_job,
)
from xc_assets.defs.resources import XcHome
from xc_assets.defs.schedules import nightly_retrain
from xc_assets.defs.sensors import (
    keyword_landing_sensor,
    landing_folder_sensor,
    promote_after_training,
    record_run_failures,
    train_after_rebuild,
)

defs = dg.Definitions(
    assets=[*dg.load_assets_from_modules([simulate_assets, ingest_assets]), *graph_assets.graph_table_assets,
            *graph_assets.dataset_assets, *graph_assets.anchor_assets, *model_assets.encoder_assets,
            *eval_assets.index_assets, *eval_assets.eval_assets, *abtest_assets.ab_vs_control_assets,
            *eval_assets.report_assets, *registry_assets.challenger_assets, *abtest_assets.ab_test_assets,
            *registry_assets.champion_assets, *keyword_assets.streamed_keyword_assets],
    asset_checks=[*graph_assets.graph_checks, *registry_assets.promotion_checks],
    jobs=[ingest_job, retrain_job, train_eval_job, report_job, promotion_job, add_keywords_job],
    schedules=[nightly_retrain],
    sensors=[landing_folder_sensor, keyword_landing_sensor, record_run_failures, train_after_rebuild,
             promote_after_training],
    resources={"xc_home": XcHome()},
)
