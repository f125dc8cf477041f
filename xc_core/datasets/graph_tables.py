"""Behaviour-graph tables built with duckdb SQL over the event store's Parquet files.

- ``click_graph(query, item, impressions, clicks, ctr, first_ts, last_ts, rank_in_query, rank_in_item)``
- ``cosession_queries(q1, q2, sessions, users)``: distinct queries asked in one session (symmetric)
- ``coclick_items(i1, i2, sessions)``: distinct items clicked in one session (symmetric)

Only events in the train window ``[train_start, train_end)`` enter, and every row records that window
(``train_start``, ``train_end`` columns), so a table can never be mistaken for one built on test data.

:func:`test_window_cosession` is the one table of the *test* window: for each test query, the queries asked
before it in the session of its first ask in ``[test_start, test_end)`` (rows record ``test_start``,
``test_end``) — the session context a serving system has when the query arrives, never a later session. It is
returned in memory to the data-set builder, which keeps only its links to existing anchors as
``AnchorSet.test_edges``; it is never written beside, nor mixed into, the train tables above.

Concurrent builds (two Dagster runs at once) are safe: each reads one snapshot of the store under its
shared lock, writes its own temp files, and publishes the three tables together under the exclusive lock,
unless the tables already published come from a newer store generation (``_published.json``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl
from pydantic import BaseModel, Field

from xc_core.logs.store import EventStore

TABLES = ("click_graph", "cosession_queries", "coclick_items")

LabelKey = Literal["item_id", "host"]
#: What a data set's labels are, as a duckdb expression over an event row: the item id itself, or the host of a
#: URL-like item id (lower-cased, no ``www.``; a bare host stays itself) — the aol-1000 protocol's label.
#: scheme, user info, then the host: its first group
HOST_PATTERN = r"^(?:[a-z][a-z0-9+.\-]*://)?(?:[^/@\s]*@)?([a-z0-9.\-_]+)"
_HOST = rf"regexp_replace(trim(regexp_extract(lower(item_id), '{HOST_PATTERN}', 1), '.'), '^www\.', '')"
LABEL_KEYS: dict[str, str] = {
    "item_id": "item_id",
    "host": f"CASE WHEN {_HOST} LIKE '%_._%' THEN {_HOST} END",  # a host has a dot; anything else has no key
}


def keyed_events(source: str, label: str) -> str:
    """``source``'s rows with ``item_id`` replaced by the label key (and, for a derived key, no item text: the
    key's text is derived too)."""
    if label == "item_id":
        return source
    return f"(SELECT * REPLACE ({LABEL_KEYS[label]} AS item_id, NULL::VARCHAR AS item_text) FROM {source})"


class GraphConfig(BaseModel):
    """Support thresholds. TextGNN keeps click edges with ≥ 50 impressions over a year of Bing logs; our
    logs are far smaller, so the defaults keep every observed edge and cap what one node can add."""

    min_impressions: int = Field(default=1, ge=1, description="click_graph: drop edges shown fewer times")
    min_clicks: int = Field(default=1, ge=0, description="click_graph: drop edges clicked fewer times")
    top_n: int = Field(default=20, ge=1, description="click_graph: keep an edge if in the top-n of either node")
    min_sessions: int = Field(default=1, ge=1, description="co-session/co-click: minimum distinct sessions")
    max_session_size: int = Field(default=30, ge=2,
                                  description="sessions with more distinct queries/items are skipped (bots)")
    markets: list[str] | None = Field(default=None, description="only these markets (None: all)")
    label: LabelKey = Field(default="item_id", description="the items' key: item_id, or the host of a URL")
    # Where the tables are computed: not part of what they are (excluded from the dump that marks published
    # tables and fingerprints data sets), since both engines give the same rows (tests/engines).
    engine: Literal["duckdb", "spark"] = Field(
        default_factory=lambda: os.environ.get("XC_GRAPH_ENGINE", "duckdb"), exclude=True,  # type: ignore[arg-type]
        description="duckdb (one machine, the default) or spark (pip install -e '.[scale]'); env XC_GRAPH_ENGINE")
    spark_master: str = Field(default_factory=lambda: os.environ.get("XC_SPARK_MASTER", "local[2]"), exclude=True,
                              description="the Spark master URL when engine is spark; env XC_SPARK_MASTER")


@dataclass(frozen=True)
class GraphTablesSummary:
    train_start: str
    train_end: str
    click_graph: int
    cosession_queries: int
    coclick_items: int
    seconds: float
    store_generation: int = 0
    published: bool = True

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _events_sql(store: EventStore) -> str:
    return f"read_parquet('{(store.events_dir / 'day=*' / 'events.parquet').as_posix()}', hive_partitioning=false)"


