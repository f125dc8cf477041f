import dagster as dg

from xc_assets.defs.constants import INGEST_GROUP

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.groups(INGEST_GROUP),
    description="Ingest raw logs for a range of days, then refresh the quarantine report.",
)

#: The default data set's data lineage from the event store: graph tables → data set → anchor sets (with their
#: checks). Ingestion is not in it (the landing sensor and ``ingest_job`` fill the store); training, index and
#: evaluation are ``train_eval_job`` (one run per method partition), the report and the gate the registry assets or
#: ``xc promote`` — the nightly schedule does not chain them yet.
retrain_job = dg.define_asset_job(
    "retrain_job",
    selection=dg.AssetSelection.groups("synthetic") - dg.AssetSelection.assets(
        ["synthetic", "encoder"], ["synthetic", "label_index"], ["synthetic", "offline_eval"],
        ["synthetic", "eval_report"], ["synthetic", "challenger"], ["synthetic", "champion"]),
    description="Rebuild graphs → data set → anchor sets (with their checks) from the events in the store.",
)

#: One method's training → index → evaluation (partition = method); the report, registration and promotion are
#: not in it (``xc promote`` or the ``challenger``/``champion`` assets).
train_eval_job = dg.define_asset_job(
    "train_eval_job",
    selection=dg.AssetSelection.assets(["synthetic", "encoder"], ["synthetic", "label_index"],
                                     ["synthetic", "offline_eval"]),
    description="Train, index and evaluate one method (partition) of the synthetic data set.",
)
