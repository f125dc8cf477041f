"""The never-worse rule per query kind: a fusion chosen on every out-of-fold row is tested again on the rows whose
query the click memory does not know, against the encoder alone; unless it beats the encoder there, a served model
ranks such queries by the encoder alone (classifier/stage.py ``_new_queries_test``, fusion.py ``fused_search``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.classifier.memory import ClickMemory

N_LABELS, DIM, REPEATED, NEW = 100, 32, 300, 300


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _rows(w_helps_new: bool) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray, np.ndarray, list[str], ClickMemory]:
    """Repeated rows (labels 0-49): the encoder ranks a decoy first, the memory remembers the truth. New rows (labels
    50-99): the memory knows nothing; W ranks the truth first (``w_helps_new``) or a wrong label, where the encoder
    is right."""
    rng = np.random.default_rng(0)
    labels = _unit(rng.normal(size=(N_LABELS, DIM)))
    weights = labels.copy()
    rep = rng.integers(0, 50, REPEATED)
    new = rng.integers(50, 100, NEW)
    rep_queries = _unit(0.5 * labels[rep] + 0.7 * labels[(rep + 1) % 50])
    if w_helps_new:  # the encoder is wrong on new rows (a decoy), W's rows of their truths point at the queries
        new_queries = _unit(0.5 * labels[new] + 0.7 * labels[50 + (new + 1) % 50])
        weights[new] = new_queries
    else:  # the encoder is right on new rows, W's rows of their truths point elsewhere
        new_queries = _unit(labels[new] + 0.05 * rng.normal(size=(NEW, DIM)))
        weights[50:] = _unit(rng.normal(size=(50, DIM)))
    queries = np.concatenate([rep_queries, new_queries])
    positive = np.concatenate([rep, new])
    truth = sp.csr_matrix((np.ones(len(positive)), (np.arange(len(positive)), positive)),
                          shape=(len(positive), N_LABELS))
    texts = [f"query {i}" for i in range(len(positive))]
    clicks = sp.csr_matrix((np.full(REPEATED, 5.0, np.float32), (np.arange(REPEATED), rep)),
                           shape=(len(positive), N_LABELS))  # only the repeated rows have clicks
    return queries, truth, labels, weights, texts, ClickMemory.fit(texts, clicks)


@pytest.mark.parametrize("w_helps_new", [False, True])
def test_new_queries_keep_the_encoder_unless_the_fusion_beats_it_on_them(w_helps_new: bool) -> None:
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig
    from xc_core.classifier.stage import FusionGrid, choose_fusion

    queries, truth, labels, weights, texts, memory = _rows(w_helps_new)
    grid = FusionGrid(queries, truth, labels, weights, 20, np.empty((0, 2), np.int64), np.ones(N_LABELS),
                      texts=texts, memory=memory)
    assert grid.remembered is not None and grid.remembered.tolist() == [True] * REPEATED + [False] * NEW
    cfg = ClassifierConfig(alphas=(0.0,), lexical=LexicalConfig(weights=(0.0,)), popularity_weights=(0.0,),
                           name_weights=(0.0,), linear_weights=(0.0,), untrained_offsets=(0.0,), tail_offsets=(0.0,))
    served, tests, _ = choose_fusion(grid, cfg)
    assert tests["fusion"]["kept"] and served["memory_weight"] > 0, tests["fusion"]["reason"]
    new_test = tests["new_queries"]
    assert new_test["tested_on_rows"] == NEW and new_test["kept"] is w_helps_new, new_test["reason"]
    assert served["new_queries_encoder"] == (0.0 if w_helps_new else 1.0)
    # off: one fusion for every query, and no test
    served, tests, _ = choose_fusion(grid, cfg.model_copy(update={"new_query_fallback": False}))
    assert "new_queries" not in tests and served["new_queries_encoder"] == 0.0


def test_a_served_model_ranks_a_query_it_does_not_remember_by_the_encoder(tmp_path: Path) -> None:
    from xc_core.classifier.fusion import FusedClassifier, fused_search
    from xc_core.index import IndexConfig, LabelIndex

    rng = np.random.default_rng(1)
    labels = _unit(rng.normal(size=(30, 16)))
    weights = _unit(rng.normal(size=(30, 16)))  # W's ranking differs from the encoder's
    clicks = sp.csr_matrix((np.array([7.0], np.float32), ([0], [29])), shape=(1, 30))
    memory = ClickMemory.fit(["cheap flights"], clicks)
    index = LabelIndex.build(labels, None, IndexConfig(kind="flat"))
    w_index = LabelIndex.build(weights, None, IndexConfig(kind="flat"))
    queries = labels[[12, 3]]
    texts = ["cheap flights", "cheap hotels"]
    routed = FusedClassifier.load(FusedClassifier(weights, 0.0, 10, memory=memory, memory_weight=6.4,
                                                  new_queries_encoder=True).save(tmp_path / "routed"))
    assert routed.routes_new_queries
    scores, ids = fused_search(queries, index, w_index, labels, routed, 5, texts=texts)
    enc_scores, enc_ids = index.search(queries[[1]], 5)
    assert ids[0, 0] == 29, "a remembered query keeps the fused ranking (its remembered label first)"
    assert ids[1].tolist() == enc_ids[0].tolist() and np.allclose(scores[1], enc_scores[0]), \
        "a query the memory does not know is ranked by the encoder alone"
    one_fusion = FusedClassifier(weights, 0.0, 10, memory=memory, memory_weight=6.4)
    _, fused_ids = fused_search(queries, index, w_index, labels, one_fusion, 5, texts=texts)
    assert fused_ids[1].tolist() != enc_ids[0].tolist(), "without the rule W ranks it: the test can fail"
    # without the memory in the score nothing tells new queries apart: the rule is off and not saved
    plain = FusedClassifier(weights, 0.0, 10, new_queries_encoder=True)
    assert not plain.routes_new_queries
    assert not FusedClassifier.load(plain.save(tmp_path / "plain")).new_queries_encoder
