"""Registry per data set: ``challenger`` (register + alias) → ``ab_test`` (challenger vs champion, simulated) with
the blocking check ``beats_champion`` → ``champion`` (the alias move). A worse model is registered and tagged, and
the alias stays: a rejection is the gate working, so the run succeeds, the check shows as a warning with the
reason, and ``champion`` is materialized with the alias where it was (``changed`` false, the same data version),
so the UI shows it in sync with the gate that last ran. Red (a failed run or an ERROR check) means something broke:
registration, the gate's inputs, the store."""


import dagster as dg
from pydantic import Field

from xc_assets.defs.constants import prefix
from xc_assets.defs.resources import XcHome
from xc_core.methods import default_method


class ChallengerConfig(dg.Config):
    method: str = Field(default_factory=default_method, description="which evaluated method to register")
    profile: str = Field(default="demo")


class PolicyConfig(dg.Config):
    primary: str = Field(default="P@1", description="must improve strictly over the champion")
    psp5_tolerance: float = Field(default=0.0, ge=0, description="PSP@5 drop allowed beyond noise: the guard fails "
                                  "when the paired interval (same test queries) lies wholly below −tolerance")
    tail_p5_tolerance: float = Field(default=0.0, ge=0, description="the tail label bin's P@5 drop allowed beyond "
                                     "noise, tested as PSP@5 is")
    unpaired_tolerance: float = Field(default=0.01, ge=0, description="without a paired comparison, the drop a "
                                      "guard's point estimate may show on top of its tolerance")
    confidence: float = Field(default=0.95, ge=0, lt=1,
                              description="the primary lead must hold at this confidence on the same test queries "
                                          "(paired bootstrap); 0 compares point estimates only")
    min_lead: float = Field(default=0.0, ge=0,
                            description="smallest primary lead (challenger − champion point estimate, a fraction: "
                                        "0.005 = half a P@1 point) worth promoting; 0 accepts any strict lead")
    ab_guards: list[str] = Field(default=["brand_bmr", "location_bmr"],
                                 description="metrics of the ab_test asset (lower is better) that must not be "
                                             "significantly worse than the champion's; [] turns the A/B guard off")
    ab_alpha: float = Field(default=0.05, gt=0, lt=1, description="significance level of the A/B guards")


def _policy(config: PolicyConfig):
    from xc_core.tracking.registry import PromotionPolicy

    return PromotionPolicy(primary=config.primary, confidence=config.confidence, min_lead=config.min_lead,
                           guards={"PSP@5": config.psp5_tolerance, "tail_P@5": config.tail_p5_tolerance},
                           unpaired_tolerance=config.unpaired_tolerance,
                           ab_guards=tuple(config.ab_guards), ab_alpha=config.ab_alpha)


def _latest_challenger(xc_home: XcHome, dataset: str):
    import mlflow

    from xc_core.tracking.registry import CHALLENGER, model_name
    from xc_core.tracking.store import tracking_uri

    uri = tracking_uri(xc_home.path)
    return uri, mlflow.MlflowClient(uri).get_model_version_by_alias(model_name(dataset), CHALLENGER)


