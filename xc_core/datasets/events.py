"""XC data sets from a canonical event log (the simulator's, aol-1000, or any ads log).

Documents are query texts, labels are items (ads, keywords, clicked hosts). Temporal split: train is
every event before ``split``; a test document is a query text clicked at or after ``split``, its
labels the items clicked for it then. The label universe is every item clicked in either period, so
items first clicked in test are *novel labels* (reachable only through their text: IRENE's case).

Anchor sets come from the train-window graph tables (:mod:`xc_core.datasets.graph_tables`):

- ``cosession_queries`` — anchors are query texts. Document side: the query's co-session queries. Test
  edges (``AnchorSet.test_edges``, the graph at inference only): the queries asked before a test query in the
  session of its first test-window ask (:func:`~xc_core.datasets.graph_tables.test_window_cosession`) that are
  already anchors of the set, at most ``doc_anchors`` — the session context a serving system has when the query
  arrives (no later session, nothing typed after it). The train
  tables and the train-document edges never see the test window.
- ``click_graph`` — anchors are query texts. Label side: the train queries that clicked the item. Named for
  what it is: these (query, item) pairs are training pairs, so this set adds labelled pairs a subsampled
  trainer would not otherwise see rather than new graph signal (the ``dual_encoder_anchor_pairs`` control
  trains on exactly those pairs).
- ``coclick_items`` — anchors are item texts. Label side: items co-clicked in one session.

The label-side sets have no test edges.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import scipy.sparse as sp
from pydantic import BaseModel, Field

from xc_core.datasets.container import DEFAULT_PSP, AnchorSet, XCDataset
from xc_core.datasets.graph_tables import (
    GraphConfig,
    LabelKey,
    build_graph_tables,
    keyed_events,
    tables_current,
    test_window_cosession,
)
from xc_core.logs.store import EventStore

log = logging.getLogger(__name__)


class EventsDatasetConfig(BaseModel):
    name: str = Field(description="data set name (also the graph-table folder)")
    markets: list[str] | None = Field(default=None, description="markets to use (None: all)")
    split: datetime | None = Field(default=None, description="first test instant (None: last test_days days)")
    test_days: int = Field(default=7, ge=1, description="test period length when split is not given")
    label: LabelKey = Field(default="item_id", description="what a label is: the item id, or the host of a "
                                                           "URL-like item id (its text: the host's words)")
    min_clicks: int = Field(default=1, ge=1, description="a label needs this many clicks in the window")
    min_impressions: int = Field(default=0, ge=0, description="a label needs this many impressions in the window")
    doc_anchors: int = Field(default=20, ge=1, description="native anchors kept per document (by support)")
    label_anchors: int = Field(default=20, ge=1, description="native anchors kept per label (by support)")
    graph: GraphConfig = Field(default_factory=GraphConfig)
    psp_A: float = Field(default=DEFAULT_PSP[0], description="inverse-propensity A (pyxclib default)")
    psp_B: float = Field(default=DEFAULT_PSP[1], description="inverse-propensity B (pyxclib default)")
    protocol: str = Field(default="events", description="name of the protocol followed")

    def graph_config(self) -> GraphConfig:
        """The graph tables' settings with this data set's markets and label key."""
        return self.graph.model_copy(update={"markets": self.markets, "label": self.label})


class DatasetProtocolError(LookupError, ValueError):
    """A data-set definition that selects nothing usable from the store (the message names the fix; a LookupError:
    the CLI prints one line)."""


def _events_sql(store: EventStore, markets: list[str] | None, label: str = "item_id") -> tuple[str, list[object]]:
    glob = (store.events_dir / "day=*" / "events.parquet").as_posix()
    where = "" if markets is None else f" WHERE market IN ({', '.join('?' for _ in markets)})"
    return keyed_events(f"(SELECT * FROM read_parquet('{glob}'){where})", label), list(markets or [])


def _window(con: duckdb.DuckDBPyConnection, source: str, params: list[object],
            cfg: EventsDatasetConfig) -> tuple[datetime, datetime, datetime]:
    first, last = con.sql(f"SELECT min(ts), max(ts) FROM {source}", params=params).fetchall()[0]
    if first is None:
        raise DatasetProtocolError(f"data set {cfg.name}: no stored events in markets {cfg.markets} — ingest them "
                                   "first (`xc ingest --source events FILE --markets ...`) or change the markets")
    split = cfg.split or datetime.combine((last - timedelta(days=cfg.test_days - 1)).date(), datetime.min.time(),
                                          tzinfo=last.tzinfo)
    if not first < split <= last:
        fix = ("choose a split inside that range" if cfg.split else
               f"the events span less than test_days = {cfg.test_days} days: lower test_days or give a split")
        raise DatasetProtocolError(f"data set {cfg.name}: split {split} leaves no train or no test period: the "
                                   f"events run from {first} to {last} — {fix}")
    return first, split, last + timedelta(microseconds=1)


def _kept_labels(con: duckdb.DuckDBPyConnection, source: str, params: list[object], lo: datetime, hi: datetime,
                 cfg: EventsDatasetConfig) -> str:
    """SQL condition on ``item_id``: the labels with enough clicks and impressions in the window."""
    if cfg.min_clicks <= 1 and cfg.min_impressions == 0:
        return "TRUE"
    con.execute(f"CREATE OR REPLACE TEMP TABLE kept_labels AS SELECT item_id FROM {source} WHERE item_id IS NOT NULL "
                "AND ts >= ? AND ts < ? GROUP BY 1 HAVING count(*) FILTER (WHERE clicked) >= ? AND "
                "count(*) FILTER (WHERE impressed OR clicked) >= ?", [*params, lo, hi, cfg.min_clicks,
                                                                       cfg.min_impressions])
    return "item_id IN (SELECT item_id FROM kept_labels)"


def _missing_keys(con: duckdb.DuckDBPyConnection, store: EventStore, cfg: EventsDatasetConfig) -> int:
    """Clicked rows with an item whose label key cannot be derived (e.g. no host in the item id)."""
    if cfg.label == "item_id":
        return 0
    raw, params = _events_sql(store, cfg.markets)
    keyed, _ = _events_sql(store, cfg.markets, cfg.label)
    total = con.sql(f"SELECT count(*) FROM {raw} WHERE clicked AND item_id IS NOT NULL", params=params).fetchall()
    kept = con.sql(f"SELECT count(*) FROM {keyed} WHERE clicked AND item_id IS NOT NULL", params=params).fetchall()
    return int(total[0][0]) - int(kept[0][0])


#: item metadata columns of the canonical events a label keeps (``XCDataset.label_attributes``) when any label has one
ITEM_ATTRIBUTES = ("brand", "location")


def _pairs(con: duckdb.DuckDBPyConnection, source: str, params: list[object], lo: datetime,
           hi: datetime, kept: str = "TRUE") -> pl.DataFrame:
    attributes = "".join(f", any_value({a}) AS {a}" for a in ITEM_ATTRIBUTES)
    return _frame(
        con, f"SELECT query_text AS query, item_id AS item, any_value(item_text) AS item_text{attributes}, "
        f"count(*) AS clicks FROM {source} WHERE clicked AND item_id IS NOT NULL AND ts >= ? AND ts < ? AND {kept} "
        "GROUP BY query, item ORDER BY query, item", [*params, lo, hi])


def _pair_days(con: duckdb.DuckDBPyConnection, source: str, params: list[object], lo: datetime,
               hi: datetime, kept: str = "TRUE") -> pl.DataFrame:
    """(query, item, day): each day in [lo, hi) a training pair was clicked, days counted from ``lo``'s day."""
    return _frame(
        con, f"SELECT query_text AS query, item_id AS item, date_diff('day', CAST(? AS DATE), CAST(ts AS DATE)) AS day "
        f"FROM {source} WHERE clicked AND item_id IS NOT NULL AND ts >= ? AND ts < ? AND {kept} "
        "GROUP BY ALL ORDER BY query, item, day", [lo, *params, lo, hi])


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


