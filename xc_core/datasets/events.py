"""XC data sets from a canonical event log (the simulator's, aol-1000, or any ads log).

Documents are query texts, labels are items (ads, keywords, clicked hosts). Temporal split: train is
every event before ``split``; a test document is a query text clicked at or after ``split``, its
labels the items clicked for it then. The label universe is every item clicked in either period, so
items first clicked in test are *novel labels* (reachable only through their text: IRENE's case).

Anchor sets come from the train-window graph tables (:mod:`xc_core.datasets.graph_tables`):

- ``cosession_queries`` — anchors are query texts. Document side: the query's co-session queries.
- ``click_graph`` — anchors are query texts. Label side: the train queries that clicked the item. Named for
  what it is: these (query, item) pairs are training pairs, so this set adds labelled pairs a subsampled
  trainer would not otherwise see rather than new graph signal (the ``dual_encoder_anchor_pairs`` control
  trains on exactly those pairs).
- ``coclick_items`` — anchors are item texts. Label side: items co-clicked in one session.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import scipy.sparse as sp
from pydantic import BaseModel, Field

from xc_core.datasets.container import DEFAULT_PSP, AnchorSet, XCDataset
from xc_core.datasets.graph_tables import GraphConfig, build_graph_tables, tables_current
from xc_core.logs.store import EventStore

log = logging.getLogger(__name__)


class EventsDatasetConfig(BaseModel):
    name: str = Field(description="data set name (also the graph-table folder)")
    markets: list[str] | None = Field(default=None, description="markets to use (None: all)")
    split: datetime | None = Field(default=None, description="first test instant (None: last test_days days)")
    test_days: int = Field(default=7, ge=1, description="test period length when split is not given")
    doc_anchors: int = Field(default=20, ge=1, description="native anchors kept per document (by support)")
    label_anchors: int = Field(default=20, ge=1, description="native anchors kept per label (by support)")
    graph: GraphConfig = Field(default_factory=GraphConfig)
    psp_A: float = Field(default=DEFAULT_PSP[0], description="inverse-propensity A (pyxclib default)")
    psp_B: float = Field(default=DEFAULT_PSP[1], description="inverse-propensity B (pyxclib default)")
    protocol: str = Field(default="events", description="name of the protocol followed")


def aol_1000_config() -> EventsDatasetConfig:
    """The aol-1000 protocol of ``shared/data/README.md``: train before 2006-05-01, PSP A=0.55, B=1.5."""
    from datetime import UTC

    return EventsDatasetConfig(name="aol-1000", markets=["en-US"], split=datetime(2006, 5, 1, tzinfo=UTC),
                               protocol="aol-1000")


def _events_sql(store: EventStore, markets: list[str] | None) -> tuple[str, list[object]]:
    glob = (store.events_dir / "day=*" / "events.parquet").as_posix()
    where = "" if markets is None else f" WHERE market IN ({', '.join('?' for _ in markets)})"
    return f"(SELECT * FROM read_parquet('{glob}'){where})", list(markets or [])


def _window(con: duckdb.DuckDBPyConnection, source: str, params: list[object],
            cfg: EventsDatasetConfig) -> tuple[datetime, datetime, datetime]:
    first, last = con.sql(f"SELECT min(ts), max(ts) FROM {source}", params=params).fetchall()[0]
    if first is None:
        raise ValueError(f"no events for markets {cfg.markets}: ingest or simulate them first")
    split = cfg.split or datetime.combine((last - timedelta(days=cfg.test_days - 1)).date(), datetime.min.time(),
                                          tzinfo=last.tzinfo)
    if not first < split <= last:
        raise ValueError(f"split {split} is outside the events' range [{first}, {last}]")
    return first, split, last + timedelta(microseconds=1)


def _pairs(con: duckdb.DuckDBPyConnection, source: str, params: list[object], lo: datetime,
           hi: datetime) -> pl.DataFrame:
    return _frame(
        con, f"SELECT query_text AS query, item_id AS item, any_value(item_text) AS item_text, count(*) AS clicks "
        f"FROM {source} WHERE clicked AND item_id IS NOT NULL AND ts >= ? AND ts < ? GROUP BY ALL ORDER BY ALL",
        [*params, lo, hi])


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> pl.DataFrame:
    frame = pl.from_arrow(con.sql(sql, params=params).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def _index(values: list[str]) -> dict[str, int]:
    return {v: i for i, v in enumerate(values)}


def _matrix(pairs: pl.DataFrame, docs: dict[str, int], labels: dict[str, int]) -> sp.csr_matrix:
    rows = pairs.get_column("query").replace_strict(docs, return_dtype=pl.Int64).to_numpy()
    cols = pairs.get_column("item").replace_strict(labels, return_dtype=pl.Int64).to_numpy()
    m = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(docs), len(labels)))
    m.sum_duplicates()
    m.data[:] = 1.0
    return m


def _top_edges(table: pl.DataFrame, left: str, right: str, support: str, limit: int) -> pl.DataFrame:
    return (table.sort([left, support, right], descending=[False, True, False])
            .group_by(left, maintain_order=True).head(limit).select(left, right))


def _anchor_set(name: str, doc_pairs: pl.DataFrame | None, label_pairs: pl.DataFrame | None,
                docs: dict[str, int], labels: dict[str, int]) -> AnchorSet:
    """Edges given as (node key, anchor text) frames with columns ``node, anchor``."""
    frames = [f for f in (doc_pairs, label_pairs) if f is not None]
    texts = sorted(set(pl.concat([f.get_column("anchor") for f in frames]).to_list())) if frames else []
    anchor_ix = _index(texts)

    def edges(pairs: pl.DataFrame | None, nodes: dict[str, int]) -> np.ndarray:
        if pairs is None:
            return np.empty((0, 2), np.int64)
        pairs = pairs.filter(pl.col("node").is_in(list(nodes)))
        return np.stack([pairs.get_column("node").replace_strict(nodes, return_dtype=pl.Int64).to_numpy(),
                         pairs.get_column("anchor").replace_strict(anchor_ix, return_dtype=pl.Int64).to_numpy()],
                        axis=1)

    return AnchorSet(name, texts, edges(doc_pairs, docs), edges(label_pairs, labels))


def _deciles(con: duckdb.DuckDBPyConnection, source: str, params: list[object]) -> dict[str, int]:
    """Query decile by traffic (RAMEN Table 1): queries sorted by frequency, each decile ~10% of events."""
    freq = _frame(con, f"SELECT query_text AS q, count(*) AS n FROM {source} GROUP BY 1 ORDER BY n DESC, q", params)
    share = freq.get_column("n").cum_sum() / freq.get_column("n").sum()
    decile = ((share - freq.get_column("n") / freq.get_column("n").sum()) * 10).floor().cast(pl.Int64).clip(0, 9)
    return dict(zip(freq.get_column("q").to_list(), decile.to_list(), strict=True))


def event_window(store: EventStore, cfg: EventsDatasetConfig) -> tuple[datetime, datetime, datetime]:
    """(first event, split, end) of the data set's events: train is [first, split), test [split, end)."""
    source, params = _events_sql(store, cfg.markets)
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        return _window(con, source, params, cfg)


