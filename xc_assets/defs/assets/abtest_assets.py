"""Simulated A/B tests per data set: ``ab_vs_control`` (each method partition against a control, default
``pretrained``; in the data set's report) and ``ab_test`` (the registry's challenger against its champion, which
the promotion gate reads: a significantly worse Brand or Location BMR blocks the promotion).

A data set without a simulated world gets the labelled replay estimate over held-out clicks instead."""

import dagster as dg
from pydantic import Field

from xc_assets.defs.assets.model_assets import method_partitions
from xc_assets.defs.constants import prefix
from xc_assets.defs.freshness import stage_code_version
from xc_assets.defs.resources import XcHome
from xc_core.methods import control_method


class ABTestConfig(dg.Config):
    profile: str = Field(default="demo", description="profile of the arms named by method")
    control: str = Field(default_factory=control_method,
                         description="control arm: a method (default: the registry's control), a model URI, bm25, "
                                     "oracle, random")
    queries: int = Field(default=10_000, ge=10, description="query events of the test period served")
    seed: int = Field(default=0, ge=0)
    paired: bool = Field(default=True, description="both arms serve the same events (common random numbers); "
                                                   "false: users split by a salted hash, as a live test")


def _config(config: ABTestConfig):
    from xc_core.abtest import ABConfig

    return ABConfig(queries=config.queries, seed=config.seed, paired=config.paired)


def _ab_vs_control(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "ab_vs_control"], deps=[[p, "offline_eval"]], partitions_def=method_partitions, group_name=p,
              kinds={"numpy"}, code_version=stage_code_version("abtest"),
              description="Simulated A/B tests of the method against the control (default: the untrained "
                          "encoder) and against each baseline it declares that is trained (e.g. the graph method "
                          "vs its text-only baseline): CTR, IY, Brand/Location BMR, quick-backs, revenue by "
                          "segment and market with delta-method CIs; a replay estimate without a simulated world")
    def ab_vs_control(context: dg.AssetExecutionContext, config: ABTestConfig,
                      xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.abtest.report import headline, headline_markdown
        from xc_core.methods import get_method
        from xc_core.methods.versions import method_code_version
        from xc_core.provenance import record_stamp as stamp
        from xc_core.stages.abtest import ABStage

        method = context.partition_key
        stage = ABStage(dataset, xc_home.path, config.profile)
        summaries, skipped, arms = [], {}, {}
        for control in dict.fromkeys((config.control, *get_method(method).baselines)):
            if control == method:
                continue
            try:
                stage.arm(control)
            except (FileNotFoundError, ValueError) as error:  # not trained in this home (or not a method here)
                skipped[control] = str(error)
                continue
            result = stage.run(control, method, _config(config))
            arms.update({control: result.get("control_arm", {}).get("model_uri", ""),
                         method: result.get("treatment_arm", {}).get("model_uri", "")})
            context.log.info(f"{method} vs {control}: {headline(result)}")
            summaries.append(headline_markdown(result))
        if skipped:
            context.log.info(f"no A/B test against {', '.join(skipped)}: not trained in {xc_home.path}")
        return dg.MaterializeResult(metadata={
            "summary": dg.MetadataValue.md("\n\n".join(summaries) or "no trained control"),
            "tests": len(summaries), "skipped": dg.MetadataValue.json(skipped),
            # the models each test served: a retrained arm makes this record stale (xc_assets.results)
            "arms": dg.MetadataValue.json(arms), **stamp(xc_home.path, config.profile,
                                                         method_code_version(method, "abtest"))})

    return ab_vs_control


def _ab_test(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "ab_test"], deps=[[p, "challenger"]], group_name=p, kinds={"numpy", "mlflow"},
              description="Simulated A/B test of the registry's challenger against its champion on the "
                          "traffic of the days before the test period (the promotion split); the "
                          "promotion gate blocks a challenger with a significantly worse Brand or Location BMR")
    def ab_test(context: dg.AssetExecutionContext, config: ABTestConfig, xc_home: XcHome) -> dg.MaterializeResult:
        import mlflow

        from xc_core.abtest.report import headline_markdown
        from xc_core.paths import gate_abtest_path
        from xc_core.stages.abtest import ABStage
        from xc_core.tracking.registry import CHALLENGER, champion_version, model_name
        from xc_core.tracking.store import tracking_uri

        uri = tracking_uri(xc_home.path)
        name = model_name(dataset)
        challenger = mlflow.MlflowClient(uri).get_model_version_by_alias(name, CHALLENGER)
        champion = champion_version(dataset, uri)
        if champion is None:
            return dg.MaterializeResult(metadata={"skipped": "no champion yet: nothing to test against"})
        profile = challenger.tags.get("profile", config.profile)
        path = gate_abtest_path(xc_home.path, dataset, profile, str(challenger.version), str(champion.version))
        try:
            result = ABStage(dataset, xc_home.path, profile).run(
                f"models:/{name}/{champion.version}", f"models:/{name}/{challenger.version}",
                _config(config).model_copy(update={"period": "validation"}), folder=path.parent, name=path.stem)
        except (LookupError, FileNotFoundError) as error:  # e.g. a replay whose champion was evaluated over
            context.log.warning(f"no A/B test of v{challenger.version} vs v{champion.version}: {error}")
            return dg.MaterializeResult(metadata={"skipped": str(error)})
        return dg.MaterializeResult(metadata={
            "summary": dg.MetadataValue.md(headline_markdown(result)), "mode": result["mode"],
            "challenger_version": str(challenger.version), "champion_version": str(champion.version),
            "result": dg.MetadataValue.path(str(path)), "mlflow_run_id": result.get("mlflow_run_id", "")})

    return ab_test
