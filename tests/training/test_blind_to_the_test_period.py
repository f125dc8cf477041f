"""No choice reads the test period (issue #64): an event log whose test days hold other queries gets the same
validation rows, out-of-fold blocks, epoch choice and fusion as the original. The variant turns every test query
that repeats a training text into a new one, so a selection steered by the test's mix of repeated and new queries
(the former ``test_mix``, 1 − the share of novel test texts) would move all four."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from xc_core.datasets.container import XCDataset


@pytest.fixture
def other_test_days(tiny_data: XCDataset) -> XCDataset:
    repeated = ~np.asarray(tiny_data.test_novel, bool)
    assert 0.2 < repeated.mean() < 1.0, "the tiny log's test repeats some training texts: the change is real"
    texts = [f"unseen query {i}" if again else text
             for i, (text, again) in enumerate(zip(tiny_data.test_texts, repeated, strict=True))]
    changed = dataclasses.replace(tiny_data, test_texts=texts,
                                  test_novel=np.array([t not in set(tiny_data.train_texts) for t in texts]))
    assert changed.test_novel.all() and changed.train_texts == tiny_data.train_texts
    return changed


def test_validation_rows_and_out_of_fold_blocks_ignore_the_test_days(tiny_data: XCDataset,
                                                                      other_test_days: XCDataset) -> None:
    from xc_core.classifier.folds import out_of_fold
    from xc_core.training.config import TrainConfig
    from xc_core.training.validation import validation_split

    cfg = TrainConfig(val_fraction=0.2, val_max=60)
    a, b = validation_split(tiny_data, cfg), validation_split(other_test_days, cfg)
    assert a.kind == b.kind == "temporal"
    assert np.array_equal(a.val_rows, b.val_rows) and np.array_equal(a.train_rows, b.train_rows)
    assert (a.truth != b.truth).nnz == 0
    blocks = [out_of_fold(data, folds=10, max_rows=120, seed=0, time_blocks=3)
              for data in (tiny_data, other_test_days)]
    assert [f.name for f in blocks[0]] == [f.name for f in blocks[1]]
    for x, y in zip(*blocks, strict=True):
        assert np.array_equal(x.score_rows, y.score_rows) and np.array_equal(x.fit_rows, y.fit_rows)


def test_the_epoch_choice_and_the_fusion_ignore_the_test_days(tiny_data: XCDataset, other_test_days: XCDataset,
                                                              tiny_home: Path, tmp_path: Path) -> None:
    from xc_core.classifier import ClassifierConfig, FusedClassifier
    from xc_core.classifier.stage import fit_classifier_stage
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    enc_cfg = encoder_config(profile, tiny_home)
    cfg = profile.train.model_copy(update={"epochs": 2, "tower": True, "regularize": False, "prune": False,
                                           "bandit": False, "lr": 1e-2, "select_best": True})
    fits = [Trainer(data, enc_cfg, cfg, tmp_path / f"m{i}").fit()
            for i, data in enumerate((tiny_data, other_test_days))]
    assert fits[0].selected_epoch == fits[1].selected_epoch
    assert [h["val_recall@10"] for h in fits[0].history] == [h["val_recall@10"] for h in fits[1].history]
    assert len(fits[0].history) == 3, "epoch 0 and two trained epochs were validated"

    encoder = Path(enc_cfg.model_path or "")
    # a two-point grid per channel: the fusion choice and its never-worse test at a sixth of the default grid's cost
    grid = ClassifierConfig(linear_weights=(0.0, 0.4), memory_weights=(0.0, 1.6), popularity_weights=(0.0, 0.1),
                            name_weights=(0.0, 0.4), tail_offsets=(0.0, 0.1), untrained_offsets=(0.0, 0.1))
    fused = [fit_classifier_stage(data, encoder, 16, grid, tmp_path / f"clf{i}")
             for i, data in enumerate((tiny_data, other_test_days))]
    first, second = (FusedClassifier.load(tmp_path / f"clf{i}").info for i in range(2))
    assert first["folds"] == second["folds"] and first["out_of_fold_rows"] > 0
    assert first["alpha_curve"] == second["alpha_curve"]
    assert first["fallback_tests"] == second["fallback_tests"]
    assert fused[0].alpha == fused[1].alpha