def build_events_dataset(store: EventStore, graphs_dir: Path, cfg: EventsDatasetConfig) -> XCDataset:
    """Build the XC data set over its train-window graph tables under ``graphs_dir``: those already there when
    they come from the store as it is now with the same window and settings (Dagster's graph-table asset, checked
    before this runs), else built here."""
    source, params = _events_sql(store, cfg.markets)
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        first, split, end = _window(con, source, params, cfg)
        train, test = _pairs(con, source, params, first, split), _pairs(con, source, params, split, end)
        deciles = _deciles(con, source, params)
        seen = set(_frame(con, f"SELECT DISTINCT query_text AS q FROM {source} WHERE ts < ?", [*params, split])
                   .get_column("q").to_list())
    graph_cfg = cfg.graph.model_copy(update={"markets": cfg.markets})
    if not tables_current(store, graphs_dir, first, split, graph_cfg):
        build_graph_tables(store, graphs_dir, first, split, graph_cfg)
    labels_frame = (pl.concat([train, test]).group_by("item").agg(pl.col("item_text").drop_nulls().first())
                    .sort("item"))
    label_ids = labels_frame.get_column("item").to_list()
    label_texts = [t or i for t, i in zip(labels_frame.get_column("item_text").to_list(), label_ids, strict=True)]
    train_docs = sorted(set(train.get_column("query").to_list()))
    test_docs = sorted(set(test.get_column("query").to_list()))
    d_ix, t_ix, l_ix = _index(train_docs), _index(test_docs), _index(label_ids)

    cos = pl.read_parquet(graphs_dir / "cosession_queries.parquet")
    click = pl.read_parquet(graphs_dir / "click_graph.parquet")
    coclick = pl.read_parquet(graphs_dir / "coclick_items.parquet")
    cos_doc = _top_edges(cos, "q1", "q2", "sessions", cfg.doc_anchors).rename({"q1": "node", "q2": "anchor"})
    cos_lbl = _top_edges(click.filter(pl.col("clicks") > 0), "item", "query", "clicks", cfg.label_anchors).rename(
        {"item": "node", "query": "anchor"})
    item_text = dict(zip(label_ids, label_texts, strict=True))
    coclick_lbl = _top_edges(coclick, "i1", "i2", "sessions", cfg.label_anchors).with_columns(
        pl.col("i2").replace_strict(item_text, default=pl.col("i2"))).rename({"i1": "node", "i2": "anchor"})
    anchors = {
        "cosession_queries": _anchor_set("cosession_queries", cos_doc, None, d_ix, l_ix),
        "click_graph": _anchor_set("click_graph", None, cos_lbl, d_ix, l_ix),
        "coclick_items": _anchor_set("coclick_items", None, coclick_lbl, d_ix, l_ix),
    }
    dataset = XCDataset(
        name=cfg.name, train_texts=train_docs, test_texts=test_docs, label_texts=label_texts,
        y_train=_matrix(train, d_ix, l_ix), y_test=_matrix(test, t_ix, l_ix),
        train_ids=[f"q:{q}" for q in train_docs], test_ids=[f"q:{q}" for q in test_docs], label_ids=label_ids,
        anchor_sets=anchors, test_novel=np.array([q not in seen for q in test_docs], dtype=bool),
        test_decile=np.array([deciles.get(q, 9) for q in test_docs], dtype=np.int64),
        meta={"protocol": cfg.protocol, "psp_A": cfg.psp_A, "psp_B": cfg.psp_B, "markets": cfg.markets,
              "train_start": first.isoformat(), "split": split.isoformat(), "test_end": end.isoformat(),
              "graphs_dir": str(graphs_dir),
              "anchor_spaces": {"cosession_queries": "documents", "click_graph": "documents",
                                "coclick_items": "labels"}},
    )
    log.info("built %s", dataset.summary())
    return dataset
