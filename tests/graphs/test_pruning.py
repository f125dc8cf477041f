"""Pruning keeps exactly the anchors with cosine above the threshold, with any encoder; centring makes the
rule prune anisotropic embeddings."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.graphs.pruning import (
    _row_cosine,
    embedding_center,
    prune_anchor_set,
    prune_dataset_anchors,
    prune_pass_rates,
)


def test_pruning_keeps_exactly_the_edges_with_positive_cosine() -> None:
    docs = np.array([[1.0, 0.0], [0.0, 1.0]])
    labels = np.array([[1.0, 1.0]])
    anchors = np.array([[1.0, 0.1], [-1.0, 0.0], [0.0, -1.0], [1.0, 0.0]])
    a = AnchorSet("t", ["a0", "a1", "a2", "a3"], doc_edges=np.array([(0, 0), (0, 1), (1, 2), (1, 3)]),
                  label_edges=np.array([(0, 0), (0, 1), (0, 2)]))
    # cosines: d0·a0 > 0, d0·a1 < 0, d1·a2 < 0, d1·a3 = 0 (not > 0); l0·a0 > 0, l0·a1 < 0, l0·a2 < 0
    pruned, counts = prune_anchor_set(a, docs, labels, anchors, threshold=0.0)
    assert pruned.doc_edges.tolist() == [[0, 0]]
    assert pruned.label_edges.tolist() == [[0, 0]]
    assert counts.as_dict() == {"doc_kept": 1, "doc_dropped": 3, "label_kept": 1, "label_dropped": 2}


def test_pruning_with_the_pretrained_minilm_drops_the_unrelated_anchor() -> None:
    from xc_core.encoders import EncoderConfig, TextEncoder

    encoder = TextEncoder(EncoderConfig(n_layers=6))
    anchors = AnchorSet("cosession_queries", ["cheap flights to paris", "zzz qqq xkcd", "airline tickets europe"],
                        doc_edges=np.array([(0, 0), (0, 1), (0, 2)]), label_edges=np.empty((0, 2), np.int64))
    data = XCDataset("toy", ["flights to paris"], ["x"], ["air france"], y_train=sp.csr_matrix(np.ones((1, 1))),
                     y_test=sp.csr_matrix(np.ones((1, 1))), anchor_sets={"cosession_queries": anchors})
    embed = encoder.encode
    scores = embed(["flights to paris"]) @ embed(anchors.texts).T
    threshold = float(np.sort(scores.ravel())[0] + 1e-4)  # just above the least related anchor
    pruned, counts = prune_dataset_anchors(data, embed, threshold=threshold)
    kept = {anchors.texts[a] for a in pruned["cosession_queries"].doc_edges[:, 1]}
    assert kept == {"cheap flights to paris", "airline tickets europe"}  # the gibberish anchor is the one dropped
    assert counts["cosession_queries"].doc_dropped == 1


def _anisotropic(n_topics: int, per_topic: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors = a big shared component + one of ``n_topics`` orthogonal topic directions + a little noise
    (like mean-pooled sentence embeddings, every pair has a large positive cosine; once the mean is removed,
    two topics are at cosine ≈ −1/(n_topics − 1)). Returns the vectors and their topics."""
    rng = np.random.default_rng(seed)
    common = np.zeros(dim)
    common[0] = 12.0
    topics = 5.0 * np.eye(n_topics, dim, k=1)
    topic = np.repeat(np.arange(n_topics), per_topic)
    emb = common + topics[topic] + 0.05 * rng.normal(size=(len(topic), dim))
    return (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32), topic


def test_centring_drops_the_unrelated_anchors_raw_cosine_keeps_with_anisotropic_embeddings() -> None:
    emb, topic = _anisotropic(n_topics=8, per_topic=20, dim=32, seed=0)
    docs, anchor_emb = emb[::2], emb[1::2]  # same topics on both sides
    doc_topic, anchor_topic = topic[::2], topic[1::2]
    edges = np.array([(d, a) for d in range(len(docs)) for a in range(len(anchor_emb))])
    related = doc_topic[edges[:, 0]] == anchor_topic[edges[:, 1]]
    a = AnchorSet("t", [f"a{i}" for i in range(len(anchor_emb))], doc_edges=edges, label_edges=np.empty((0, 2)))
    raw, raw_counts = prune_anchor_set(a, docs, np.zeros((0, 32), np.float32), anchor_emb)
    assert raw_counts.doc_dropped == 0  # cosine > 0 keeps every edge
    center = embedding_center(docs, anchor_emb)
    centred, counts = prune_anchor_set(a, docs, np.zeros((0, 32), np.float32), anchor_emb, 0.0, center)
    kept = {tuple(e) for e in centred.doc_edges.tolist()}
    assert kept == {tuple(e) for e in edges[related].tolist()}  # exactly the same-topic edges survive
    assert counts.doc_dropped == int((~related).sum())


