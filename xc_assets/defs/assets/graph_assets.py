"""Per data set: graph tables → xc_dataset → anchor_sets, each with blocking quality checks.

One lineage per data set (asset keys prefixed by the data set: ``aol_1000/xc_dataset`` …), so every
data set keeps its own history and checks in the UI. Everything here calls xc_core; no logic lives here.
"""

import json
from pathlib import Path

import dagster as dg
import polars as pl
from pydantic import Field

from xc_assets.defs.assets.ingest_assets import markdown_table, png_markdown
from xc_assets.defs.constants import prefix
from xc_assets.defs.freshness import lineage_asset_version
from xc_assets.defs.resources import XcHome
from xc_core.datasets.container import XCDataset
from xc_core.datasets.graph_tables import TABLES
from xc_core.datasets.registry import dataset_names, event_datasets, events_config
from xc_core.paths import graphs_dir

#: one asset family per data set of the home the code location serves (``$XC_HOME``: built in and defined there;
#: a definition file that cannot be read is skipped with a warning, not a broken code location), plus ``xc-repo``
#: (a folder named in run config)
DATASETS = (*dataset_names(skip_broken=True), "xc-repo")
EVENT_DATASETS = event_datasets(skip_broken=True)


class DatasetConfig(dg.Config):
    seed: int = Field(default=0, description="split seed (wikispeedia)")
    xc_repo_path: str = Field(default="", description="xc-repo only: folder in the XC repository raw-text format")


class AnchorSetsConfig(dg.Config):
    profile: str = Field(default="demo", description="tiny | demo | cpu | full: encoder and RWR settings")
    min_coverage: float = Field(default=0.5, ge=0, le=1,
                                description="gate: share of nodes with ≥1 anchor after RWR, per set and side")
    use_encoder: bool = Field(default=True, description="ANN proxies and pruning need the encoder")


