from typing import Any

import dagster as dg

from xc_assets.defs.assets.results_assets import PAGE
from xc_assets.defs.constants import OPERATED_DATASET, prefix
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
    selection=dg.AssetSelection.assets([P, "encoder"], [P, "label_index"], [P, "offline_eval"], [P, "ab_vs_control"]),
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
    """The results page over ``datasets`` from the records in the home: each data set's ``results`` asset, then
    ``results_page``. ``xc results`` first trains and evaluates whatever is missing or stale (``xc_assets.results``)."""
    return dg.define_asset_job(
        "results", selection=dg.AssetSelection.assets(PAGE, *([prefix(d), "results"] for d in datasets)),
        description="RESULTS.md: every method on every data set at one profile — metrics with 95% CIs, paired "
                    "differences, ablations, A/B tests and measured costs — from the evaluated method partitions "
                    "(`xc results` materializes the missing and stale ones first).")
