"""Scheduled retraining. Schedules default to STOPPED: turn them on in the UI (Automation tab) or with
``dagster schedule start nightly_retrain -w workspace.yaml``. The hour comes from ``XC_RETRAIN_HOUR`` (UTC)."""

import os

import dagster as dg

from xc_assets.defs.jobs import retrain_job

#: Each night, the newest daily partition: new log partition → graph tables → data set → anchor sets. It
#: launches no training: ``train_eval_job`` runs (one per method partition) and ``xc promote`` do that.
nightly_retrain = dg.build_schedule_from_partitioned_job(
    retrain_job,
    name="nightly_retrain",
    hour_of_day=int(os.environ.get("XC_RETRAIN_HOUR", "2")),
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Nightly rebuild of the default data set's graphs, data set and anchor sets (stopped by default)",
)
