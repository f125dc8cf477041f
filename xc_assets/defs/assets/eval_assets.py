"""Per data set: ``label_index`` and ``offline_eval`` for each method partition (``eval_report`` over all is the
report stage's declared asset: ``xc_core.stages.report``)."""


import dagster as dg
from pydantic import Field

from xc_assets.defs.assets.model_assets import method_partitions
from xc_assets.defs.constants import prefix
from xc_assets.defs.resources import XcHome


class EvalConfig(dg.Config):
    profile: str = Field(default="demo", description="profile the encoders were trained with")


def _dataset(xc_home: XcHome, dataset: str):
    from xc_core.stages.anchor_sets import load_with_anchors

    return load_with_anchors(xc_home.path, dataset)


def _label_index(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "label_index"], deps=[[p, "encoder"]], partitions_def=method_partitions, group_name=p,
              kinds={"faiss"}, description="The method's index and test-query predictions (for an encoder method: HNSW "
                                           "index of every label, recall@10 against exact search on the test queries)")
    def label_index(context: dg.AssetExecutionContext, config: EvalConfig, xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.stages.index import index_method

        data = _dataset(xc_home, dataset)
        preds = index_method(data, context.partition_key, config.profile, xc_home.path)
        return dg.MaterializeResult(metadata={
            "labels": data.n_labels, **preds.index_metrics(), "model_uri": preds.model_uri,
            "path": dg.MetadataValue.path(str(preds.index_dir))})

    return label_index


def _offline_eval(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "offline_eval"], deps=[[p, "label_index"]], partitions_def=method_partitions, group_name=p,
              kinds={"scipy"}, description="pyxclib-exact P/nDCG/PSP/PSnDCG/R on the full test split, bootstrap CIs, "
                                           "label quantiles, seen/novel subsets")
    def offline_eval(context: dg.AssetExecutionContext, config: EvalConfig, xc_home: XcHome) -> dg.MaterializeResult:
        from xc_assets.defs.freshness import stamp
        from xc_core.methods.versions import method_code_version
        from xc_core.stages.evaluate import evaluate_method

        method = context.partition_key
        summary = evaluate_method(_dataset(xc_home, dataset), method, config.profile, xc_home.path)
        shown = {k: round(float(v), 4) for k, v in summary.items()
                 if k in ("P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@5", "R@10", "R@100", "hnsw_recall@10")}
        context.log.info(f"{context.partition_key}: {shown}")
        return dg.MaterializeResult(metadata={
            **shown, "mlflow_run_id": summary["mlflow_run_id"], "subsets": dg.MetadataValue.json(summary["subsets"]),
            **stamp(xc_home.path, config.profile, method_code_version(method, "evaluate"))})

    return offline_eval
