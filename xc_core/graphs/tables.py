"""Behaviour-graph tables built with duckdb SQL over the event store's Parquet files.

- ``click_graph(query, item, impressions, clicks, ctr, first_ts, last_ts, rank_in_query, rank_in_item)``
- ``cosession_queries(q1, q2, sessions, users)``: distinct queries asked in one session (symmetric)
- ``coclick_items(i1, i2, sessions)``: distinct items clicked in one session (symmetric)

Only events in the train window ``[train_start, train_end)`` enter, and every row records that window
(``train_start``, ``train_end`` columns), so a table can never be mistaken for one built on test data.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import duckdb
from pydantic import BaseModel, Field

from xc_core.logs.store import EventStore

TABLES = ("click_graph", "cosession_queries", "coclick_items")


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


@dataclass(frozen=True)
class GraphTablesSummary:
    train_start: str
    train_end: str
    click_graph: int
    cosession_queries: int
    coclick_items: int
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _events_sql(store: EventStore) -> str:
    return f"read_parquet('{(store.events_dir / 'day=*' / 'events.parquet').as_posix()}', hive_partitioning=false)"


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
      SELECT *, clicks::DOUBLE / impressions AS ctr,
        row_number() OVER (PARTITION BY query ORDER BY clicks::DOUBLE / impressions DESC, clicks DESC, item) AS rank_in_query,
        row_number() OVER (PARTITION BY item ORDER BY clicks::DOUBLE / impressions DESC, clicks DESC, query) AS rank_in_item
      FROM edges)
    SELECT query, item, impressions, clicks, ctr, first_ts, last_ts, rank_in_query, rank_in_item
    FROM ranked WHERE rank_in_query <= {cfg.top_n} OR rank_in_item <= {cfg.top_n}
    ORDER BY query, rank_in_query"""


def _co_occurrence_sql(column: str, left: str, right: str, condition: str, with_users: bool,
                       cfg: GraphConfig) -> str:
    users = ", count(DISTINCT a.user_id) AS users" if with_users else ""
    return f"""
    WITH members AS (SELECT DISTINCT session_id, user_id, {column} AS node FROM train WHERE {condition}),
    small AS (SELECT session_id FROM members GROUP BY session_id
              HAVING count(*) BETWEEN 2 AND {cfg.max_session_size})
    SELECT a.node AS {left}, b.node AS {right}, count(DISTINCT a.session_id) AS sessions{users}
    FROM members a JOIN members b ON a.session_id = b.session_id AND a.node <> b.node
    WHERE a.session_id IN (SELECT session_id FROM small)
    GROUP BY ALL HAVING count(DISTINCT a.session_id) >= {cfg.min_sessions}
    ORDER BY {left}, {right}"""


def build_graph_tables(store: EventStore, out_dir: Path, train_start: datetime, train_end: datetime,
                       cfg: GraphConfig | None = None) -> GraphTablesSummary:
    """Write the three tables as Parquet under ``out_dir`` and register duckdb views over them."""
    cfg = cfg or GraphConfig()
    started = time.perf_counter()
    if not store.days():
        raise FileNotFoundError(f"{store.events_dir}: the event store is empty — run `xc ingest` or `xc simulate` first")
    out_dir.mkdir(parents=True, exist_ok=True)
    queries = {
        "click_graph": _click_graph_sql(cfg),
        "cosession_queries": _co_occurrence_sql("query_text", "q1", "q2", "TRUE", True, cfg),
        "coclick_items": _co_occurrence_sql("item_id", "i1", "i2", "clicked AND item_id IS NOT NULL", False, cfg),
    }
    counts: dict[str, int] = {}
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        markets = "" if cfg.markets is None else f" AND market IN ({', '.join('?' for _ in cfg.markets)})"
        con.execute(f"CREATE TEMP TABLE train AS SELECT * FROM {_events_sql(store)} WHERE ts >= ? AND ts < ?{markets}",
                    [train_start, train_end, *(cfg.markets or [])])
        for name, sql in queries.items():
            target = out_dir / f"{name}.parquet"
            tmp = out_dir / f".{name}.parquet.tmp"
            con.execute(f"COPY (SELECT *, ?::TIMESTAMPTZ AS train_start, ?::TIMESTAMPTZ AS train_end FROM ({sql})) "
                        f"TO '{tmp.as_posix()}' (FORMAT parquet)", [train_start, train_end])
            tmp.replace(target)
            counts[name] = con.sql(f"SELECT count(*) FROM '{target.as_posix()}'").fetchall()[0][0]
    register_views(store.duckdb_path, out_dir)
    return GraphTablesSummary(train_start=train_start.isoformat(), train_end=train_end.isoformat(),
                              seconds=round(time.perf_counter() - started, 3), **counts)


def register_views(duckdb_path: Path, out_dir: Path) -> None:
    with duckdb.connect(str(duckdb_path)) as con:
        for name in TABLES:
            path = out_dir / f"{name}.parquet"
            if path.exists():
                con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet('{path.as_posix()}')")