# The tables' SQL is written in what duckdb and Spark SQL both parse (engines/spark.py runs it on Spark).
def _click_graph_sql(cfg: GraphConfig) -> str:
    return f"""
    WITH edges AS (
      SELECT query_text AS query, item_id AS item,
             count(*) FILTER (WHERE impressed OR clicked) AS impressions,
             count(*) FILTER (WHERE clicked) AS clicks,
             min(ts) AS first_ts, max(ts) AS last_ts
      FROM train WHERE item_id IS NOT NULL GROUP BY ALL
      HAVING impressions >= {cfg.min_impressions} AND clicks >= {cfg.min_clicks}),
    ranked AS (
      SELECT *, CAST(clicks AS DOUBLE) / impressions AS ctr,
        CAST(row_number() OVER (PARTITION BY query ORDER BY CAST(clicks AS DOUBLE) / impressions DESC, clicks DESC,
                                item) AS BIGINT) AS rank_in_query,  -- BIGINT: Spark's row_number is an INT
        CAST(row_number() OVER (PARTITION BY item ORDER BY CAST(clicks AS DOUBLE) / impressions DESC, clicks DESC,
                                query) AS BIGINT) AS rank_in_item
      FROM edges)
    SELECT query, item, impressions, clicks, ctr, first_ts, last_ts, rank_in_query, rank_in_item
    FROM ranked WHERE rank_in_query <= {cfg.top_n} OR rank_in_item <= {cfg.top_n}
    ORDER BY query, rank_in_query"""


def _co_occurrence_sql(column: str, left: str, right: str, condition: str, with_users: bool,
                       cfg: GraphConfig, table: str = "train") -> str:
    users = ", count(DISTINCT a.user_id) AS users" if with_users else ""
    return f"""
    WITH members AS (SELECT DISTINCT session_id, user_id, {column} AS node FROM {table} WHERE {condition}),
    small AS (SELECT session_id FROM members GROUP BY session_id
              HAVING count(*) BETWEEN 2 AND {cfg.max_session_size})
    SELECT a.node AS {left}, b.node AS {right}, count(DISTINCT a.session_id) AS sessions{users}
    FROM members a JOIN members b ON a.session_id = b.session_id AND a.node <> b.node
    WHERE a.session_id IN (SELECT session_id FROM small)
    GROUP BY ALL HAVING count(DISTINCT a.session_id) >= {cfg.min_sessions}
    ORDER BY {left}, {right}"""


def build_graph_tables(store: EventStore, out_dir: Path, train_start: datetime, train_end: datetime,
                       cfg: GraphConfig | None = None, register: bool = True) -> GraphTablesSummary:
    """Write the three tables as Parquet under ``out_dir`` and (``register``) the store's duckdb views.

    ``published`` is False when a concurrent build from a newer store snapshot got there first; its
    tables are then the ones on disk, and the counts returned are theirs."""
    cfg = cfg or GraphConfig()
    started = time.perf_counter()
    if not store.days():
        raise FileNotFoundError(f"{store.events_dir}: the event store is empty — "
                                "run `xc ingest` or `xc simulate` first")
    out_dir.mkdir(parents=True, exist_ok=True)
    queries = {
        "click_graph": _click_graph_sql(cfg),
        "cosession_queries": _co_occurrence_sql("query_text", "q1", "q2", "TRUE", True, cfg),
        "coclick_items": _co_occurrence_sql("item_id", "i1", "i2", "clicked AND item_id IS NOT NULL", False, cfg),
    }
    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmps = {name: out_dir / f".{name}.parquet.tmp-{token}" for name in queries}
    try:
        if cfg.engine == "spark":
            generation = _build_on_spark(store, queries, tmps, train_start, train_end, cfg)
        else:
            generation = _build_on_duckdb(store, queries, tmps, train_start, train_end, cfg)
        built_from = {"store_generation": generation, "train_start": train_start.isoformat(),
                      "train_end": train_end.isoformat(), "config": cfg.model_dump()}
        published = _publish(store, out_dir, tmps, built_from, register)
    finally:
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)
    with duckdb.connect() as con:
        counts = {name: con.sql(f"SELECT count(*) FROM '{(out_dir / f'{name}.parquet').as_posix()}'").fetchall()[0][0]
                  for name in queries}
    return GraphTablesSummary(train_start=train_start.isoformat(), train_end=train_end.isoformat(),
                              seconds=round(time.perf_counter() - started, 3), store_generation=generation,
                              published=published, **counts)


def _build_on_duckdb(store: EventStore, queries: dict[str, str], tmps: dict[str, Path], train_start: datetime,
                     train_end: datetime, cfg: GraphConfig) -> int:
    """The tables into ``tmps``; the store generation they were read from."""
    with duckdb.connect() as con:
            con.execute("SET TimeZone = 'UTC'")
            markets = "" if cfg.markets is None else f" AND market IN ({', '.join('?' for _ in cfg.markets)})"
            with store.lock(shared=True):  # one snapshot: no writer between reading day files
                generation = store.generation()
                events = keyed_events(_events_sql(store), cfg.label)
                con.execute(f"CREATE TEMP TABLE train AS SELECT * FROM {events} WHERE ts >= ? AND ts < ?{markets}",
                            [train_start, train_end, *(cfg.markets or [])])
            for name, sql in queries.items():
                con.execute(f"COPY (SELECT *, ?::TIMESTAMPTZ AS train_start, ?::TIMESTAMPTZ AS train_end FROM "
                            f"({sql})) TO '{tmps[name].as_posix()}' (FORMAT parquet)", [train_start, train_end])
    return generation


