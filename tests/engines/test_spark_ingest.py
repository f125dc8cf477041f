"""Ingestion with Spark as its engine (issue #42): the sources validated on Spark's executors by the default engine's
own code, the duplicates across files found by a Spark job, the store merged as by default — the same store row for
row, the same summary and the same quarantine reasons as the default engine, on a real aol-1000 slice and on event
files with bad rows and files that repeat each other's events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from xc_core.logs.ingest import IngestSummary, Source
from xc_core.logs.store import EventStore

pytest.importorskip("pyspark", reason="engine 'spark' is the optional extra: pip install -e '.[scale]'")

COUNTS = ("query_events", "clicks", "read", "accepted", "rejected", "outside_window", "reasons", "flagged", "stored",
          "already_stored", "days_written", "first_event", "last_event", "rejected_files")


@pytest.fixture(scope="module", autouse=True)
def one_jvm() -> Iterator[None]:
    """One Spark session for the module (a JVM start is ~10 s): ingestion uses the active session."""
    from xc_core.engines.spark import spark_session

    with spark_session("local[2]"):
        yield


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
