import dagster as dg

from xc_assets.defs.constants import INGEST_GROUP

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.groups(INGEST_GROUP),
    description="Ingest raw logs for a range of days, then refresh the quarantine report.",
)

#: Nightly retraining of the default data set: new log partitions → graphs → data set → anchors. Training,
#: evaluation and promotion of each method follow in per-method runs launched by ``retrain_methods``.
retrain_job = dg.define_asset_job(
    "retrain_job",
    selection=dg.AssetSelection.assets("raw_events", "quarantine")
    | dg.AssetSelection.groups("synthetic") - dg.AssetSelection.assets(
        ["synthetic", "encoder"], ["synthetic", "label_index"], ["synthetic", "offline_eval"],
        ["synthetic", "eval_report"], ["synthetic", "challenger"], ["synthetic", "champion"]),
    description="Re-ingest new log partitions and rebuild graphs → data set → anchor sets (with their checks).",
)

#: One method's training → index → evaluation → report → registration/promotion (partition = method).
train_eval_job = dg.define_asset_job(
    "train_eval_job",
    selection=dg.AssetSelection.assets(["synthetic", "encoder"], ["synthetic", "label_index"],
                                     ["synthetic", "offline_eval"]),
    description="Train, index and evaluate one method (partition) of the synthetic data set.",
)
