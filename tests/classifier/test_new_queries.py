"""New queries by the encoder alone (``ClassifierConfig.new_query_fallback``, off by default): on the out-of-fold rows
whose query the click memory does not know, the encoder alone is tested against the fusion chosen on every row (the
fallback); when it beats it there, a served model ranks such queries by the encoder alone (classifier/stage.py
``_new_queries_test``, fusion.py ``fused_search``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.classifier.memory import ClickMemory

if TYPE_CHECKING:
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.stage import FusionGrid

N_LABELS, DIM, REPEATED, NEW = 100, 32, 300, 300


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _rows(w_helps_new: bool) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray, np.ndarray, list[str], ClickMemory]:
    """Repeated rows (labels 0-49): the encoder and W rank a decoy first, the memory remembers the truth. New rows
    (labels 50-99): the memory knows nothing; W ranks the truth first (``w_helps_new``) or a wrong label, where the
    encoder is right."""
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


def _grid(w_helps_new: bool) -> FusionGrid:
    from xc_core.classifier.stage import FusionGrid

    queries, truth, labels, weights, texts, memory = _rows(w_helps_new)
    grid = FusionGrid(queries, truth, labels, weights, 20, np.empty((0, 2), np.int64), np.ones(N_LABELS),
                      channels={"memory": memory}, texts=texts)
    assert grid.remembered is not None and grid.remembered.tolist() == [True] * REPEATED + [False] * NEW
    return grid


def _config(on: bool) -> ClassifierConfig:
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig

    return ClassifierConfig(alphas=(0.0,), lexical=LexicalConfig(weights=(0.0,)), popularity_weights=(0.0,),
                            name_weights=(0.0,), linear_weights=(0.0,), untrained_offsets=(0.0,),
                            tail_offsets=(0.0,), new_query_fallback=on)


@pytest.mark.parametrize("w_helps_new", [False, True])
def test_the_encoder_takes_new_queries_only_where_it_beats_the_fusion_on_them(w_helps_new: bool) -> None:
    """The rule given a served fusion that uses W and the memory (the selector's choice held fixed): where W ranks
    the new rows wrongly the encoder alone wins on them and takes them; where W ranks them rightly it does not."""
    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.stage import OutOfFoldGrid, _new_queries_test
    from xc_core.evaluation.fallback import row_folds
    from xc_core.seeds import Stream

    oof = OutOfFoldGrid([_grid(w_helps_new)])
    fusion = Fusion(alpha=0.0, memory_weight=0.8)  # W and the memory, no encoder
    folds = row_folds(oof.truth.shape[0], 5, 0, Stream.FUSION_HALVES)
    decision = _new_queries_test(oof, _config(True), lambda rows: fusion, folds, fusion)
    assert decision is not None and decision.as_dict()["tested_on_rows"] == NEW
    assert decision.kept is not w_helps_new, decision.reason
    # the rule off (the default), or a fusion without the memory (nothing tells new queries apart): no test
    assert _new_queries_test(oof, _config(False), lambda rows: fusion, folds, fusion) is None
    no_memory = Fusion(alpha=0.0)
    assert _new_queries_test(oof, _config(True), lambda rows: no_memory, folds, no_memory) is None


def test_the_stage_records_the_rule_and_serves_one_fusion_when_it_loses() -> None:
    """Through the stage's selection: the fusion it serves (W and the memory) ranks the new rows better than the
    encoder alone, so the rule's test is recorded, lost, and every query gets the one fusion; off, no test."""
    from xc_core.classifier.stage import choose_fusion

    grid = _grid(w_helps_new=True)
    served, tests, _ = choose_fusion(grid, _config(True))
    assert tests["fusion"]["kept"] and served["memory_weight"] > 0, tests["fusion"]["reason"]
    new_test = tests["new_queries"]
    assert new_test["tested_on_rows"] == NEW and not new_test["kept"], new_test["reason"]
    assert served["new_queries_encoder"] == 0.0
    served, tests, _ = choose_fusion(grid, _config(False))
    assert "new_queries" not in tests and served["new_queries_encoder"] == 0.0


def test_a_served_model_ranks_a_query_it_does_not_remember_by_the_encoder(tmp_path: Path) -> None:
    from xc_core.classifier.channels import Fusion
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
    with_memory = Fusion(alpha=0.0, memory_weight=6.4)
    routed = FusedClassifier.load(FusedClassifier(weights, with_memory, 10, channels={"memory": memory},
                                                  new_queries_encoder=True).save(tmp_path / "routed"))
    assert routed.routes_new_queries
    scores, ids = fused_search(queries, index, w_index, labels, routed, 5, texts=texts)
    enc_scores, enc_ids = index.search(queries[[1]], 5)
    assert ids[0, 0] == 29, "a remembered query keeps the fused ranking (its remembered label first)"
    assert ids[1].tolist() == enc_ids[0].tolist() and np.allclose(scores[1], enc_scores[0]), \
        "a query the memory does not know is ranked by the encoder alone"
    one_fusion = FusedClassifier(weights, with_memory, 10, channels={"memory": memory})
    _, fused_ids = fused_search(queries, index, w_index, labels, one_fusion, 5, texts=texts)
    assert fused_ids[1].tolist() != enc_ids[0].tolist(), "without the rule W ranks it: the test can fail"
    # without the memory in the score nothing tells new queries apart: the rule is off and not saved
    plain = FusedClassifier(weights, Fusion(alpha=0.0), 10, new_queries_encoder=True)
    assert not plain.routes_new_queries
    assert not FusedClassifier.load(plain.save(tmp_path / "plain")).new_queries_encoder
