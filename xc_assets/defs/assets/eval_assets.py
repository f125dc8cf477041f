"""Per data set: ``label_index`` and ``offline_eval`` for each method partition, and ``eval_report`` over all."""


import dagster as dg
from pydantic import Field

from xc_assets.defs.assets.graph_assets import prefix
from xc_assets.defs.assets.model_assets import method_partitions
from xc_assets.defs.resources import XcHome


class EvalConfig(dg.Config):
    profile: str = Field(default="demo", description="profile the encoders were trained with")


def _dataset(xc_home: XcHome, dataset: str):
    from xc_core.stages.graphs import load_with_anchors

    return load_with_anchors(xc_home.path, dataset)


def _label_index(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "label_index"], deps=[[p, "encoder"]], partitions_def=method_partitions, group_name=p,
              kinds={"faiss"}, description="The method's index and test-query predictions (for an encoder method: HNSW "
                                           "index of every label, recall@10 against exact search on the test queries)")
    def label_index(context: dg.AssetExecutionContext, config: EvalConfig, xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.stages.evaluation import index_method

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
        from xc_core.stages.evaluation import evaluate_method

        summary = evaluate_method(_dataset(xc_home, dataset), context.partition_key, config.profile, xc_home.path)
        shown = {k: round(float(v), 4) for k, v in summary.items()
                 if k in ("P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@5", "R@10", "R@100", "hnsw_recall@10")}
        context.log.info(f"{context.partition_key}: {shown}")
        return dg.MaterializeResult(metadata={**shown, "mlflow_run_id": summary["mlflow_run_id"],
                                              "subsets": dg.MetadataValue.json(summary["subsets"])})

    return offline_eval


def _eval_report(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "eval_report"], deps=[[p, "offline_eval"], [p, "ab_vs_control"]], group_name=p,
              kinds={"html"}, description="One self-contained HTML report comparing every evaluated method, with "
                                          "their simulated A/B tests (logged to MLflow)")
    def eval_report(context: dg.AssetExecutionContext, config: EvalConfig, xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.stages.evaluation import build_report

        out = build_report(_dataset(xc_home, dataset), config.profile, xc_home.path)
        rows = ["| method | P@1 | PSP@1 |", "|---|---|---|"]
        from xc_core.evaluation.record import EvaluationRecord
        from xc_core.paths import eval_dir

        for method in out["methods"]:
            record = EvaluationRecord.load(eval_dir(xc_home.path, dataset, method, config.profile))
            m = record.metrics if record is not None else {}
            rows.append(f"| {method} | {100 * m.get('P@1', float('nan')):.2f} | "
                        f"{100 * m.get('PSP@1', float('nan')):.2f} |")
        return dg.MaterializeResult(metadata={
            "summary": dg.MetadataValue.md("\n".join(rows)), "report": dg.MetadataValue.path(out["report"]),
            "paired_differences": dg.MetadataValue.json(out["paired_differences"]), "methods": out["methods"]})

    return eval_report
