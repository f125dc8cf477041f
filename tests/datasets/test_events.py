"""XC data sets from event logs: temporal split, novel flags, and no test leakage into the graphs."""

from __future__ import annotations

import tarfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from xc_core.datasets.definitions import builtin_definitions
from xc_core.datasets.events import build_events_dataset
from xc_core.datasets.registry import leaked_test_nodes
from xc_core.logs.ingest import Source, ingest
from xc_core.logs.store import EventStore

SPLIT = datetime(2006, 5, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def built(aol_slice: Path, tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("home")
    ingest([Source("aol", aol_slice)], home, progress=False)
    store = EventStore(home)
    return store, build_events_dataset(store, home / "graphs",
                                       builtin_definitions()["aol-1000"].events_config(None))


def _raw_blocks(archive: Path) -> list[tuple[str, datetime, list[str]]]:
    """(query, time, hosts) per block, read independently of xc."""
    out = []
    with tarfile.open(archive, "r:gz") as tar:
        for member in (m for m in tar.getmembers() if m.isfile()):
            text = tar.extractfile(member).read().decode("utf-8", errors="replace")  # type: ignore[union-attr]  # a regular file: extractfile gives its reader
            for block in text.split("\n\n"):
                lines = [x for x in block.split("\n") if x.strip()]
                if lines:
                    query, ts = lines[0].split("\t")
                    hosts = [u.split("://")[1].split("/")[0].split(":")[0].lower().removeprefix("www.")
                             for u in lines[1:]]
                    out.append((query, datetime.fromisoformat(ts).replace(tzinfo=UTC), hosts))
    return out


def test_test_documents_and_their_labels_follow_the_aol_protocol(built, aol_slice: Path) -> None:
    _, data = built
    blocks = _raw_blocks(aol_slice)
    expected: dict[str, set[str]] = {}
    for query, ts, hosts in blocks:
        if ts >= SPLIT and hosts and len(query) <= 512:
            expected.setdefault(query, set()).update(hosts)
    assert set(data.test_texts) == set(expected)
    for row, text in enumerate(data.test_texts):
        labels = {data.label_ids[j] for j in data.y_test[row].indices}
        assert labels == expected[text]
    train_queries = {q for q, ts, _ in blocks if ts < SPLIT}
    assert data.test_novel.tolist() == [t not in train_queries for t in data.test_texts]


def test_no_test_period_node_enters_any_graph_or_anchor_set(built) -> None:
    store, data = built
    assert leaked_test_nodes(data) == 0
    novel = {t for t, n in zip(data.test_texts, data.test_novel, strict=True) if n}
    assert novel, "the slice must contain novel test queries for this test to mean anything"
    cos = pl.read_parquet(Path(data.meta["graphs_dir"]) / "cosession_queries.parquet")
    assert not novel & set(cos.get_column("q1").to_list())
    for anchors in data.anchor_sets.values():
        assert anchors.doc_edges[:, 0].max(initial=-1) < len(data.train_texts)
    novel_labels = np.flatnonzero(data.label_novel)
    assert len(novel_labels) and not np.isin(novel_labels, data.anchor_sets["coclick_items"].label_edges[:, 0]).any()


def test_label_universe_is_every_clicked_host_and_train_matrix_matches(built, aol_slice: Path) -> None:
    _, data = built
    hosts = {h for q, _, hs in _raw_blocks(aol_slice) if len(q) <= 512 for h in hs}
    assert set(data.label_ids) == hosts
    assert data.y_train.shape == (len(data.train_texts), len(hosts))
    assert (np.asarray(data.y_train.sum(axis=1)).ravel() >= 1).all()


def test_the_data_set_reads_current_graph_tables_instead_of_building_them_again(
        aol_slice: Path, tmp_path: Path) -> None:
    """Dagster builds and checks the graph tables, then the data set asset consumes them: one build. Tables from
    another store snapshot or other settings are rebuilt."""
    from xc_core.datasets.events import event_window
    from xc_core.datasets.graph_tables import TABLES, build_graph_tables

    ingest([Source("aol", aol_slice)], tmp_path, progress=False)
    cfg = builtin_definitions()["aol-1000"].events_config(None)
    store, out = EventStore(tmp_path), tmp_path / "graphs"
    first, split, _ = event_window(store, cfg)
    build_graph_tables(store, out, first, split, cfg.graph.model_copy(update={"markets": cfg.markets}))
    stamps = {t: (out / f"{t}.parquet").stat().st_mtime_ns for t in TABLES}
    build_events_dataset(store, out, cfg)
    assert {t: (out / f"{t}.parquet").stat().st_mtime_ns for t in TABLES} == stamps, "read, not rebuilt"
    other = cfg.model_copy(update={"graph": cfg.graph.model_copy(update={"min_clicks": 2})})
    build_events_dataset(store, out, other)
    assert all((out / f"{t}.parquet").stat().st_mtime_ns != stamps[t] for t in TABLES), "other settings: rebuilt"


def test_queries_have_no_own_label_on_either_split_so_validation_and_test_filter_alike(built) -> None:
    """An event log's documents are queries and its labels hosts (or ads): no query is a label, so the test filter
    is empty and no validation ranking drops a pair either — the two protocols agree by having nothing to remove.
    (A query that reads like a host, "ebay", is a real query for ebay.com: it is scored on both splits.)"""
    _, data = built
    assert not set(data.train_ids) & set(data.label_ids) and not set(data.test_ids) & set(data.label_ids)
    assert data.filter_pairs.shape == (0, 2) and data.train_filter_pairs.shape == (0, 2)
    assert data.own_label_pairs(np.arange(len(data.train_texts))).shape == (0, 2)


def test_query_deciles_count_the_training_window_only(built) -> None:
    """Issue #64: a query's decile is its traffic before the split; one asked only in the test period is tail (9),
    however often it is asked there."""
    import duckdb

    from xc_core.datasets.events import window_deciles

    before, after = datetime(2006, 4, 1, tzinfo=UTC), datetime(2006, 5, 2, tzinfo=UTC)
    rows = ([("head", before)] * 60 + [(f"tail {i}", before) for i in range(40)] + [("late", after)] * 500)
    events = pl.DataFrame({"query_text": [q for q, _ in rows], "ts": [t for _, t in rows]})
    with duckdb.connect() as con:
        con.register("events", events)
        deciles = window_deciles(con, "events", [], SPLIT)
    assert "late" not in deciles and deciles["head"] == 0
    assert {deciles[f"tail {i}"] for i in range(40)} <= set(range(6, 10))
    _, data = built
    assert data.test_decile is not None and (data.test_decile[data.test_novel] == 9).all()
