"""Issue #43's hypothesis made testable: hard negatives in RAMEN's graph regularizers (training/anchor_negatives.py).

Hand-made inputs pin the rules (which anchors are mined, where the extra softmax column enters, what a batch draws);
on the tiny simulated home the trainer mines every regularized side, and a training with the negatives separates
the nodes from their mined anchors more than one without."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.training.anchor_negatives import draw, mine_anchor_negatives


def _unit(rows: list[list[float]]) -> np.ndarray:
    x = np.asarray(rows, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_mined_anchors_are_the_nearest_that_are_neither_own_nor_the_node_itself() -> None:
    nodes = _unit([[1, 0], [0, 1]])
    # anchor ids 10..13 of a set with 14 texts; scores with node 0: 1.0, 0.8, 0.6, 0.0
    candidates = np.array([10, 11, 12, 13])
    cand = _unit([[1, 0], [0.8, 0.6], [0.6, 0.8], [0, 1]])
    own = sp.csr_matrix((np.ones(2), ([0, 1], [11, 13])), shape=(2, 14))
    excluded = np.array([10, -1])  # anchor 10 reads as node 0 itself
    mined = mine_anchor_negatives(nodes, cand, candidates, own, excluded, per_node=3)
    np.testing.assert_array_equal(mined[0], [12, 13, -1])  # 10 is the node's own text, 11 its own anchor
    np.testing.assert_array_equal(mined[1], [12, 11, 10])  # 13 is its own anchor
    assert mine_anchor_negatives(nodes, cand[:0], candidates[:0], own, excluded, 2).tolist() == [[-1, -1]] * 2


def test_draw_is_uniform_over_a_pool_and_minus_one_without_one() -> None:
    pool = np.array([[4, 7, -1], [-1, -1, -1]])
    drawn = {int(draw(pool, np.array([0, 1, -1]), np.random.default_rng(s))[0]) for s in range(30)}
    assert drawn == {4, 7}
    assert draw(pool, np.array([0, 1, -1]), np.random.default_rng(0))[1:].tolist() == [-1, -1]


def test_the_negative_anchor_enters_only_its_own_row_softmax() -> None:
    from xc_core.training.losses import SoftmaxGraphRegularizer, in_batch_softmax

    reg = SoftmaxGraphRegularizer(scale=20.0)
    nodes = torch.nn.functional.normalize(torch.tensor([[1.0, 0.2, 0], [0, 1, 0.3], [0.2, 0, 1]]), dim=1)
    anchors = torch.nn.functional.normalize(torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 1]]), dim=1)
    valid = torch.tensor([True, True, True])
    neighbour = torch.zeros(3, 3, dtype=torch.bool)
    plain = reg(nodes, anchors, valid, neighbour)
    none = reg(nodes, anchors, valid, neighbour, hard_emb=nodes.clone(), hard_valid=torch.zeros(3, dtype=torch.bool))
    assert float(none) == pytest.approx(float(plain), abs=1e-6)
    hard = nodes.clone()  # row 0's negative reads exactly as the node: its loss must rise, the others' not
    one = reg(nodes, anchors, valid, neighbour, hard_emb=hard, hard_valid=torch.tensor([True, False, False]))
    scores = nodes @ anchors.T
    logits = torch.cat([20 * scores[0], torch.tensor([20.0])])
    row0 = -torch.log_softmax(logits, 0)[0]
    rest = [float(in_batch_softmax(scores, ~neighbour, 20.0, valid=valid.clone().index_fill(0, torch.tensor([0]),
                                                                                          False)))]
    assert float(one) == pytest.approx((float(row0) + 2 * rest[0]) / 3, abs=1e-5)
    assert float(one) > float(plain)


def test_a_pool_draws_last_and_never_an_own_anchor_or_for_a_row_without_one() -> None:
    from xc_core.training.batches import BatchBuilder

    docs = ["red shoes", "blue shoes", "green hat"]
    labels = ["shoes", "hats"]
    y = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32))
    texts = ["red boots", "blue boots", "navy shoes", "red shoes"]
    anchor_set = AnchorSet("near", texts, doc_edges=np.array([[0, 0], [1, 1]]), label_edges=np.empty((0, 2), int))
    plain = BatchBuilder.from_anchor_sets(docs, labels, y, {"near": anchor_set}, ["near"], [])
    pool = np.array([[2, 3, -1], [0, -1, -1], [1, -1, -1]])  # doc 2 has no anchor: it never gets a negative
    pooled = BatchBuilder.from_anchor_sets(docs, labels, y, {"near": anchor_set}, ["near"], [],
                                           anchor_pools={"doc/near": pool})
    seen = set()
    for seed in range(20):
        a = plain.build(np.arange(3), np.random.default_rng(seed))
        b = pooled.build(np.arange(3), np.random.default_rng(seed))
        assert a.doc_anchors["near"].texts == b.doc_anchors["near"].texts  # the other draws are unchanged
        assert a.doc_anchors["near"].hard_texts is None
        side = b.doc_anchors["near"]
        assert side.hard_texts is not None and side.hard_valid is not None
        assert side.hard_valid.tolist()[1:] == [True, False] and side.hard_texts[2] == ""
        assert side.hard_texts[1] == "red boots"
        seen.add(side.hard_texts[0])
    assert seen == {"navy shoes", "red shoes"}


# -- the trainer on the tiny simulated home --------------------------------------------------------------------------
def _trainer(data: XCDataset, home: Path, out: Path, **settings):
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    cfg = profile.train.model_copy(update={"graph_worth": False, "prune": False, **settings})
    return Trainer(data, encoder_config(profile, home), cfg, out)


def test_the_trainer_mines_every_regularized_side_and_never_an_own_anchor(tiny_data: XCDataset, tiny_home: Path,
                                                                          tmp_path: Path) -> None:
    trainer = _trainer(tiny_data, tiny_home, tmp_path / "m", anchor_negatives=3)
    assert trainer.doc_sets or trainer.label_sets
    trainer._mine_anchor_negatives(0)
    expected = {f"doc/{s}" for s in trainer.doc_sets} | {f"label/{s}" for s in trainer.label_sets}
    assert set(trainer.anchor_pools) == expected
    for key, pool in trainer.anchor_pools.items():
        kind, name = key.split("/", 1)
        full = trainer.full_anchors[name]
        n_nodes = len(tiny_data.train_texts) if kind == "doc" else len(tiny_data.label_texts)
        own = (full.doc_matrix(n_nodes) if kind == "doc" else full.label_matrix(n_nodes)).tocsr()
        rows = np.flatnonzero(pool[:, 0] >= 0)
        assert len(rows), key
        for r in rows:
            mined = pool[r][pool[r] >= 0]
            assert not set(mined) & set(own[r].indices), (key, r)
    batch = trainer.builder.build(trainer.train_idx[:16], np.random.default_rng(0))
    sides = [*batch.doc_anchors.values(), *batch.label_anchors.values()]
    assert all(s.hard_texts is not None for s in sides) and any(s.hard_valid.any() for s in sides)
    losses = trainer.losses(batch)
    assert set(losses) == set(trainer.terms) and all(torch.isfinite(v) for v in losses.values())
    with pytest.raises(ValueError, match="softmax"):
        _trainer(tiny_data, tiny_home, tmp_path / "t", anchor_negatives=3, loss="triplet")


def test_training_with_negative_anchors_separates_nodes_from_them(tiny_data: XCDataset, tiny_home: Path,
                                                                  tmp_path: Path) -> None:
    """The same regularized training without and with the negatives: with them the documents score the starting
    encoder's mined anchors lower relative to their own anchors."""
    settings = {"bandit": False, "lambda_reg": 1.0, "select_best": False, "epochs": 3, "val_split": "documents"}
    probe = _trainer(tiny_data, tiny_home, tmp_path / "probe", anchor_negatives=2, **settings)
    probe._mine_anchor_negatives(0)
    name = probe.doc_sets[0]
    pool, full = probe.anchor_pools[f"doc/{name}"], probe.full_anchors[name]
    own = full.doc_matrix(len(tiny_data.train_texts)).tocsr()
    rows = np.flatnonzero(pool[:, 0] >= 0)
    gaps = {}
    for negatives in (0, 2):
        trainer = _trainer(tiny_data, tiny_home, tmp_path / str(negatives), anchor_negatives=negatives, **settings)
        trainer.fit()
        docs = trainer.encode([tiny_data.train_texts[r] for r in rows])
        anchors = trainer.encode(full.texts)
        gaps[negatives] = float(np.mean([(anchors[own[r].indices] @ docs[i]).mean()
                                         - (anchors[pool[r][pool[r] >= 0]] @ docs[i]).mean()
                                         for i, r in enumerate(rows)]))
    assert gaps[2] > gaps[0] + 0.015, gaps  # measured: −0.071 without, −0.046 with
