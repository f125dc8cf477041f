"""The sampling-bias correction of the task softmax (``TrainConfig.logq_correction``, Yi et al. 2019): each in-batch
label's logit less the log of its expected count in a batch, the uniform sampled labels' less theirs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset


def test_the_correction_lowers_each_column_by_its_log_count_and_a_constant_changes_nothing() -> None:
    import torch
    from torch.nn import functional as F

    from xc_core.training.losses.softmax import InBatchSoftmaxLoss

    gen = torch.Generator().manual_seed(0)
    docs = F.normalize(torch.randn(4, 8, generator=gen), dim=-1)
    labels = F.normalize(torch.randn(4, 8, generator=gen), dim=-1)
    sampled = F.normalize(torch.randn(5, 8, generator=gen), dim=-1)
    positive, masked = torch.eye(4, dtype=torch.bool), torch.zeros(4, 5, dtype=torch.bool)
    log_q = torch.tensor([2.0, -1.0, 0.5, 0.0])
    loss = InBatchSoftmaxLoss(scale=20.0)
    value = loss(docs, labels, positive, sampled_emb=sampled, sampled_positive=masked, column_log_q=log_q,
                 extra_log_q=-3.0)
    logits = torch.cat([20.0 * docs @ labels.T - log_q[None, :], 20.0 * docs @ sampled.T + 3.0], dim=1)
    assert torch.allclose(value, F.cross_entropy(logits, torch.arange(4)), atol=1e-5)
    # every label equally likely (and the sampled ones too): the softmax is shift-invariant, the loss unchanged
    same = loss(docs, labels, positive, sampled_emb=sampled, sampled_positive=masked,
                column_log_q=torch.full((4,), 1.5), extra_log_q=1.5)
    assert torch.allclose(same, loss(docs, labels, positive, sampled_emb=sampled, sampled_positive=masked), atol=1e-5)
    # a popular label (large expected count) weighs less as another row's negative: row 1's loss falls
    popular = torch.tensor([0.0, 0.0, 4.0, 0.0])
    scores = docs @ labels.T
    corrected = F.cross_entropy((20.0 * scores - popular[None, :])[1:2], torch.tensor([1]))
    plain = F.cross_entropy((20.0 * scores)[1:2], torch.tensor([1]))
    assert corrected < plain


def test_the_trainer_counts_each_labels_expected_draws_per_batch(tiny_data: XCDataset, tiny_home: Path,
                                                                 tmp_path: Path) -> None:
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    cfg = profile.train.model_copy(update={"epochs": 1, "val_split": "documents", "tower": True, "regularize": False,
                                           "prune": False, "bandit": False, "logq_correction": True})
    trainer = Trainer(tiny_data, encoder_config(profile, tiny_home), cfg, tmp_path / "m")
    rows = sp.csr_matrix(tiny_data.y_train, dtype=np.float64)[trainer.train_idx]
    per_row = np.asarray(rows.sum(axis=1)).ravel()
    expected = np.zeros(rows.shape[1])
    for r in range(rows.shape[0]):  # one positive per row, drawn uniformly among its labels
        if per_row[r]:
            start, end = rows.indptr[r], rows.indptr[r + 1]
            expected[rows.indices[start:end]] += 1.0 / per_row[r]
    expected *= cfg.batch_size / len(trainer.train_idx)
    drawn = expected > 0
    assert drawn.any() and not drawn.all(), "the tiny set has labels no training row clicks"
    assert np.allclose(trainer.label_log_q[drawn], np.log(expected[drawn]), atol=1e-5)
    assert np.all(trainer.label_log_q[~drawn] == 0)
    assert np.isclose(np.exp(trainer.label_log_q[drawn]).sum(), cfg.batch_size * (per_row > 0).mean(), rtol=1e-4)
    assert trainer.fit().steps > 0, "a corrected step trains"
    with pytest.raises(ValueError, match="logq_correction"):
        Trainer(tiny_data, encoder_config(profile, tiny_home), cfg.model_copy(update={"loss": "triplet"}),
                tmp_path / "refused")
