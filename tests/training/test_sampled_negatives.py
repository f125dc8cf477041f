"""The many-negatives softmax (``TrainConfig.sampled_negatives``): each batch draws labels from the whole label
set for every row's softmax, never pushing a row's known positive away; off, the batches are drawn as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xc_core.datasets.container import XCDataset
from xc_core.training.batches import BatchBuilder


def _builder(data: XCDataset, sampled: int) -> BatchBuilder:
    sets = list(data.anchor_sets)
    return BatchBuilder.from_anchor_sets(data.train_texts, data.label_texts, data.y_train, data.anchor_sets, sets,
                                         sets, sampled_negatives=sampled)


def test_sampled_labels_mask_every_known_positive_and_leave_the_other_draws_alone(tiny_data: XCDataset) -> None:
    n_labels = len(tiny_data.label_texts)
    ids = np.random.default_rng(0).choice(len(tiny_data.train_texts), 32, replace=False)
    plain = _builder(tiny_data, 0).build(ids, np.random.default_rng(1))
    assert plain.sampled_label_ids is None and plain.sampled_positive is None and plain.sampled_texts == []
    batch = _builder(tiny_data, 64).build(ids, np.random.default_rng(1))
    # drawn last: the batch's labels and anchors are the ones drawn without the option
    assert np.array_equal(batch.label_ids, plain.label_ids) and np.array_equal(batch.positive_mask,
                                                                               plain.positive_mask)
    assert all(a.texts == b.texts for a, b in zip(batch.doc_anchors.values(), plain.doc_anchors.values(),
                                                  strict=True))
    sampled = batch.sampled_label_ids
    assert sampled is not None and batch.sampled_positive is not None
    assert 0 < len(sampled) <= 64 and len(np.unique(sampled)) == len(sampled) and sampled.max() < n_labels
    assert batch.sampled_texts == [tiny_data.label_texts[j] for j in sampled]
    known = tiny_data.y_train[ids][:, sampled].toarray() > 0
    same = np.array([[t in (d, lab) for t in batch.sampled_texts]
                     for d, lab in zip(batch.doc_texts, batch.label_texts, strict=True)])
    assert np.array_equal(batch.sampled_positive, known | same)
    # a batch's own positive label drawn again is masked for its row (the test can fail: some are drawn)
    whole = _builder(tiny_data, 10 * n_labels).build(ids, np.random.default_rng(1))
    assert whole.sampled_label_ids is not None and len(whole.sampled_label_ids) == n_labels
    assert whole.sampled_positive is not None and whole.sampled_positive[np.arange(32), batch.label_ids].all()


def test_the_loss_ranks_each_positive_against_the_allowed_sampled_labels() -> None:
    import torch
    from torch.nn import functional as F

    from xc_core.training.losses.softmax import InBatchSoftmaxLoss

    gen = torch.Generator().manual_seed(0)
    docs = F.normalize(torch.randn(4, 8, generator=gen), dim=-1)
    labels = F.normalize(torch.randn(4, 8, generator=gen), dim=-1)
    sampled = F.normalize(torch.randn(6, 8, generator=gen), dim=-1).requires_grad_(True)
    positive = torch.eye(4, dtype=torch.bool)
    masked = torch.zeros(4, 6, dtype=torch.bool)
    masked[0, :3] = True  # row 0 may not push the first three sampled labels away
    loss = InBatchSoftmaxLoss(scale=20.0)
    value = loss(docs, labels, positive, sampled_emb=sampled, sampled_positive=masked)
    logits = 20.0 * torch.cat([docs @ labels.T, (docs @ sampled.T).masked_fill(masked, float("-inf"))], dim=1)
    expected = F.cross_entropy(logits, torch.arange(4))
    assert torch.allclose(value, expected, atol=1e-6)
    assert value > loss(docs, labels, positive), "more negatives: a larger loss"
    value.backward()
    assert sampled.grad is not None and sampled.grad.abs().sum() > 0, "the sampled labels are trained too"
    everything = torch.ones(4, 6, dtype=torch.bool)
    assert torch.allclose(loss(docs, labels, positive, sampled_emb=sampled, sampled_positive=everything),
                          loss(docs, labels, positive), atol=1e-6), "all masked: the in-batch loss"
    with pytest.raises(ValueError, match="sampled_positive"):
        loss(docs, labels, positive, sampled_emb=sampled)


def test_tower_training_with_sampled_negatives_learns(tiny_data: XCDataset, tiny_home: Path, tmp_path: Path) -> None:
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    cfg = profile.train.model_copy(update={"epochs": 3, "select_best": False, "val_split": "documents",
                                           "tower": True, "regularize": False, "prune": False, "bandit": False,
                                           "tower_lr": 1e-2, "sampled_negatives": 128})
    trainer = Trainer(tiny_data, encoder_config(profile, tiny_home), cfg, tmp_path / "m")
    before = trainer.validation_recall()
    batch = trainer.builder.build(trainer.train_idx[:8], np.random.default_rng(0))
    assert batch.sampled_texts, "the trainer's batches carry the sampled labels"
    assert trainer.fit().val_recall > before
    with pytest.raises(ValueError, match="sampled_negatives"):
        Trainer(tiny_data, encoder_config(profile, tiny_home), cfg.model_copy(update={"loss": "triplet"}),
                tmp_path / "refused")


def test_the_regularizer_ranks_each_anchor_against_the_allowed_sampled_labels_too() -> None:
    """Row i's softmax holds its anchor, the other rows' anchors and the extra labels it may rank; a label it may
    not rank (its anchor's own text) changes nothing."""
    import torch

    from xc_core.training.losses import SoftmaxGraphRegularizer

    nodes, anchors = torch.eye(3), torch.eye(3)
    extra = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.0, 1.0]])  # near node 0; equal to anchor 2
    valid, neighbours = torch.ones(3, dtype=torch.bool), torch.zeros(3, 3, dtype=torch.bool)
    allowed = torch.tensor([[True, True], [True, True], [True, False]])
    reg = SoftmaxGraphRegularizer(scale=2.0)
    found = reg(nodes, anchors, valid, neighbours, extra_emb=extra, extra_allowed=allowed)
    logits = 2.0 * torch.cat([nodes @ anchors.T, nodes @ extra.T], dim=1)
    logits[2, 4] = float("-inf")
    assert float(found) == pytest.approx(float(torch.nn.functional.cross_entropy(logits, torch.arange(3))))
    assert float(found) > float(reg(nodes, anchors, valid, neighbours))
    blocked = reg(nodes, anchors, valid, neighbours, extra_emb=extra, extra_allowed=torch.zeros(3, 2, dtype=torch.bool))
    assert float(blocked) == pytest.approx(float(reg(nodes, anchors, valid, neighbours)))
    with pytest.raises(ValueError, match="extra_allowed"):
        reg(nodes, anchors, valid, neighbours, extra_emb=extra)


