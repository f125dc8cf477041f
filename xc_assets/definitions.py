"""The Dagster code location: assembles the definitions split by role under ``defs/``."""

import dagster as dg

from xc_assets.defs.assets import ingest_assets, simulate_assets
from xc_assets.defs.assets.results_assets import results_page
from xc_assets.defs.executor import step_executor
from xc_assets.defs.family import served_families
from xc_assets.defs.jobs import (
    add_keywords_job,
    ingest_job,
    promotion_job,
    refresh_results_job,
    report_job,
    results_job,
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
from xc_core.stages.results import DEFAULT_DATASETS

#: every data set of the served home ($XC_HOME: built in, or defined with `xc dataset --from-events`) as its own group
FAMILIES = served_families()
#: the results page over the served data sets the results job covers by default
RESULTS_DATASETS = [f.name for f in FAMILIES if f.name in DEFAULT_DATASETS]

defs = dg.Definitions(
    assets=[*dg.load_assets_from_modules([simulate_assets, ingest_assets]), *(a for f in FAMILIES for a in f.assets),
            results_page(tuple(RESULTS_DATASETS))],
    asset_checks=[c for f in FAMILIES for c in f.checks],
    jobs=[ingest_job, retrain_job, train_eval_job, report_job, promotion_job, add_keywords_job,
          results_job(RESULTS_DATASETS), refresh_results_job],
    schedules=[nightly_retrain],
    sensors=[landing_folder_sensor, keyword_landing_sensor, record_run_failures, train_after_rebuild,
             promote_after_training],
    resources={"xc_home": XcHome()},
    executor=step_executor(),  # steps forked from a server holding the code location (defs/executor.py)
)