def _test_edges(cosession: pl.DataFrame, anchors: AnchorSet, tests: dict[str, int], limit: int) -> np.ndarray:
    """(test document, anchor) from the test window's ``cosession(q1, q2, sessions)``: only pairs of a test
    document and an anchor the set already has (never a new one), the ``limit`` best supported per document."""
    existing = _index(anchors.texts)
    pairs = cosession.filter(pl.col("q1").is_in(list(tests)) & pl.col("q2").is_in(list(existing)))
    top = _top_edges(pairs, "q1", "q2", "sessions", limit)
    return np.stack([top.get_column("q1").replace_strict(tests, return_dtype=pl.Int64).to_numpy(),
                     top.get_column("q2").replace_strict(existing, return_dtype=pl.Int64).to_numpy()], axis=1)


def window_deciles(con: duckdb.DuckDBPyConnection, source: str, params: list[object],
                   split: datetime) -> dict[str, int]:
    """Query decile by traffic (RAMEN Table 1) in the training window (events before ``split``): queries sorted by
    frequency, each decile ~10% of the window's events. A query the window never saw is not here (the caller's 9,
    the tail). The test period's own counts never enter: a served model knows only the window."""
    freq = _frame(con, f"SELECT query_text AS q, count(*) AS n FROM {source} WHERE ts < ? GROUP BY 1 "
                       "ORDER BY n DESC, q", [*params, split])
    share = freq.get_column("n").cum_sum() / freq.get_column("n").sum()
    decile = ((share - freq.get_column("n") / freq.get_column("n").sum()) * 10).floor().cast(pl.Int64).clip(0, 9)
    return dict(zip(freq.get_column("q").to_list(), decile.to_list(), strict=True))


