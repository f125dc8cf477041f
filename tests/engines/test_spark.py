"""Spark as an engine (issue #42), against the default engines row for row, in one module so that one worker starts
one JVM (a start and its warm-up are 15-30 s of a test run's CPU):

- the graph tables on Spark (``local[2]``, loopback) equal the duckdb tables: on the simulated event log (item ids)
  and on a real slice of aol-1000 (URL hosts as labels); Spark's sessions equal the ids ingestion stored;
- ingestion with Spark as its engine: the sources validated on Spark's executors by the default engine's own code,
  the duplicates across files found by a Spark job, the store merged as by default: the same store, summary and
  quarantine reasons as the default engine, on a real aol-1000 slice and on event files with bad rows and files
  that repeat each other's events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from xc_core.datasets.graph_tables import TABLES, GraphConfig, GraphTablesSummary, build_graph_tables
from xc_core.logs.ingest import IngestSummary, Source
from xc_core.logs.store import EventStore

pytest.importorskip("pyspark", reason="engine 'spark' is the optional extra: pip install -e '.[scale]'")

COUNTS = ("query_events", "clicks", "read", "accepted", "rejected", "outside_window", "reasons", "flagged", "stored",
          "already_stored", "days_written", "first_event", "last_event", "rejected_files")


@pytest.fixture(scope="module", autouse=True)
def one_jvm() -> Iterator[None]:
    """One Spark session for the module: the builds and ingestion use the active session."""
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


def _both(sources: list[Source], tmp_path: Path) -> tuple[tuple[IngestSummary, pl.DataFrame, pl.DataFrame], ...]:
    from xc_core.logs.config import IngestConfig
    from xc_core.stages.ingest import ingest_files

    out = []
    for engine in ("default", "spark"):
        home = tmp_path / engine
        # the stage's entry point (`xc ingest --engine`, the raw_events asset) picks the engine from the config
        summary = ingest_files(sources, home, IngestConfig(engine=engine))
        store = EventStore(home)
        events = store.scan().collect().sort("event_id")
        quarantine = pl.read_parquet(store.quarantine_path) if store.quarantine_path.exists() else pl.DataFrame()
        out.append((summary, events, quarantine))
    return tuple(out)


def _assert_same(default: tuple[IngestSummary, pl.DataFrame, pl.DataFrame],
                 spark: tuple[IngestSummary, pl.DataFrame, pl.DataFrame]) -> None:
    assert default[1].height > 0, "an empty store would prove nothing"
    assert default[1].equals(spark[1]), "the stores differ"
    for key in COUNTS:
        assert getattr(spark[0], key) == getattr(default[0], key), key
    reasons = [q.group_by("reason", "disposition").len().sort("reason", "disposition") for q in (default[2], spark[2])]
    assert reasons[0].equals(reasons[1]), (reasons[0], reasons[1])


def test_spark_ingests_an_aol_slice_as_the_default_engine(aol_slice: Path, tmp_path: Path) -> None:
    _assert_same(*_both([Source("aol", aol_slice)], tmp_path))


def test_spark_ingests_event_files_that_repeat_each_other_as_the_default_engine(tiny_home: Path,
                                                                                tmp_path: Path) -> None:
    stored = EventStore(tiny_home).scan().collect().sort("ts", "event_id")
    rows = stored.select("ts", "user_id", "market", "query_text", "item_id", "item_text", "position", "impressed",
                         "clicked").head(3000)
    third = rows.height // 3
    bad = rows.head(3).with_columns(user_id=pl.lit(None, pl.String))  # no user: quarantined
    parts = [rows.slice(0, 2 * third), pl.concat([rows.slice(third, 2 * third), bad]), rows.slice(2 * third)]
    folder = tmp_path / "logs"
    folder.mkdir()
    paths = [folder / "a.parquet", folder / "b.jsonl", folder / "c.csv"]
    parts[0].write_parquet(paths[0])
    parts[1].with_columns(pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f")).write_ndjson(paths[1])
    parts[2].write_csv(paths[2])
    default, spark = _both([Source("events", p) for p in paths], tmp_path)
    _assert_same(default, spark)
    assert default[0].reasons.get("duplicate_event", 0) >= third, "files b and c repeat a and b: the test needs it"
    assert default[0].reasons.get("missing_field", 0) == 3
