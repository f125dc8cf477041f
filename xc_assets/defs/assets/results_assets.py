"""The results page as assets: ``<data set>/results`` (every method's tables on one data set, read from the
evaluation records the method partitions left) and ``results_page`` (``RESULTS.md`` + ``results.json`` over the
data sets, one MLflow run of ``xc-results``). Both only tabulate: ``xc results`` (``xc_assets.results``) first
materializes whatever partition is missing or stale, through the same assets ``xc run`` runs."""

from pathlib import Path

import dagster as dg
from pydantic import Field

from xc_assets.defs.constants import prefix
from xc_assets.defs.resources import XcHome
from xc_core.evaluation.costs import TIMED_QUERIES
from xc_core.methods import result_methods
from xc_core.stages.results import DEFAULT_DATASETS

PAGE = "results_page"


class DatasetResultsConfig(dg.Config):
    profile: str = Field(default="demo", description="tiny | demo | cpu | full: the profile the methods ran at")
    methods: list[str] = Field(default=result_methods(), description="the page's methods, in its order")
    seeds: list[int] = Field(default=[0], description="training seeds (the tables are the first's; more add a "
                                                      "table over seeds, each trained in <home>/seeds/s<seed>)")
    abtests: bool = Field(default=True, description="show the simulated A/B tests the method partitions ran")
    timed_queries: int = Field(default=TIMED_QUERIES, ge=1, description="test queries each serving scorer is timed on")


class PageScope(dg.Config):
    """What a results page covers and where it goes: ``results_page``'s and ``refresh_results_job``'s config."""

    profile: str = Field(default="demo", description="tiny | demo | cpu | full: the profile the methods ran at")
    datasets: list[str] = Field(default=list(DEFAULT_DATASETS))
    methods: list[str] = Field(default=result_methods(), description="the page's methods, in its order")
    seeds: list[int] = Field(default=[0], description="training seeds (more: a table over seeds)")
    out: str = Field(default="", description="folder for RESULTS.md and results.json (empty: docs/ of the "
                                             "working directory)")


class PageConfig(PageScope):
    command: str = Field(default="", description="the command line the page names (empty: this Dagster run)")
    seconds: float = Field(default=0.0, ge=0, description="how long the whole job took (set by xc results)")


def _dataset_results(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "results"], deps=[[p, "offline_eval"], [p, "ab_vs_control"], [p, "eval_report"]],
              group_name=p, kinds={"markdown"},
              description="Every method's tables on this data set (metrics with CIs and the commits that trained "
                          "them, paired differences, ablations, subsets, A/B tests, costs), from the records the "
                          "method partitions left")
    def results(context: dg.AssetExecutionContext, config: DatasetResultsConfig,
                xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.paths import results_path
        from xc_core.stages.anchor_sets import load_with_anchors
        from xc_core.stages.results import dataset_results, validate_methods

        methods = validate_methods(config.methods)
        data = load_with_anchors(xc_home.path, dataset)
        tables = dataset_results(data, xc_home.path, config.profile, methods, abtests=config.abtests,
                                 timed_queries=config.timed_queries, seeds=tuple(config.seeds))
        path = tables.save(results_path(xc_home.path, dataset, config.profile))
        rows = ["| method | P@1 | PSP@1 | trained at |", "|---|---|---|---|"]
        for m in tables.methods:
            p1, psp1 = (m.get(k) or [float("nan")] for k in ("P@1", "PSP@1"))
            rows.append(f"| {m['method']} | {100 * p1[0]:.2f} | {100 * psp1[0]:.2f} | "
                        f"{(m['commits'].get('training') or '–')[:7]} |")
        context.log.info(f"{dataset}: {len(tables.methods)} rows → {path}")
        return dg.MaterializeResult(metadata={"summary": dg.MetadataValue.md("\n".join(rows)),
                                              "path": dg.MetadataValue.path(str(path)), "profile": config.profile})

    return results


def results_page(datasets: tuple[str, ...]) -> dg.AssetsDefinition:
    """The page over ``datasets`` (each one's ``results`` asset upstream)."""

    @dg.asset(key=PAGE, deps=[[prefix(d), "results"] for d in datasets], group_name="results", kinds={"mlflow"},
              description="RESULTS.md + results.json over the data sets, with the provenance header; logged to one "
                          "MLflow run of the xc-results experiment")
    def page(context: dg.AssetExecutionContext, config: PageConfig, xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.paths import results_path
        from xc_core.stages.results import page_header, write_page
        from xc_core.stages.results_page import DatasetResults

        found = [DatasetResults.load(results_path(xc_home.path, d, config.profile)) for d in config.datasets]
        command = config.command or f"dagster asset {PAGE} (run {context.run.run_id}): {config.model_dump_json()}"
        header = page_header(config.profile, tuple(config.datasets), tuple(config.methods), tuple(config.seeds),
                             xc_home.path, command, config.seconds)
        out = write_page(xc_home.path, header, found, Path(config.out) if config.out else Path.cwd() / "docs")
        context.log.info(f"results: {out['results']} (MLflow run {out['header']['mlflow_run_id']})")
        return dg.MaterializeResult(metadata={
            "results": dg.MetadataValue.path(out["results"]), "json": dg.MetadataValue.path(out["json"]),
            "mlflow_run_id": out["header"]["mlflow_run_id"], "git_commit": out["header"]["git_commit"]})

    return page
