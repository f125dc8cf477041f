import dagster as dg

ingest_job = dg.define_asset_job(
    "ingest_job",
    # not the whole ingestion group: a landed file must not rebuild the simulator's world and day files
    selection=dg.AssetSelection.assets("raw_events", "quarantine"),
    description="Ingest raw logs for a range of days, then refresh the quarantine report.",
)

#: The default data set's data lineage from the event store: graph tables → data set → anchor sets (with their
#: checks). Ingestion is not in it (the landing sensor and ``ingest_job`` fill the store). After a nightly rebuild
#: the chain sensors (``sensors.py``) run ``train_eval_job`` per configured method, then ``report_job`` and one
#: ``promotion_job`` per method, one at a time (tag ``xc/promotion``; dagster.yaml limits it to one run).
retrain_job = dg.define_asset_job(
    "retrain_job",
    selection=dg.AssetSelection.groups("synthetic") - dg.AssetSelection.assets(
        ["synthetic", "encoder"], ["synthetic", "label_index"], ["synthetic", "offline_eval"],
        ["synthetic", "eval_report"], ["synthetic", "challenger"], ["synthetic", "champion"]),
    description="Rebuild graphs → data set → anchor sets (with their checks) from the events in the store.",
)

#: One method's training → index → evaluation (partition = method); the report and the gate are the next two jobs.
train_eval_job = dg.define_asset_job(
    "train_eval_job",
    selection=dg.AssetSelection.assets(["synthetic", "encoder"], ["synthetic", "label_index"],
                                     ["synthetic", "offline_eval"]),
    description="Train, index and evaluate one method (partition) of the synthetic data set.",
)

report_job = dg.define_asset_job(
    "report_job", selection=dg.AssetSelection.assets(["synthetic", "eval_report"]),
    description="The synthetic data set's HTML report over every evaluated method.")

#: Register one evaluated method (run config names it) → gate → champion alias; its checks come with it.
promotion_job = dg.define_asset_job(
    "promotion_job", selection=dg.AssetSelection.assets(["synthetic", "challenger"], ["synthetic", "champion"]),
    description="Register one evaluated method as challenger of the synthetic data set and gate it.")
