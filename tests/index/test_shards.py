"""The label index as shards searched as one (``xc_core/index/shards.py``): the merge's order (similarity, then the
lower id; missing results last), exact shards against one flat index up to ties, HNSW shards' recall, and the saved
form's refusals. The shards built from a dask job's vectors: tests/engines/test_sharded_embedding.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xc_core.index import IndexConfig, IndexError_, LabelIndex, ShardedIndex, merge_top_k, recall_against_exact
from xc_core.index.ties import rankings_agree


def _clustered(n: int, dim: int = 32, clusters: int = 20, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(clusters, dim))
    x = centers[rng.integers(0, clusters, n)] + 0.3 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _split(x: np.ndarray, ids: np.ndarray, shards: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(x[part], ids[part]) for part in np.array_split(np.arange(len(x)), shards)]


def test_merge_orders_by_similarity_then_lower_id_with_missing_results_last() -> None:
    first = (np.array([[0.9, 0.5, -np.inf]], dtype=np.float32), np.array([[7, 3, -1]]))
    second = (np.array([[0.9, 0.7, 0.5]], dtype=np.float32), np.array([[2, 8, 1]]))
    scores, ids = merge_top_k([first, second], 5)
    assert ids.tolist() == [[2, 7, 8, 1, 3]]  # the 0.9 tie and the 0.5 tie: lower id first, whichever shard
    assert np.allclose(scores, [[0.9, 0.9, 0.7, 0.5, 0.5]])
    assert merge_top_k([second, first], 5)[1].tolist() == ids.tolist()  # the shards' order does not matter
    scores, ids = merge_top_k([first, (np.full((1, 3), -np.inf, np.float32), np.full((1, 3), -1))], 4)
    assert ids.tolist() == [[7, 3, -1, -1]] and np.isneginf(scores[0, 2:]).all()


def test_exact_shards_rank_as_one_flat_index_up_to_ties() -> None:
    x = _clustered(3000)
    x[2000:2100] = x[:100]  # exact duplicates in the other shards: ties the merge must break by id
    ids = np.arange(len(x)) * 3 + 5  # the caller's ids, not positions
    queries = _clustered(200, seed=1)
    single = LabelIndex.build(x, ids, IndexConfig(kind="flat")).search(queries, 20)
    for shards in (1, 3, 7):
        sharded = ShardedIndex.build(_split(x, ids, shards), IndexConfig(kind="flat"), threads=2)
        assert sharded.count == len(x) and len(sharded.shards) == shards
        found = sharded.search(queries, 20)
        assert found[1].shape == (200, 20)
        assert rankings_agree(single, found).all(), shards
    scores, found_ids = ShardedIndex.build(_split(x, ids, 3), IndexConfig(kind="flat")).search(x[:5], 2)
    assert (found_ids == np.stack([ids[:5], ids[2000:2005]], axis=1)).all()  # a label and its copy: lower id first
    assert np.allclose(scores, 1.0, atol=1e-5)


def test_k_beyond_the_label_count_answers_as_a_label_index_does() -> None:
    x = _clustered(12)
    index = ShardedIndex.build(_split(x, np.arange(12), 3), IndexConfig(kind="flat"))
    assert index.search(x[:2], 50)[1].shape == LabelIndex.build(x, None, IndexConfig(kind="flat")).search(
        x[:2], 50)[1].shape == (2, 12)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_shards_recall_at_10_against_exact(kind: str) -> None:
    x = _clustered(6000, dim=48, clusters=50)
    queries = _clustered(300, dim=48, clusters=50, seed=2)
    cfg = IndexConfig(kind="hnsw") if kind == "hnsw" else IndexConfig(kind="ivf", ivf_lists=64, ivf_probe=16)
    sharded = ShardedIndex.build(_split(x, np.arange(len(x)), 3), cfg)
    assert recall_against_exact(sharded, x, np.arange(len(x)), queries, k=10) >= 0.99


def test_overlapping_shards_are_refused() -> None:
    x = _clustered(100)
    with pytest.raises(IndexError_, match="more than one shard"):
        ShardedIndex.build([(x[:60], np.arange(60)), (x[60:], np.arange(50, 90))], IndexConfig(kind="flat"))


def test_save_load_round_trip_and_refusals(tmp_path: Path) -> None:
    x = _clustered(900)
    index = ShardedIndex.build(_split(x, np.arange(900), 3), IndexConfig(kind="hnsw", ef_search=64),
                               model_uri="models:/m/1", dataset="synthetic")
    index.save(tmp_path / "idx")
    loaded = ShardedIndex.load(tmp_path / "idx", expect_model_uri="models:/m/1", expect_dataset="synthetic")
    assert loaded.count == 900 and loaded.cfg.ef_search == 64
    assert np.array_equal(loaded.search(x[:10], 5)[1], index.search(x[:10], 5)[1])
    with pytest.raises(IndexError_, match="stale index"):
        ShardedIndex.load(tmp_path / "idx", expect_model_uri="models:/m/2")
    top = tmp_path / "idx" / "shards.json"
    data = json.loads(top.read_text())
    data["shards"][1]["sha256"] = "0" * 64
    top.write_text(json.dumps(data))
    with pytest.raises(IndexError_, match="not the shard"):
        ShardedIndex.load(tmp_path / "idx")
    top.unlink()
    with pytest.raises(IndexError_, match="no shards.json"):
        ShardedIndex.load(tmp_path / "idx")