def _key_text(key: str, label: str) -> str:
    """A label's text when the events carry none: the host's words for a host, else the id itself."""
    if label == "host":
        from xc_core.logs.aol import host_text

        return host_text(key) or key
    return key


def _check_pairs(train: pl.DataFrame, test: pl.DataFrame, cfg: EventsDatasetConfig, missing_keys: int,
                 first: datetime, split: datetime, end: datetime) -> None:
    """Refuse a definition that leaves no training or no test clicks, naming why; warn about rows without a key."""
    for period, pairs, span in (("train", train, (first, split)), ("test", test, (split, end))):
        if pairs.is_empty():
            why = (f"{missing_keys:,} clicked rows have no '{cfg.label}' key (is item_id a URL or host?)"
                   if missing_keys else f"no click of a label with ≥ {cfg.min_clicks} clicks and ≥ "
                                        f"{cfg.min_impressions} impressions")
            raise DatasetProtocolError(f"data set {cfg.name}: the {period} period [{span[0]}, {span[1]}) has no "
                                       f"documents: {why} — change the split/test_days, the label or the minimums")
    if missing_keys:
        log.warning("data set %s: %d clicked rows have no %s label key (dropped)", cfg.name, missing_keys, cfg.label)


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
    source, params = _events_sql(store, cfg.markets, cfg.label)
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        first, split, end = _window(con, source, params, cfg)
        kept = _kept_labels(con, source, params, first, end, cfg)
        train, test = _pairs(con, source, params, first, split, kept), _pairs(con, source, params, split, end, kept)
        pair_days = _pair_days(con, source, params, first, split, kept)
        _check_pairs(train, test, cfg, _missing_keys(con, store, cfg), first, split, end)
        deciles = window_deciles(con, source, params, split)
        test_cosession = test_window_cosession(con, source, params, split, end, cfg.graph_config())
        seen = set(_frame(con, f"SELECT DISTINCT query_text AS q FROM {source} WHERE ts < ?", [*params, split])
                   .get_column("q").to_list())
    graph_cfg = cfg.graph_config()
    if not tables_current(store, graphs_dir, first, split, graph_cfg):
        build_graph_tables(store, graphs_dir, first, split, graph_cfg)
    labels_frame = (pl.concat([train, test]).group_by("item")
                    .agg(pl.col("item_text", *ITEM_ATTRIBUTES).drop_nulls().first()).sort("item"))
    label_ids = labels_frame.get_column("item").to_list()
    label_texts = [t or _key_text(i, cfg.label) for t, i in zip(labels_frame.get_column("item_text").to_list(),
                                                                 label_ids, strict=True)]
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
    cosession = _anchor_set("cosession_queries", cos_doc, None, d_ix, l_ix)
    anchors = {
        "cosession_queries": dataclasses.replace(
            cosession, test_edges=_test_edges(test_cosession, cosession, t_ix, cfg.doc_anchors)),
        "click_graph": _anchor_set("click_graph", None, cos_lbl, d_ix, l_ix),
        "coclick_items": _anchor_set("coclick_items", None, coclick_lbl, d_ix, l_ix),
    }
    dataset = XCDataset(
        name=cfg.name, train_texts=train_docs, test_texts=test_docs, label_texts=label_texts,
        y_train=_matrix(train, d_ix, l_ix), y_test=_matrix(test, t_ix, l_ix),
        train_ids=[f"q:{q}" for q in train_docs], test_ids=[f"q:{q}" for q in test_docs], label_ids=label_ids,
        anchor_sets=anchors, test_novel=np.array([q not in seen for q in test_docs], dtype=bool),
        train_pair_days=np.stack([pair_days.get_column("query").replace_strict(d_ix, return_dtype=pl.Int64).to_numpy(),
                                  pair_days.get_column("item").replace_strict(l_ix, return_dtype=pl.Int64).to_numpy(),
                                  pair_days.get_column("day").to_numpy()], axis=1),
        test_decile=np.array([deciles.get(q, 9) for q in test_docs], dtype=np.int64),
        # brand / location of the items, only where the events carry them (none in aol-1000)
        label_attributes={a: labels_frame.get_column(a).to_list() for a in ITEM_ATTRIBUTES
                          if labels_frame.get_column(a).null_count() < len(labels_frame)},
        meta={"protocol": cfg.protocol, "psp_A": cfg.psp_A, "psp_B": cfg.psp_B, "markets": cfg.markets,
              "train_start": first.isoformat(), "split": split.isoformat(), "test_end": end.isoformat(),
              "graphs_dir": str(graphs_dir),
              "anchor_spaces": {"cosession_queries": "documents", "click_graph": "documents",
                                "coclick_items": "labels"}},
    )
    log.info("built %s", dataset.summary())
    return dataset