def _challenger(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "challenger"], deps=[[p, "offline_eval"]], group_name=p, kinds={"mlflow"},
              description="Scores the evaluated method on the promotion split (its validation rows, the split the "
                          "gate decides on) and registers its model as a new version of xc-encoder-<dataset> "
                          "(alias challenger; its method tag is how serving finds the method; its test scores are "
                          "tagged beside, for show)")
    def challenger(context: dg.AssetExecutionContext, config: ChallengerConfig,
                   xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.stages.evaluate import evaluate_promotion_split
        from xc_core.tracking.registry import register_evaluated

        scored = evaluate_promotion_split(xc_home.path, dataset, config.method, config.profile)
        context.log.info(f"{config.method} on the promotion split ({scored['test_documents']} validation rows): "
                         f"P@1 {scored['P@1']:.4f}")
        out = register_evaluated(xc_home.path, dataset, config.method, config.profile)
        context.log.info(f"registered {out['model']} v{out['version']} ({config.method})")
        return dg.MaterializeResult(metadata={"model": out["model"], "version": out["version"],
                                              "method": config.method, "decided_on": out["split"],
                                              "metrics": dg.MetadataValue.json(out["metrics"]),
                                              "test_metrics": dg.MetadataValue.json(out["test_metrics"])})

    return challenger


def _check(dataset: str) -> dg.AssetChecksDefinition:
    p = prefix(dataset)

    @dg.asset_check(asset=[p, "ab_test"], name="beats_champion", blocking=True,
                    description="Promotion gate, on the promotion split (each model's validation rows; the test "
                                "split is shown beside, never read): primary metric strictly better with its "
                                "paired-bootstrap interval above 0 on the same queries and a lead of at least "
                                "min_lead, no guard metric (PSP@5, the tail bin's P@5) significantly worse in its "
                                "paired test (a tie band "
                                "holds), no significantly worse Brand/Location BMR in the "
                                "simulated A/B test against the champion (the first model always passes). A "
                                "rejection is a WARN result: the run succeeds and the champion stays")
    def beats_champion(config: PolicyConfig, xc_home: XcHome) -> dg.AssetCheckResult:
        from dataclasses import asdict

        from xc_core.tracking.registry import champion_version, gate

        uri, version = _latest_challenger(xc_home, dataset)
        current = champion_version(dataset, uri)
        decision = gate(xc_home.path, version, current, _policy(config))
        import mlflow

        client = mlflow.MlflowClient(uri)
        for key, value in decision.as_tags().items():  # rejected versions keep their reason too
            client.set_model_version_tag(version.name, version.version, key, value)
        severity = dg.AssetCheckSeverity.ERROR if decision.promote else dg.AssetCheckSeverity.WARN
        return dg.AssetCheckResult(passed=decision.promote, severity=severity, description=decision.reason, metadata={
            "decision": "promoted" if decision.promote else "rejected",
            "decided_on": decision.split, "test_view": decision.test_view(),
            "test_metrics": dg.MetadataValue.json(decision.test),
            "challenger_version": str(version.version),
            "champion_version": str(current.version) if current else "none",
            "challenger_metrics": dg.MetadataValue.json(decision.challenger),
            "champion_metrics": dg.MetadataValue.json(decision.champion or {}),
            "paired_lead": dg.MetadataValue.json(asdict(decision.paired) if decision.paired else {}),
            "guards": dg.MetadataValue.json([check.as_dict() for check in decision.guards]),
            "ab_test": dg.MetadataValue.json(_ab_summary(xc_home, version, current)),
            "policy": dg.MetadataValue.json(_policy(config).model_dump()), **_serving(dataset, xc_home)})

    return beats_champion


def _serving(dataset: str, xc_home: XcHome) -> dict:
    """Where the champion is served (``xc serve``, not an asset: a long-running process that follows the alias)
    and which version that service answers with now."""
    from xc_core.serving import live_status

    status = live_status(dataset, xc_home.path)
    return {"serve_url": dg.MetadataValue.url(status["serve_url"]),
            "serve_command": dg.MetadataValue.text(status["serve_command"]),
            "live_version": dg.MetadataValue.text(status["live_version"])}


def _ab_summary(xc_home: XcHome, challenger, champion) -> dict:
    """The gate's A/B lifts of the guard metrics (empty when no A/B test ran)."""
    from xc_core.tracking.registry import gate_abtest

    ab = gate_abtest(xc_home.path, challenger, champion)
    if not ab:
        return {}
    return {k: {"delta_pct": ab["delta_pct"].get(k), "ci95": ab["ci95"].get(k), "p_value": ab["p_value"].get(k)}
            for k in ("brand_bmr", "location_bmr", "ctr", "iy", "revenue", "click_hit_rate") if k in ab["delta_pct"]}


def _champion(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "champion"], deps=[[p, "ab_test"]], group_name=p, kinds={"mlflow"},
              description="The champion alias after the gate: moved to the challenger when the gate promotes it, "
                          "else kept. Materialized either way, so it is in sync with the gate that last decided; "
                          "its data version is the champion's registry version, so it changes only when the alias "
                          "moves (a rejected challenger leaves the run green)")
    def champion(context: dg.AssetExecutionContext, config: PolicyConfig,
                 xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.tracking.registry import champion_version, promote_if_better

        uri, version = _latest_challenger(xc_home, dataset)
        decision = promote_if_better(dataset, str(version.version), uri, _policy(config), home=xc_home.path)
        if decision.promote:
            context.log.info(f"champion is now v{version.version}: {decision.reason}")
        else:  # the gate's own decision (see beats_champion), not an error: the alias stays where it was
            context.log.info(f"champion unchanged, v{version.version} not promoted: {decision.reason}")
        current = champion_version(dataset, uri)
        served = str(current.version) if current is not None else "none"
        return dg.MaterializeResult(
            data_version=dg.DataVersion(f"v{served}"),
            metadata={"champion_version": served, "changed": decision.promote,
                      "challenger_version": str(version.version), "reason": decision.reason,
                      **_serving(dataset, xc_home)})

    return champion
