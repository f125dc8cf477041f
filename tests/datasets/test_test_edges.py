"""AnchorSet.test_edges, the graph at inference: persisted only when present, validated, and filled by the
wikispeedia and event-log builders only with links to existing anchors that are not test documents."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.datasets.test_container import assert_same_dataset, small_dataset
from tests.datasets.test_wikispeedia import real_dir
from xc_core.datasets.container import TEST_EDGES, AnchorSet, XCDataset
from xc_core.datasets.events import EventsDatasetConfig, build_events_dataset
from xc_core.datasets.registry import leaked_test_nodes
from xc_core.datasets.wikispeedia import FILES, build_wikispeedia, decode_title, read_tsv
from xc_core.logs.ingest import Source, ingest
from xc_core.logs.store import EventStore


def with_test_edges() -> XCDataset:
    data = small_dataset()  # 2 test documents; set "links" has 2 anchors
    links = dataclasses.replace(data.anchor_sets["links"], test_edges=np.array([[0, 1], [1, 0], [1, 1]]))
    return dataclasses.replace(data, anchor_sets={**data.anchor_sets, "links": links})


# -- container ---------------------------------------------------------------------------------
def test_test_edges_default_to_empty_and_give_a_test_document_incidence_matrix() -> None:
    plain = AnchorSet("s", ["a", "b"], doc_edges=np.array([[0, 0]]), label_edges=np.empty((0, 2)))
    assert plain.test_edges.shape == (0, 2) and plain.test_edges.dtype == np.int64
    a = with_test_edges().anchor_sets["links"]
    assert a.test_matrix(2).toarray().tolist() == [[0, 1], [1, 1]]


def test_test_edges_survive_a_save_load_round_trip(tmp_path: Path) -> None:
    data = with_test_edges()
    loaded = XCDataset.load(data.save(tmp_path / "d"))
    assert_same_dataset(data, loaded)
    np.testing.assert_array_equal(loaded.anchor_sets["links"].test_edges, data.anchor_sets["links"].test_edges)
    assert (tmp_path / "d" / "anchors" / "links" / TEST_EDGES).exists()
    assert not (tmp_path / "d" / "anchors" / "empty" / TEST_EDGES).exists(), "written only when non-empty"


def test_a_data_set_saved_without_test_edges_files_loads_with_none(tmp_path: Path) -> None:
    folder = with_test_edges().save(tmp_path / "d")
    (folder / "anchors" / "links" / TEST_EDGES).unlink()  # as a folder written before test edges existed
    loaded = XCDataset.load(folder)
    assert all(a.test_edges.shape == (0, 2) for a in loaded.anchor_sets.values())
    assert_same_dataset(small_dataset(), loaded)


def test_a_data_set_without_test_edges_writes_the_same_files_as_before(tmp_path: Path) -> None:
    folder = small_dataset().save(tmp_path / "d")
    assert not list(folder.rglob(TEST_EDGES))
    assert json.loads((folder / "meta.json").read_text())["format_version"] == 1


@pytest.mark.parametrize("edges", [[[2, 0]], [[0, 2]], [[-1, 0]]], ids=["test doc", "anchor", "negative"])
def test_validate_rejects_test_edges_outside_the_test_documents_or_anchors(edges: list[list[int]]) -> None:
    data = small_dataset()
    links = dataclasses.replace(data.anchor_sets["links"], test_edges=np.array(edges))
    with pytest.raises(ValueError, match="'links' test_edges point outside.*test documents 0..1, anchors 0..1"):
        dataclasses.replace(data, anchor_sets={**data.anchor_sets, "links": links})


def test_trainer_facing_edge_lists_are_unchanged_by_test_edges() -> None:
    a, b = small_dataset().anchor_sets["links"], with_test_edges().anchor_sets["links"]
    np.testing.assert_array_equal(a.doc_edges, b.doc_edges)
    np.testing.assert_array_equal(a.label_edges, b.label_edges)
    assert a.coverage(3, 4) == b.coverage(3, 4)


# -- wikispeedia -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wiki() -> XCDataset:
    return build_wikispeedia(real_dir(), seed=0)


def test_wikispeedia_test_edges_point_only_at_anchors_that_are_not_test_articles(wiki: XCDataset) -> None:
    test_titles = set(wiki.test_texts)
    for name, a in wiki.anchor_sets.items():
        assert len(a.test_edges), f"{name}: no test edges"
        assert a.test_edges[:, 0].max() < len(wiki.test_texts)
        assert not test_titles & {a.texts[j] for j in a.test_edges[:, 1]}, name
        assert not test_titles & set(a.texts), f"{name}: a test article became an anchor"
        assert a.doc_edges[:, 0].max() < len(wiki.train_texts)


def test_wikispeedia_training_graph_still_holds_no_test_article(wiki: XCDataset) -> None:
    test_titles = set(wiki.test_texts)
    label_of = {t: j for j, t in enumerate(wiki.label_texts)}
    test_labels = {label_of[t] for t in test_titles if t in label_of}
    for name, a in wiki.anchor_sets.items():
        assert not test_titles & {a.texts[j] for j in a.doc_edges[:, 1]}, name
        assert not test_titles & {wiki.train_texts[i] for i in a.doc_edges[:, 0]}, name
        assert not test_labels & set(a.label_edges[:, 0].tolist()), f"{name}: a test article has label edges"


def test_wikispeedia_links_test_edges_are_exactly_a_test_articles_links_to_existing_anchors(
        wiki: XCDataset) -> None:
    links = read_tsv(real_dir() / FILES["links"][0], FILES["links"][1])
    tests = set(wiki.test_ids)
    a = wiki.anchor_sets["links"]
    anchors = set(a.texts)
    expected = {(decode_title(s), decode_title(t)) for s, t in links.select("source", "target").iter_rows()
                if s in tests and t not in tests and decode_title(t) in anchors}
    got = {(wiki.test_texts[i], a.texts[j]) for i, j in a.test_edges.tolist()}
    assert got == expected
    share = np.unique(a.test_edges[:, 0]).size / len(wiki.test_texts)
    assert share > 0.95, f"only {share:.1%} of test articles have a links test edge"


# -- event logs --------------------------------------------------------------------------------
def _event(ts: str, user: str, query: str, item: str | None, clicked: bool) -> dict[str, object]:
    return {"ts": ts, "user_id": user, "market": "MC-1", "query_text": query, "item_id": item,
            "item_text": item, "position": 1 if item else None, "impressed": item is not None, "clicked": clicked}


SPLIT = datetime(2006, 3, 10, tzinfo=UTC)
EVENTS = [
    # train window: co-session anchors "crimson sneakers", "red shoes", "shoe repair"
    _event("2006-03-01 10:00:00", "u1", "red shoes", "k1", True),
    _event("2006-03-01 10:05:00", "u1", "crimson sneakers", "k2", True),
    _event("2006-03-02 09:00:00", "u2", "red shoes", "k1", True),
    _event("2006-03-02 09:01:00", "u2", "shoe repair", "k3", True),
    # test window, one session: "crimson sneakers" is asked without a click (an anchor, not a test document),
    # "leaky query" is a novel test document, hence never an anchor; "red shoes" comes first, so at its time the
    # session holds nothing yet
    _event("2006-03-12 09:00:00", "u3", "red shoes", "k1", True),
    _event("2006-03-12 09:01:00", "u3", "crimson sneakers", "k2", False),
    _event("2006-03-12 09:02:00", "u3", "leaky query", "k9", True),
    # test window: "shoe repair" two hours after "red shoes" is another session, so no edge between them
    _event("2006-03-13 10:00:00", "u4", "red shoes", "k1", True),
    _event("2006-03-13 12:00:00", "u4", "shoe repair", "k3", True),
]


@pytest.fixture(scope="module")
def events_data(tmp_path_factory: pytest.TempPathFactory) -> XCDataset:
    root = tmp_path_factory.mktemp("events")
    path = root / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    assert ingest([Source("events", path)], root / "home", progress=False).rejected == 0
    return build_events_dataset(EventStore(root / "home"), root / "graphs", EventsDatasetConfig(name="t", split=SPLIT))


def _test_pairs(data: XCDataset, name: str) -> set[tuple[str, str]]:
    a = data.anchor_sets[name]
    return {(data.test_texts[i], a.texts[j]) for i, j in a.test_edges.tolist()}


def test_event_test_edges_are_the_anchors_asked_before_a_test_query_in_its_first_session(
        events_data: XCDataset) -> None:
    assert sorted(events_data.test_texts) == ["leaky query", "red shoes", "shoe repair"]
    # never what came after a query ("crimson sneakers" after "red shoes"), nor a later session
    assert _test_pairs(events_data, "cosession_queries") == {("leaky query", "red shoes"),
                                                             ("leaky query", "crimson sneakers")}
    assert sorted(events_data.anchor_sets["cosession_queries"].texts) == ["crimson sneakers", "red shoes",
                                                                         "shoe repair"], "no anchor added"


def test_event_label_side_sets_get_no_test_edges(events_data: XCDataset) -> None:
    assert events_data.anchor_sets["click_graph"].test_edges.shape == (0, 2)
    assert events_data.anchor_sets["coclick_items"].test_edges.shape == (0, 2)


def test_the_test_window_never_enters_the_train_tables_or_train_edges(events_data: XCDataset) -> None:
    assert leaked_test_nodes(events_data) == 0
    graphs = Path(events_data.meta["graphs_dir"])
    cos = pl.read_parquet(graphs / "cosession_queries.parquet")
    assert "leaky query" not in set(cos.get_column("q1").to_list()) | set(cos.get_column("q2").to_list())
    assert sorted(p.name for p in graphs.glob("*.parquet")) == ["click_graph.parquet", "coclick_items.parquet",
                                                                "cosession_queries.parquet"]
    a = events_data.anchor_sets["cosession_queries"]
    pairs = {(events_data.train_texts[i], a.texts[j]) for i, j in a.doc_edges.tolist()}
    assert pairs == {("red shoes", "crimson sneakers"), ("red shoes", "shoe repair"),
                     ("crimson sneakers", "red shoes"), ("shoe repair", "red shoes")}


def test_a_simulated_data_set_links_a_test_query_only_to_what_preceded_its_first_ask(tmp_path: Path) -> None:
    from xc_core.simulate.pipeline import simulate_into_store
    from xc_core.stages.dataset import materialize_dataset

    simulate_into_store("tiny", 0, tmp_path)
    data, summary = materialize_dataset("synthetic", tmp_path)
    a = data.anchor_sets["cosession_queries"]
    split = datetime.fromisoformat(data.meta["split"])
    events = (pl.read_parquet(EventStore(tmp_path).events_dir / "day=*" / "events.parquet")
              .filter(pl.col("ts") >= split).select("session_id", "query_text", "ts"))
    asks = events.group_by("session_id", "query_text").agg(pl.col("ts").min())
    first = asks.sort("ts").group_by("query_text", maintain_order=True).first()
    first_of = {q: (s, t) for q, s, t in first.select("query_text", "session_id", "ts").iter_rows()}
    asked = {(s, q): t for s, q, t in asks.select("session_id", "query_text", "ts").iter_rows()}
    assert len(a.test_edges) and summary["anchor_sets"]["cosession_queries"]["test_coverage"] > 0.1
    for i, j in a.test_edges.tolist():
        query, anchor = data.test_texts[i], a.texts[j]
        session, at = first_of[query]
        assert query != anchor and asked.get((session, anchor), at) < at, (query, anchor)  # asked before it
    assert XCDataset.load(Path(summary["path"])).anchor_sets["cosession_queries"].test_edges.tolist() == \
        a.test_edges.tolist()
