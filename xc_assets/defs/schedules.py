"""Scheduled retraining. Schedules default to STOPPED: turn them on in the UI (Automation tab) or with
``dagster schedule start nightly_retrain -w workspace.yaml``. The hour comes from ``XC_RETRAIN_HOUR`` (UTC)."""

import os

import dagster as dg

from xc_assets.defs.constants import OPERATED_DATASET, prefix
from xc_assets.defs.jobs import retrain_job
from xc_assets.defs.resources import XcHome
from xc_assets.defs.sensors import retrain_profile

RETRAIN_HOUR = int(os.environ.get("XC_RETRAIN_HOUR", "2"))


@dg.schedule(job=retrain_job, cron_schedule=f"0 {RETRAIN_HOUR} * * *", execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="Each night, when the event store holds events the last rebuild did not see: graph tables → "
                         "data set → anchor sets over the newest data (stopped by default)")
def nightly_retrain(context: dg.ScheduleEvaluationContext, xc_home: XcHome) -> dg.RunRequest | dg.SkipReason:
    """One run per new state of the event store: the run key is the store's generation (bumped by every
    ingestion that stores events), so a night without new events launches nothing and says why."""
    store = xc_home.event_store()
    days = store.days()
    if not days:
        return dg.SkipReason(f"the event store under {xc_home.path} holds no events yet (ingest a log first: "
                             "the landing sensor or ingest_job)")
    generation = store.generation()
    # the anchor sets (their pruning encoder and graph-worth check) at the profile the retrain sensor trains with,
    # as `xc run` builds them at its own profile: one profile per chain
    config = {"ops": {f"{prefix(OPERATED_DATASET)}_anchor_sets": {"config": {"profile": retrain_profile()}}}}
    return dg.RunRequest(run_key=f"events-generation-{generation}", run_config=config,
                         tags={"xc/trigger": "nightly_retrain", "xc/events_first_day": days[0].isoformat(),
                               "xc/events_last_day": days[-1].isoformat(), "xc/events_generation": str(generation)})
