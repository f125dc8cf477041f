import json
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from xc_assets.defs.assets.results_assets import PAGE, PageScope
from xc_assets.defs.constants import METHOD_STEPS, OPERATED_DATASET, prefix
from xc_assets.defs.resources import XcHome
from xc_core.evaluation.costs import TIMED_QUERIES
from xc_core.stages import commands

P = prefix(OPERATED_DATASET)  # the operated data set's asset group and key prefix

ingest_job = dg.define_asset_job(
    "ingest_job",
    # not the whole ingestion group: a landed file must not rebuild the simulator's world and day files
    selection=dg.AssetSelection.assets("raw_events", "quarantine"),
    description="Ingest raw logs for a range of days, then refresh the quarantine report.",
)

#: The operated data set's data lineage from the event store: graph tables → data set → anchor sets (with their
#: checks). Ingestion is not in it (the landing sensor and ``ingest_job`` fill the store). After a nightly rebuild
#: the chain sensors (``sensors.py``) run ``train_eval_job`` per configured method, then ``report_job`` and one
#: ``promotion_job`` per method, one at a time (tag ``xc/promotion``; dagster.yaml limits it to one run).
#: every asset of the operated family downstream of the lineage: the method steps, the gate, the stages' own assets
_NOT_LINEAGE = ("encoder", "ab_vs_control", "challenger", "ab_test", "champion", "results",
                *(c.asset.name for c in commands() if c.asset is not None))
retrain_job = dg.define_asset_job(
    "retrain_job",
    selection=dg.AssetSelection.groups(P) - dg.AssetSelection.assets(*([P, step] for step in _NOT_LINEAGE)),
    description="Rebuild graphs → data set → anchor sets (with their checks) from the events in the store.",
)

#: One method's training → index → evaluation (partition = method); the report and the gate are the next two jobs.
train_eval_job = dg.define_asset_job(
    "train_eval_job",
    selection=dg.AssetSelection.assets(*([P, step] for step in METHOD_STEPS)),
    description=f"Train, index, evaluate and A/B-test (against the control) one method (partition) of "
                f"{OPERATED_DATASET}.",
)

report_job = dg.define_asset_job(
    "report_job", selection=dg.AssetSelection.assets([P, "eval_report"]),
    description=f"The HTML report of {OPERATED_DATASET} over every evaluated method.")

#: Register one evaluated method (run config names it) → gate → champion alias; its checks come with it.
promotion_job = dg.define_asset_job(
    "promotion_job", selection=dg.AssetSelection.assets([P, "challenger"], [P, "ab_test"], [P, "champion"]),
    description=f"Register one evaluated method as challenger of {OPERATED_DATASET}, A/B-test it against the "
                "champion and gate it.")

#: Novel keywords from files (run config ``paths``) into IRENE's serving index: ``keyword_landing_sensor`` runs it
#: for each file landed in ``$XC_KEYWORD_LANDING``.
add_keywords_job = dg.define_asset_job(
    "add_keywords_job", selection=dg.AssetSelection.assets([P, "streamed_keywords"]),
    description=f"Stream novel keywords (CSV/Parquet files) into IRENE's serving index of {OPERATED_DATASET}, "
                "without retraining or rebuilding it.")


def results_job(datasets: list[str]) -> Any:  # an unresolved asset job (no public name in dagster)
    """The results page over ``datasets`` from the records in the home as they are: each data set's ``results`` asset,
    then ``results_page``. ``refresh_results_job`` (and ``xc results``) first train and evaluate whatever is missing
    or stale (``xc_assets.results``)."""
    return dg.define_asset_job(
        "results", selection=dg.AssetSelection.assets(PAGE, *([prefix(d), "results"] for d in datasets)),
        description="RESULTS.md: every method on every data set at one profile — metrics with 95% CIs, paired "
                    "differences, ablations, A/B tests and measured costs — from the evaluated method partitions "
                    "as they are (refresh_results_job and `xc results` first materialize the missing and stale "
                    "ones).")


class RefreshResultsConfig(PageScope):
    retrain: bool = Field(default=False, description="train every method anew, current or not")
    timed_queries: int = Field(default=TIMED_QUERIES, ge=1, description="test queries each serving scorer is timed on")


@dg.op(description="`xc results` from the UI: per data set the lineage with its blocking checks, then every method "
                   "partition step that is missing or stale (each its own Dagster run on this instance), then the "
                   "tables and results_page")
def refresh_results(context: dg.OpExecutionContext, config: RefreshResultsConfig, xc_home: XcHome) -> dict[str, Any]:
    from xc_assets.results import run_results

    found = run_results(xc_home.path, config.profile, config.datasets, config.methods, tuple(config.seeds),
                        out=Path(config.out) if config.out else None, retrain=config.retrain,
                        timed_queries=config.timed_queries, instance=context.instance)
    for dataset, ran in found["ran"].items():
        context.log.info(f"{dataset}: {json.dumps(ran) if ran else 'everything current, nothing ran'}")
    context.add_output_metadata({"results": dg.MetadataValue.path(found["results"]),
                                 "ran": dg.MetadataValue.json(found["ran"])})
    return found["ran"]


@dg.job(description="Train, evaluate and A/B-test whatever the results page needs that is missing or stale (code or "
                    "data changed), then write it: what `xc results` / `make results` run")
def refresh_results_job() -> None:
    refresh_results()
