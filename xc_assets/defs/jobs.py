from pathlib import Path

import dagster as dg
from pydantic import Field

from xc_assets.defs.assets.graph_assets import prefix
from xc_assets.defs.constants import OPERATED_DATASET
from xc_assets.defs.resources import XcHome
from xc_core.stages.results import DEFAULT_DATASETS, RESULT_METHODS

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
retrain_job = dg.define_asset_job(
    "retrain_job",
    selection=dg.AssetSelection.groups(P) - dg.AssetSelection.assets(
        *([P, step] for step in ("encoder", "label_index", "offline_eval", "ab_vs_control", "eval_report", "challenger",
                                 "ab_test", "champion", "streamed_keywords"))),
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


class ResultsConfig(dg.Config):
    """What the ``results`` job runs (``xc results`` takes the same options)."""

    profile: str = Field(default="demo", description="one profile for every method and data set: tiny, demo, cpu, "
                                                     "full")
    datasets: list[str] = Field(default_factory=lambda: list(DEFAULT_DATASETS),
                                description="data sets of the home (built in or defined), each trained, "
                                            "evaluated and tabulated")
    methods: list[str] = Field(default_factory=lambda: list(RESULT_METHODS),
                               description="registered methods, in training order (a -clf after its base, irene "
                                           "after the encoders)")
    seeds: list[int] = Field(default_factory=lambda: [0], description="training seeds: the tables are the "
                             "first's, more add a mean ± sd table")
    out: str = Field(default="", description="folder for RESULTS.md and results.json (empty: docs/ of the "
                                             "working directory)")


@dg.op(description="Train or reuse, evaluate and compare every method on every data set; write RESULTS.md and "
                   "results.json and log them to MLflow (experiment xc-results).")
def write_results(context: dg.OpExecutionContext, config: ResultsConfig, xc_home: XcHome) -> dg.Output[str]:
    from xc_core.stages.results import run_results

    command = f"dagster job results (run {context.run_id}): {config.model_dump_json()}"
    summary = run_results(xc_home.path, config.profile, config.datasets, config.methods, seeds=tuple(config.seeds),
                          out=Path(config.out) if config.out else None, command=command)
    header = summary["header"]
    context.log.info(f"results: {summary['results']} (MLflow run {header['mlflow_run_id']})")
    return dg.Output(summary["results"], metadata={
        "results": dg.MetadataValue.path(summary["results"]), "json": dg.MetadataValue.path(summary["json"]),
        "mlflow_run_id": header["mlflow_run_id"], "git_commit": header["git_commit"],
        "seconds": header["seconds"]})


@dg.job(name="results", description="RESULTS.md: every method on every data set at one profile — metrics with 95% "
                                    "CIs, paired differences, ablations, A/B tests and measured costs (issue #16).")
def results_job() -> None:
    write_results()
