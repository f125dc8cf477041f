"""Graph tables on a hand-built event log, with every expected count worked out by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from xc_core.datasets.graph_tables import GraphConfig, build_graph_tables
from xc_core.logs.ingest import Source, ingest
from xc_core.logs.store import EventStore

TRAIN_START, TRAIN_END = datetime(2006, 3, 1, tzinfo=UTC), datetime(2006, 3, 10, tzinfo=UTC)


def _event(ts: str, user: str, query: str, item: str | None, position: int | None, clicked: bool) -> dict[str, object]:
    return {"ts": ts, "user_id": user, "market": "MC-1", "query_text": query, "item_id": item,
            "item_text": item, "position": position, "impressed": item is not None, "clicked": clicked}


EVENTS = [
    # u1, session A (03-01 10:00-10:05): "red shoes" then "crimson sneakers"; clicks k1 then k2
    _event("2006-03-01 10:00:00", "u1", "red shoes", "k1", 1, True),
    _event("2006-03-01 10:00:00", "u1", "red shoes", "k2", 2, False),
    _event("2006-03-01 10:05:00", "u1", "crimson sneakers", "k2", 1, True),
    # u2, session B: same two queries, clicks k1 on both
    _event("2006-03-02 09:00:00", "u2", "red shoes", "k1", 1, True),
    _event("2006-03-02 09:01:00", "u2", "crimson sneakers", "k1", 1, True),
    # u2, session C (an hour later): a lone query, no ad shown
    _event("2006-03-02 10:30:00", "u2", "shoe repair", None, None, False),
    # test period: must never enter any table
    _event("2006-03-12 09:00:00", "u3", "red shoes", "k9", 1, True),
    _event("2006-03-12 09:01:00", "u3", "leaky query", "k9", 1, True),
]


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    summary = ingest([Source("events", path)], tmp_path / "home", progress=False)
    assert summary.rejected == 0
    return EventStore(tmp_path / "home")


def test_click_graph_counts_impressions_clicks_and_ctr(store: EventStore, tmp_path: Path) -> None:
    summary = build_graph_tables(store, tmp_path / "g", TRAIN_START, TRAIN_END, GraphConfig(min_clicks=0))
    click = pl.read_parquet(tmp_path / "g" / "click_graph.parquet").sort("query", "item")
    rows = click.select("query", "item", "impressions", "clicks", "ctr").rows()
    assert rows == [
        ("crimson sneakers", "k1", 1, 1, 1.0),
        ("crimson sneakers", "k2", 1, 1, 1.0),
        ("red shoes", "k1", 2, 2, 1.0),
        ("red shoes", "k2", 1, 0, 0.0),
    ]
    assert summary.click_graph == 4
    ranks = dict(zip(click.select(pl.concat_str("query", "item")).to_series(), click.get_column("rank_in_query"),
                     strict=True))
    assert ranks["red shoesk1"] == 1 and ranks["red shoesk2"] == 2


def test_click_graph_min_clicks_and_top_n_filters(store: EventStore, tmp_path: Path) -> None:
    build_graph_tables(store, tmp_path / "g", TRAIN_START, TRAIN_END, GraphConfig(min_clicks=1, top_n=1))
    click = pl.read_parquet(tmp_path / "g" / "click_graph.parquet")
    # ("red shoes", k2) has no click; ("crimson sneakers", k1/k2) tie on ctr and clicks → k1 wins
    # for the query, but each stays because it is the top edge of k1's or k2's own list.
    assert set(click.select("query", "item").rows()) == {("red shoes", "k1"), ("crimson sneakers", "k1"),
                                                         ("crimson sneakers", "k2")}


def test_cosession_and_coclick_are_symmetric_and_count_distinct_sessions(store: EventStore, tmp_path: Path) -> None:
    build_graph_tables(store, tmp_path / "g", TRAIN_START, TRAIN_END)
    cos = pl.read_parquet(tmp_path / "g" / "cosession_queries.parquet")
    assert sorted(cos.select("q1", "q2", "sessions", "users").rows()) == [
        ("crimson sneakers", "red shoes", 2, 2), ("red shoes", "crimson sneakers", 2, 2)]
    coclick = pl.read_parquet(tmp_path / "g" / "coclick_items.parquet")
    # only session A clicked two distinct items (k1, k2); session B clicked k1 twice
    assert sorted(coclick.select("i1", "i2", "sessions").rows()) == [("k1", "k2", 1), ("k2", "k1", 1)]


def test_no_test_period_event_enters_any_table_and_windows_are_recorded(store: EventStore, tmp_path: Path) -> None:
    build_graph_tables(store, tmp_path / "g", TRAIN_START, TRAIN_END)
    for name in ("click_graph", "cosession_queries", "coclick_items"):
        table = pl.read_parquet(tmp_path / "g" / f"{name}.parquet")
        text = " ".join(str(v) for v in table.drop("train_start", "train_end").rows())
        assert "k9" not in text and "leaky query" not in text
        assert table.get_column("train_end").unique().to_list() == [TRAIN_END]
        if "last_ts" in table.columns:
            assert table.get_column("last_ts").max() < TRAIN_END


def test_graph_tables_are_queryable_as_duckdb_views(store: EventStore, tmp_path: Path) -> None:
    import duckdb

    build_graph_tables(store, tmp_path / "g", TRAIN_START, TRAIN_END)
    with duckdb.connect(str(store.duckdb_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM cosession_queries").fetchone() == (2,)


def test_a_build_from_an_older_store_snapshot_never_replaces_a_newer_one(store: EventStore, tmp_path: Path) -> None:
    out = tmp_path / "g"
    assert store.generation() == 1  # one ingestion wrote once
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps(_event("2006-03-03 08:00:00", "u4", "red shoes", "k3", 1, True)) + "\n")
    ingest([Source("events", more)], store.home, progress=False)
    assert store.generation() == 2
    newer = build_graph_tables(store, out, TRAIN_START, TRAIN_END, GraphConfig(min_clicks=0))
    assert newer.published and newer.store_generation == 2 and newer.click_graph == 5
    # a concurrent run whose snapshot predates the second ingestion finishes last: it must not publish
    (store.home / ".generation").write_text("1")
    (store.home / "events" / "day=2006-03-03" / "events.parquet").rename(tmp_path / "hidden.parquet")
    older = build_graph_tables(store, out, TRAIN_START, TRAIN_END, GraphConfig(min_clicks=0))
    assert not older.published and older.click_graph == 5  # the newer tables stay, and are what it reports
    assert pl.read_parquet(out / "click_graph.parquet").height == 5
    assert not list(out.glob(".*tmp*"))
