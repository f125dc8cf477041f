"""A trained model per data set, one partition per registered method (``xc_core.methods``), each trained by its
own method and tracked in MLflow.

``<dataset>/encoder`` depends on ``<dataset>/anchor_sets``, whose blocking ``coverage_gate`` check keeps
training from running on a graph that is too thin.
"""

import dagster as dg
from pydantic import Field

from xc_assets.defs.constants import prefix
from xc_assets.defs.freshness import stage_code_version
from xc_assets.defs.resources import XcHome
from xc_core.methods import method_names

method_partitions = dg.StaticPartitionsDefinition(method_names())  # a new method module is a new partition


class EncoderConfig(dg.Config):
    profile: str = Field(default="demo", description="tiny | demo | cpu | full")
    epochs: int = Field(default=0, ge=0, description="override the profile's epochs (0: keep)")
    lr: float = Field(default=0.0, ge=0, description="override the profile's learning rate (0: keep)")
    batch_size: int = Field(default=0, ge=0, description="override the profile's batch size (0: keep)")
    resume: bool = Field(default=False, description="continue from the last checkpoint")
    seed: int = Field(default=-1, ge=-1, description="training seed (-1: the profile's)")


def _encoder(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "encoder"], deps=[[p, "anchor_sets"]], partitions_def=method_partitions, group_name=p,
              kinds={"pytorch", "mlflow"}, retry_policy=dg.RetryPolicy(max_retries=1),
              code_version=stage_code_version("train"),
              description="The partition's method trained (RAMEN, baselines, ablations, any registered method); one "
                          "MLflow run each, logged as the method's MLflow model")
    def encoder(context: dg.AssetExecutionContext, config: EncoderConfig, xc_home: XcHome) -> dg.MaterializeResult:
        from xc_assets.defs.freshness import lineage
        from xc_core.methods.versions import RECORD_KEY  # the code the training started from
        from xc_core.profiles import get_profile
        from xc_core.provenance import record_stamp as stamp
        from xc_core.stages.anchor_sets import load_with_anchors
        from xc_core.stages.train import train_method

        name = dataset if dataset != "xc-repo" else _latest_repo(xc_home)
        data = load_with_anchors(xc_home.path, name)
        profile = get_profile(config.profile)
        if config.seed >= 0:
            profile = profile.model_copy(update={"seed": config.seed})
        made_from = lineage(context.instance, name, xc_home.path)  # the anchor sets it trains on
        overrides = {k: v for k, v in (("epochs", config.epochs), ("lr", config.lr),
                                       ("batch_size", config.batch_size)) if v}

        def report(metrics: dict[str, float], step: int) -> None:
            shown = {k: round(v, 4) for k, v in metrics.items() if k.startswith(("loss/task", "val/", "lambda/task"))}
            context.log.info(f"step {step}: {shown}")

        method = context.partition_key
        summary = train_method(data, method, profile, xc_home.path, resume=config.resume, overrides=overrides,
                               on_metrics=report)
        return dg.MaterializeResult(metadata={
            **_scalars(summary), **stamp(xc_home.path, profile.name, summary[RECORD_KEY],
                                         seed=profile.seed, lineage=made_from.storage_id if made_from else -1)})

    return encoder


def _scalars(summary: dict) -> dict:
    """The training record's single values (run, model, epochs, losses …, whatever the method recorded) as
    metadata; lists and tables (history, curves) stay in MLflow."""
    return {k: v for k, v in summary.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}


def _latest_repo(xc_home: XcHome) -> str:
    from xc_assets.defs.assets.graph_assets import _dataset_name

    return _dataset_name(xc_home.path, "xc-repo")