def test_the_trainer_shares_its_sampled_labels_with_the_regularizers_only_when_asked(
        tiny_data: XCDataset, tiny_home: Path, tmp_path: Path) -> None:
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    cfg = profile.train.model_copy(update={"tower": True, "regularize": True, "prune": False, "bandit": False,
                                           "graph_worth": False, "sampled_negatives": 64, "val_split": "documents"})
    losses = {}
    for shared in (False, True):
        trainer = Trainer(tiny_data, encoder_config(profile, tiny_home),
                          cfg.model_copy(update={"regularizer_sampled_negatives": shared}), tmp_path / str(shared))
        batch = trainer.builder.build(trainer.train_idx[:16], np.random.default_rng(0))
        terms = trainer.losses(batch)
        losses[shared] = {k: float(v.detach()) for k, v in terms.items()}
    assert losses[True]["task"] == pytest.approx(losses[False]["task"])  # the task loss is untouched
    regularizers = [k for k in losses[True] if k != "task"]
    assert regularizers and all(losses[True][k] >= losses[False][k] for k in regularizers)
    assert any(losses[True][k] > losses[False][k] for k in regularizers)  # more negatives: a harder softmax
    with pytest.raises(ValueError, match="regularizer_sampled_negatives"):
        Trainer(tiny_data, encoder_config(profile, tiny_home),
                cfg.model_copy(update={"regularizer_sampled_negatives": True, "sampled_negatives": 0}),
                tmp_path / "refused")
