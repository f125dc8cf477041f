"""Great Expectations 1.x suites for the graph tables and the coverage gate.

GX has no polars support, so tables go in as pandas; an ephemeral context keeps nothing on disk.
Properties GX cannot state directly (symmetry, no test-period rows) become derived boolean columns
that an expectation then checks, so every failure is reported by GX with its unexpected count.
GX is imported lazily (≈ 4 s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl


@dataclass
class SuiteResult:
    suite: str
    success: bool
    rows: int
    failed: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _context() -> Any:
    import great_expectations as gx

    context = gx.get_context(mode="ephemeral")
    try:  # progress bars would flood Dagster logs
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except (AttributeError, ImportError):  # a GX without this config: keep its bars
        pass
    return context


def run_suite(name: str, frame: pl.DataFrame, expectations: list[Any]) -> SuiteResult:
    """Validate ``frame`` against ``expectations`` in a fresh ephemeral context."""
    import great_expectations as gx

    context = _context()
    batch = context.data_sources.add_pandas(name).add_dataframe_asset(name).add_batch_definition_whole_dataframe("all")
    suite = context.suites.add(gx.ExpectationSuite(name=name))
    for expectation in expectations:
        suite.add_expectation(expectation)
    validation = context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch, suite=suite))
    result = validation.run(batch_parameters={"dataframe": frame.to_pandas()})
    failed = [{"expectation": r.expectation_config.type, "kwargs": {k: v for k, v in r.expectation_config.kwargs.items()
                                                                      if k != "batch_id"},
               "unexpected_count": r.result.get("unexpected_count"),
               "sample": [str(v) for v in (r.result.get("partial_unexpected_list") or [])[:5]]}
              for r in result.results if not r.success]
    return SuiteResult(name, bool(result.success), frame.height, failed)


def _mirrored(frame: pl.DataFrame, left: str, right: str) -> pl.DataFrame:
    mirror = frame.select(pl.col(right).alias(left), pl.col(left).alias(right)).with_columns(has_mirror=pl.lit(True))
    return frame.join(mirror.unique([left, right]), on=[left, right], how="left").with_columns(
        pl.col("has_mirror").fill_null(False))


def graph_table_suites(graphs_dir: Path, train_end: datetime, test_only_queries: set[str],
                       test_only_items: set[str] | None = None) -> list[SuiteResult]:
    """Validate click_graph, cosession_queries and coclick_items as written under ``graphs_dir``.

    ``test_only_queries``/``items``: nodes first seen in the test period — none may appear in a table.
    """
    import great_expectations as gx

    e = gx.expectations
    test_items = test_only_items or set()
    click = pl.read_parquet(graphs_dir / "click_graph.parquet").with_columns(
        leaks_test=pl.col("query").is_in(list(test_only_queries)) | pl.col("item").is_in(list(test_items)),
        before_train_end=pl.col("last_ts") < train_end)
    cos = _mirrored(pl.read_parquet(graphs_dir / "cosession_queries.parquet"), "q1", "q2").with_columns(
        leaks_test=pl.col("q1").is_in(list(test_only_queries)) | pl.col("q2").is_in(list(test_only_queries)),
        self_loop=pl.col("q1") == pl.col("q2"))
    coclick = _mirrored(pl.read_parquet(graphs_dir / "coclick_items.parquet"), "i1", "i2").with_columns(
        leaks_test=pl.col("i1").is_in(list(test_items)) | pl.col("i2").is_in(list(test_items)),
        self_loop=pl.col("i1") == pl.col("i2"))

    def never() -> Any:  # a fresh object per suite: GX binds an expectation to one suite
        return e.ExpectColumnValuesToBeInSet(column="leaks_test", value_set=[False])

    return [
        run_suite("click_graph", click, [
            *(e.ExpectColumnValuesToNotBeNull(column=c) for c in ("query", "item", "impressions", "clicks", "ctr")),
            e.ExpectColumnValuesToBeBetween(column="ctr", min_value=0, max_value=1),
            e.ExpectColumnPairValuesAToBeGreaterThanB(column_A="impressions", column_B="clicks", or_equal=True),
            e.ExpectColumnValuesToBeInSet(column="before_train_end", value_set=[True]), never()]),
        run_suite("cosession_queries", cos, [
            *(e.ExpectColumnValuesToNotBeNull(column=c) for c in ("q1", "q2", "sessions", "users")),
            e.ExpectColumnValuesToBeInSet(column="self_loop", value_set=[False]),
            e.ExpectColumnValuesToBeInSet(column="has_mirror", value_set=[True]),
            e.ExpectColumnValuesToBeBetween(column="sessions", min_value=1), never()]),
        run_suite("coclick_items", coclick, [
            *(e.ExpectColumnValuesToNotBeNull(column=c) for c in ("i1", "i2", "sessions")),
            e.ExpectColumnValuesToBeInSet(column="self_loop", value_set=[False]),
            e.ExpectColumnValuesToBeInSet(column="has_mirror", value_set=[True]), never()]),
    ]


def anchor_leak_suite(anchor_texts: dict[str, list[str]], test_texts: set[str]) -> SuiteResult:
    """No anchor of any set is a test-only document (RAMEN removes test documents from the graphs)."""
    import great_expectations as gx

    frame = pl.DataFrame([{"anchor_set": s, "text": t} for s, texts in anchor_texts.items() for t in texts],
                         schema={"anchor_set": pl.String, "text": pl.String}).with_columns(
        is_test_document=pl.col("text").is_in(list(test_texts)))
    return run_suite("anchor_sets_without_test_documents", frame,
                     [gx.expectations.ExpectColumnValuesToBeInSet(column="is_test_document", value_set=[False])])


def coverage_suite(table: pl.DataFrame, thresholds: list[Any]) -> SuiteResult:
    """Every thresholded (anchor set, node type, stage) row meets its minimum share with ≥ 1 anchor."""
    import great_expectations as gx

    wanted = pl.DataFrame([t.model_dump() for t in thresholds]) if thresholds else pl.DataFrame(
        schema={"anchor_set": pl.String, "node_type": pl.String, "stage": pl.String, "min_share": pl.Float64})
    frame = wanted.join(table, on=["anchor_set", "node_type", "stage"], how="left").with_columns(
        pl.col("share_ge1").fill_null(0.0)).with_columns(meets=pl.col("share_ge1") >= pl.col("min_share"))
    return run_suite("graph_coverage", frame, [
        gx.expectations.ExpectColumnValuesToBeInSet(column="meets", value_set=[True])])