def _graph_tables(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.multi_asset(
        name=f"{p}_graph_tables",
        specs=[dg.AssetSpec([p, t], deps=[dg.AssetDep("raw_events", partition_mapping=dg.AllPartitionMapping())],
                            group_name=p, kinds={"duckdb", "parquet"}, code_version=lineage_asset_version(),
                            description=f"{t} of the {dataset} train window (xc_core.datasets.graph_tables)")
               for t in TABLES],
    )
    def graph_tables(context: dg.AssetExecutionContext, xc_home: XcHome):
        from xc_core.stages.graph_tables import materialize_graph_tables

        out = graphs_dir(xc_home.path, dataset)
        summary = materialize_graph_tables(dataset, xc_home.path)
        context.log.info(f"graph tables {summary.to_dict()}")
        for table in TABLES:
            frame = pl.read_parquet(out / f"{table}.parquet")
            yield dg.MaterializeResult(asset_key=[p, table], metadata={
                "rows": frame.height, "train_start": summary.train_start, "train_end": summary.train_end,
                "path": dg.MetadataValue.path(str(out / f"{table}.parquet")),
                "sample": dg.MetadataValue.md(markdown_table(frame.drop("train_start", "train_end"), 5)),
            })

    return graph_tables


def _graph_table_check(dataset: str) -> dg.AssetChecksDefinition:
    p = prefix(dataset)

    @dg.asset_check(asset=[p, "click_graph"], name="graph_tables_valid", blocking=True,
                    additional_deps=[[p, "cosession_queries"], [p, "coclick_items"]],
                    description="GX: no nulls/self-loops, symmetric co-session/co-click, CTR in [0,1], "
                                "clicks ≤ impressions, nothing from the test period")
    def check(xc_home: XcHome) -> dg.AssetCheckResult:
        from xc_core.datasets.events import event_window
        from xc_core.quality.gx_suites import graph_table_suites

        cfg = events_config(dataset, xc_home.path)
        store = xc_home.event_store()
        _, split, _ = event_window(store, cfg)
        train_queries = set(store.scan().filter(pl.col("ts") < split).select("query_text").unique().collect()
                            .get_column("query_text").to_list())
        test_only = set(store.scan().filter(pl.col("ts") >= split).select("query_text").unique().collect()
                        .get_column("query_text").to_list()) - train_queries
        results = graph_table_suites(graphs_dir(xc_home.path, dataset), split, test_only)
        return dg.AssetCheckResult(passed=all(r.success for r in results), metadata={
            "suites": {r.suite: {"success": r.success, "rows": r.rows} for r in results},
            "failures": dg.MetadataValue.json([f for r in results for f in r.failed]),
            "test_only_queries_checked": len(test_only),
        })

    return check


def _xc_dataset(dataset: str, events: bool | None = None) -> dg.AssetsDefinition:
    """``events``: whether the data set is an event log (its graph tables come first); None: as the served home
    defines it."""
    p = prefix(dataset)
    deps = [[p, t] for t in TABLES] if (dataset in EVENT_DATASETS if events is None else events) else []

    @dg.asset(key=[p, "xc_dataset"], deps=deps, group_name=p, kinds={"parquet", "scipy"},
              code_version=lineage_asset_version(),
              description=f"The {dataset} XC data set: texts, train/test CSR matrices, native anchor sets")
    def xc_dataset(context: dg.AssetExecutionContext, config: DatasetConfig, xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.stages.dataset import materialize_dataset

        name = dataset if dataset != "xc-repo" else config.xc_repo_path
        if not name:
            raise dg.Failure("xc-repo needs config xc_repo_path: a folder with trn_X.txt, tst_X.txt, "
                             "trn_X_Y.txt, tst_X_Y.txt and Y.txt")
        _, summary = materialize_dataset(name, xc_home.path, seed=config.seed)
        context.log.info(f"data set {summary}")
        sets = pl.DataFrame([{"anchor_set": k, **v} for k, v in summary["anchor_sets"].items()])
        return dg.MaterializeResult(metadata={
            **{k: summary[k] for k in ("documents", "labels", "train_documents", "test_documents", "train_pairs",
                                       "test_pairs", "novel_test_documents", "novel_labels", "leaked_test_nodes")},
            "anchor_sets": dg.MetadataValue.md(markdown_table(sets, 20)),
            "path": dg.MetadataValue.path(summary["path"]),
        })

    return xc_dataset


def _anchor_sets(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.multi_asset(
        name=f"{p}_anchor_sets",
        specs=[
            dg.AssetSpec([p, "similar_text"], deps=[[p, "xc_dataset"]], group_name=p, kinds={"faiss", "parquet"},
                         code_version=lineage_asset_version(),
                         description="ANN proxy neighbours (TextGNN §4.2.2) for nodes without native anchors"),
            dg.AssetSpec([p, "anchor_sets"], deps=[[p, "xc_dataset"]], group_name=p, kinds={"numpy", "faiss"},
                         code_version=lineage_asset_version(),
                         description="Native anchors + ANN proxies, RWR-expanded (RAMEN: 400 hops, restart 0.8, "
                                     "top 10), pruned by encoder cosine > 0"),
        ],
    )
    def anchor_sets(context: dg.AssetExecutionContext, config: AnchorSetsConfig, xc_home: XcHome):
        from xc_assets.defs.freshness import lineage_code_version
        from xc_core.paths import dataset_dir
        from xc_core.profiles import get_profile
        from xc_core.provenance import record_stamp as stamp
        from xc_core.quality.coverage import default_thresholds
        from xc_core.stages.anchor_sets import materialize_anchor_sets

        source = XCDataset.load(_dataset_path(xc_home.path, dataset, dataset_dir))
        result = materialize_anchor_sets(source, xc_home.path, get_profile(config.profile),
                                         thresholds=default_thresholds(source, config.min_coverage),
                                         use_encoder=config.use_encoder)
        context.log.info(f"anchor sets {result.summary}")
        similar = result.path / "similar_text.parquet"
        similar_rows = pl.read_parquet(similar) if similar.exists() else pl.DataFrame()
        yield dg.MaterializeResult(asset_key=[p, "similar_text"], metadata={
            "proxy_edges": similar_rows.height,
            "sample": dg.MetadataValue.md(markdown_table(similar_rows.drop("node_idx", "neighbour_idx", strict=False),
                                                         10)),
            "path": dg.MetadataValue.path(str(similar)),
        })
        yield dg.MaterializeResult(asset_key=[p, "anchor_sets"], metadata={
            "coverage": dg.MetadataValue.md(markdown_table(result.coverage, 50)),
            "prune_counts": dg.MetadataValue.json(result.summary["prune_counts"]),
            "proxy_edges": result.summary["proxy_edges"],
            "reachable_train_labels": result.summary["reachable_train_labels"],
            "degree_histogram": dg.MetadataValue.md(png_markdown(_degree_plot(result))),
            "path": dg.MetadataValue.path(str(result.path.resolve())),  # resolved: how trainings find their lineage
            **stamp(xc_home.path, config.profile, lineage_code_version()),
        })

    return anchor_sets


def _dataset_path(home: Path, dataset: str, dataset_dir) -> Path:
    if dataset != "xc-repo":
        return dataset_dir(home, dataset)
    found = sorted((home / "datasets").glob("*/meta.json"), key=lambda p: p.stat().st_mtime)
    protocols = [p.parent for p in found if json.loads(p.read_text()).get("protocol") == "xc-repo"]
    if not protocols:
        raise dg.Failure("no XC-repository data set built yet: materialize xc_repo/xc_dataset first")
    return protocols[-1]


def _degree_plot(result) -> Path:
    from xc_core.quality.coverage import degree_histogram
    from xc_core.quality.plots import plot_degree_histogram

    return plot_degree_histogram(degree_histogram(result.dataset.anchor_sets, result.dataset),
                                 result.path / "degree_histogram.png", title=result.dataset.name)


def _coverage_check(dataset: str) -> dg.AssetChecksDefinition:
    p = prefix(dataset)

    @dg.asset_check(asset=[p, "anchor_sets"], name="coverage_gate", blocking=True,
                    description="Blocks training when a graph is too thin: share of documents/labels with ≥1 "
                                "anchor after RWR must reach the configured minimum, per anchor set and side")
    def check(xc_home: XcHome) -> dg.AssetCheckResult:
        from xc_core.paths import anchors_dir
        from xc_core.quality.coverage import CoverageThreshold, check_coverage
        from xc_core.quality.gx_suites import anchor_leak_suite, coverage_suite

        folder = anchors_dir(xc_home.path, _dataset_name(xc_home.path, dataset))
        table = pl.read_parquet(folder / "coverage.parquet")
        thresholds = [CoverageThreshold(**t) for t in json.loads((folder / "thresholds.json").read_text())]
        suite = coverage_suite(table, thresholds)
        data = XCDataset.load(folder)
        spaces = data.meta.get("anchor_spaces", {})
        # only where xc built the anchors from the event store is an equal text the same node (an XC folder's
        # category "language" is not its test headword "language": the data-set stage warns about those)
        built_from_events = bool(data.meta.get("graphs_dir"))
        leak = anchor_leak_suite({n: a.texts for n, a in data.anchor_sets.items()
                                  if built_from_events and spaces.get(n, "documents") == "documents"},
                                 {t for t, novel in zip(data.test_texts, data.test_novel, strict=True) if novel})
        outcomes = check_coverage(table, thresholds)
        failing = [o.as_dict() for o in outcomes if not o.passed]
        return dg.AssetCheckResult(
            passed=suite.success and leak.success,
            severity=dg.AssetCheckSeverity.ERROR,
            description=("coverage below threshold: " + "; ".join(
                f"{f['anchor_set']}/{f['node_type']} {f['measured']:.3f} < {f['threshold']:.3f}" for f in failing))
            if failing else "every gated anchor set meets its coverage threshold",
            metadata={
                "measured_vs_threshold": dg.MetadataValue.md(markdown_table(
                    pl.DataFrame([o.as_dict() for o in outcomes]), 50)),
                "failing": dg.MetadataValue.json(failing),
                "test_documents_in_anchors": leak.failed[0]["unexpected_count"] if leak.failed else 0,
            })

    return check


def _graph_worth_check(dataset: str) -> dg.AssetChecksDefinition:
    p = prefix(dataset)

    @dg.asset_check(asset=[p, "anchor_sets"], name="graph_worth", blocking=False,
                    description="Will this graph help? Per anchor set, from training and validation rows: novelty "
                                "(held-out positives reached beyond the training labels, against chance), redundancy "
                                "(edges restating training pairs), gradient agreement with the task, tail reach — "
                                "and a verdict; ramen starts every set that does not add information at λ = 0. "
                                "WARN, never blocking")
    def check(xc_home: XcHome) -> dg.AssetCheckResult:
        from xc_core.graphs.worth import ADDS, worth_table
        from xc_core.paths import anchors_dir

        folder = anchors_dir(xc_home.path, _dataset_name(xc_home.path, dataset))
        record = json.loads((folder / "graph_worth.json").read_text())
        sets = record["sets"]
        weak = {name: row["verdict"] for name, row in sets.items() if row["verdict"] != ADDS}
        return dg.AssetCheckResult(
            passed=not weak, severity=dg.AssetCheckSeverity.WARN,
            description=("; ".join(f"{name}: {verdict}" for name, verdict in weak.items()) + " — λ starts at 0"
                         if weak else "every anchor set adds information"),
            metadata={"sets": dg.MetadataValue.md(markdown_table(pl.DataFrame(worth_table(record)), 50)),
                      "verdicts": dg.MetadataValue.json({name: row["verdict"] for name, row in sets.items()}),
                      "validation_rows": record["validation"]["rows"], "note": record.get("note", "")})

    return check


def _dataset_name(home: Path, dataset: str) -> str:
    if dataset != "xc-repo":
        return dataset
    return _dataset_path(home, dataset, None).name