def _build_on_spark(store: EventStore, queries: dict[str, str], tmps: dict[str, Path], train_start: datetime,
                    train_end: datetime, cfg: GraphConfig) -> int:
    """The same tables computed by Spark; the store is held (shared) for the whole build, since Spark reads the
    day files lazily, while the tables are computed."""
    from xc_core.engines.spark import build_tables, spark_session, train_events

    with spark_session(cfg.spark_master) as spark, store.lock(shared=True):
        generation = store.generation()
        day_files = sorted(store.events_dir.glob("day=*/events.parquet"))
        events = train_events(spark, day_files, train_start, train_end, cfg.markets,
                              HOST_PATTERN if cfg.label == "host" else None)
        build_tables(spark, events, queries, train_start, train_end, tmps)
    return generation


def test_window_cosession(con: duckdb.DuckDBPyConnection, events: str, params: list[object], test_start: datetime,
                          test_end: datetime, cfg: GraphConfig) -> pl.DataFrame:
    """``q1, q2, sessions, users, test_start, test_end``: the graph at inference of the test queries, as of each
    query's time. A test query ``q1`` is linked to the queries ``q2`` asked *before* it in the session
    of its first ask in the test window ``[test_start, test_end)`` — what a served model has when ``q1`` arrives:
    never a later session, nor what the user typed after it. Sessions keep the train tables' size limit; the
    support threshold (``min_sessions``) cannot apply to one session, so every such pair counts once. In memory
    only, in its own temp table (``test_window``), never a train table."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE test_window AS SELECT session_id, user_id, query_text, ts FROM "
                f"{events} WHERE ts >= ? AND ts < ?", [*params, test_start, test_end])
    sql = f"""
    WITH asks AS (SELECT session_id, user_id, query_text AS q, min(ts) AS ts FROM test_window GROUP BY ALL),
    first_ask AS (SELECT q, arg_min(session_id, ts) AS session_id, min(ts) AS ts FROM asks GROUP BY q),
    small AS (SELECT session_id FROM asks GROUP BY session_id HAVING count(*) BETWEEN 2 AND {cfg.max_session_size})
    SELECT f.q AS q1, b.q AS q2, count(DISTINCT b.session_id) AS sessions, count(DISTINCT b.user_id) AS users
    FROM first_ask f JOIN asks b ON b.session_id = f.session_id AND b.q <> f.q AND b.ts < f.ts
    WHERE f.session_id IN (SELECT session_id FROM small)
    GROUP BY ALL ORDER BY q1, q2"""
    table = con.sql(f"SELECT *, ?::TIMESTAMPTZ AS test_start, ?::TIMESTAMPTZ AS test_end FROM ({sql})",
                    params=[test_start, test_end]).to_arrow_table()
    con.execute("DROP TABLE test_window")
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


PUBLISHED = "_published.json"  # beside the tables: the store snapshot, train window and settings they come from


def _publish(store: EventStore, out_dir: Path, tmps: dict[str, Path], built_from: dict[str, Any],
             register: bool) -> bool:
    """Move the three tables into place together, unless those there come from a newer store snapshot."""
    marker = out_dir / PUBLISHED
    with store.lock():  # also serialises the duckdb view writes with the store's own
        if marker.exists() and json.loads(marker.read_text())["store_generation"] > built_from["store_generation"]:
            return False
        for name, tmp in tmps.items():
            tmp.replace(out_dir / f"{name}.parquet")
        marker_tmp = marker.with_name(f".{marker.name}.tmp-{os.getpid()}")
        marker_tmp.write_text(json.dumps(built_from))
        marker_tmp.replace(marker)
        if register:
            register_views(store.duckdb_path, out_dir)
    return True


def tables_current(store: EventStore, out_dir: Path, train_start: datetime, train_end: datetime,
                   cfg: GraphConfig) -> bool:
    """Whether the tables in ``out_dir`` were built from the store as it is now, for this train window and
    these settings (then a consumer reads them instead of building them a second time)."""
    marker = out_dir / PUBLISHED
    if not marker.exists() or any(not (out_dir / f"{name}.parquet").exists() for name in TABLES):
        return False
    built_from = json.loads(marker.read_text())
    return built_from == {"store_generation": store.generation(), "train_start": train_start.isoformat(),
                          "train_end": train_end.isoformat(), "config": cfg.model_dump()}


def register_views(duckdb_path: Path, out_dir: Path) -> None:
    with duckdb.connect(str(duckdb_path)) as con:
        for name in TABLES:
            path = out_dir / f"{name}.parquet"
            if path.exists():
                con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet('{path.as_posix()}')")