def test_no_center_reproduces_the_raw_cosine_rule_exactly_also_past_one_chunk() -> None:
    rng = np.random.default_rng(1)
    docs, labels, anchor_emb = (rng.normal(size=(n, 8)).astype(np.float32) for n in (300, 200, 500))
    doc_edges = np.stack([rng.integers(0, 300, 70_000), rng.integers(0, 500, 70_000)], axis=1)
    label_edges = np.stack([rng.integers(0, 200, 900), rng.integers(0, 500, 900)], axis=1)
    a = AnchorSet("t", [str(i) for i in range(500)], doc_edges=doc_edges, label_edges=label_edges,
                  doc_proxy=rng.random(70_000) < 0.1)
    for threshold in (0.0, 0.3):
        pruned, counts = prune_anchor_set(a, docs, labels, anchor_emb, threshold)
        old_doc = _row_cosine(docs[doc_edges[:, 0]], anchor_emb[doc_edges[:, 1]]) > threshold  # the rule as it was
        old_lbl = _row_cosine(labels[label_edges[:, 0]], anchor_emb[label_edges[:, 1]]) > threshold
        np.testing.assert_array_equal(pruned.doc_edges, doc_edges[old_doc])
        np.testing.assert_array_equal(pruned.label_edges, label_edges[old_lbl])
        np.testing.assert_array_equal(pruned.doc_proxy, a.doc_proxy[old_doc])
        assert counts.as_dict() == {"doc_kept": int(old_doc.sum()), "doc_dropped": int((~old_doc).sum()),
                                    "label_kept": int(old_lbl.sum()), "label_dropped": int((~old_lbl).sum())}


def test_embedding_center_is_the_mean_of_the_non_zero_rows_of_all_arrays() -> None:
    a = np.array([[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]])
    b = np.array([[0.0, 0.0], [5.0, 0.0]])
    np.testing.assert_allclose(embedding_center(a, b), [3.0, 2.0])
    np.testing.assert_array_equal(embedding_center(np.zeros((3, 2))), [0.0, 0.0])


def test_pass_rates_separate_true_pairs_from_random_ones_only_after_centring() -> None:
    emb, topic = _anisotropic(n_topics=10, per_topic=40, dim=32, seed=2)
    doc_emb, label_emb = emb[::2].copy(), emb[1::2]
    doc_topic, label_topic = topic[::2], topic[1::2]
    y = sp.csr_matrix((doc_topic[:, None] == label_topic[None, :]).astype(np.float32))
    y = sp.csr_matrix(y.multiply(np.random.default_rng(3).random(y.shape) < 0.2))  # a few true labels per doc
    encoded = np.arange(0, len(doc_emb), 2)  # the caller encoded half of the documents; the others are zero rows
    doc_emb[1::2] = 0.0
    center = embedding_center(doc_emb, label_emb)
    raw = prune_pass_rates(doc_emb, label_emb, y, 0.0, None, np.random.default_rng(0), doc_rows=encoded)
    centred = prune_pass_rates(doc_emb, label_emb, y, 0.0, center, np.random.default_rng(0), doc_rows=encoded)
    assert raw["positive_pairs"] == y[encoded].nnz == centred["positive_pairs"]
    assert raw["random_pairs"] == 10_000
    assert raw["positive_kept_share"] == 1.0 and raw["random_kept_share"] == 1.0  # raw cosine keeps everything
    assert centred["positive_kept_share"] == 1.0 and centred["random_kept_share"] < 0.2  # ~1 pair in 10 shares a topic
    only = prune_pass_rates(doc_emb, label_emb, y, 0.0, center, doc_rows=encoded, label_rows=np.arange(5))
    assert only["positive_pairs"] == y[encoded][:, :5].nnz
