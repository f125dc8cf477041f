"""The graph tables on Spark (``local[2]``, loopback) equal the duckdb tables row for row (issue #42): on the
simulated event log (item ids) and on a real slice of aol-1000 (URL hosts as labels); Spark's sessions equal the
ids ingestion stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from xc_core.datasets.graph_tables import TABLES, GraphConfig, GraphTablesSummary, build_graph_tables
from xc_core.logs.store import EventStore

pytest.importorskip("pyspark", reason="engine 'spark' is the optional extra: pip install -e '.[scale]'")


@pytest.fixture(scope="module", autouse=True)
def one_jvm() -> Iterator[None]:
    """One Spark session for the module (a JVM start is ~10 s): the builds use the active session."""
    from xc_core.engines.spark import spark_session

    with spark_session("local[2]"):
        yield


def _tables(folder: Path) -> dict[str, pl.DataFrame]:
    frames = {name: pl.read_parquet(folder / f"{name}.parquet") for name in TABLES}
    return {name: frame.sort(frame.columns[:2]) for name, frame in frames.items()}


Built = tuple[GraphTablesSummary, dict[str, pl.DataFrame]]


def _both_engines(store: EventStore, tmp_path: Path, **settings: object) -> tuple[Built, Built]:
    """The three tables of the store's first two thirds of days, by each engine."""
    from datetime import UTC, datetime, time

    days = store.days()
    start = datetime.combine(days[0], time(), UTC)
    end = datetime.combine(days[len(days) * 2 // 3], time(), UTC)
    built: dict[str, Built] = {}
    for engine in ("duckdb", "spark"):
        cfg = GraphConfig(engine=engine, spark_master="local[2]", **settings)  # type: ignore[arg-type]
        summary = build_graph_tables(store, tmp_path / engine, start, end, cfg, register=False)
        built[engine] = (summary, _tables(tmp_path / engine))
    return built["duckdb"], built["spark"]


def _assert_equal(duck: dict[str, pl.DataFrame], spark: dict[str, pl.DataFrame]) -> None:
    for name in TABLES:
        assert duck[name].schema == spark[name].schema, (name, duck[name].schema, spark[name].schema)
        assert duck[name].height > 0, f"{name}: empty, the comparison would prove nothing"
        assert duck[name].equals(spark[name]), name


def test_spark_builds_the_simulated_logs_tables_row_for_row(tiny_home: Path, tmp_path: Path) -> None:
    (duck_summary, duck), (spark_summary, spark) = _both_engines(EventStore(tiny_home), tmp_path, top_n=5)
    _assert_equal(duck, spark)
    assert spark_summary.click_graph == duck_summary.click_graph


def test_spark_builds_aol_host_label_tables_row_for_row(aol_slice: Path, tmp_path: Path) -> None:
    from xc_core.logs.ingest import Source, ingest

    ingest([Source("aol", aol_slice)], tmp_path / "home", progress=False)
    (_, duck), (_, spark) = _both_engines(EventStore(tmp_path / "home"), tmp_path, label="host")
    _assert_equal(duck, spark)


def test_the_engine_is_not_part_of_what_the_tables_are() -> None:
    """Published tables and data-set fingerprints read ``GraphConfig.model_dump()``: the engine that computed
    them must not make the same tables look different."""
    assert GraphConfig(engine="spark").model_dump() == GraphConfig(engine="duckdb").model_dump()


def test_spark_cuts_the_sessions_ingestion_stored(tiny_home: Path) -> None:
    from pyspark.sql import SparkSession

    from xc_core.logs.sessions import sessionise_on_spark

    spark = SparkSession.getActiveSession()
    assert spark is not None
    store = EventStore(tiny_home)
    events = spark.read.parquet(*(p.as_posix() for p in sorted(store.events_dir.glob("day=*/events.parquet"))))
    recut = sessionise_on_spark(spark, events, 30).select("event_id", "session_id").toPandas()
    stored = store.scan().select("event_id", "session_id").collect().to_pandas()
    both = stored.merge(recut, on="event_id", suffixes=("", "_spark"))
    assert len(both) == len(stored) == len(recut) and stored["session_id"].nunique() > 50
    assert (both["session_id"] == both["session_id_spark"]).all()
