"""``stage_cutoff``: on an event log the CPU profiles' encoder trains on every document's clicks before the classifier
stage's first out-of-fold block, so the stage scores every query of its blocks as the test period meets the encoder
(a repeated query trained on, a new one not), instead of leaving out the 70% of documents the encoder trained on."""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.config import ClassifierConfig
from xc_core.classifier.folds import out_of_fold
from xc_core.datasets.container import XCDataset
from xc_core.methods.encoder.training import stage_cutoff_day, with_stage_cutoff
from xc_core.training.config import TrainConfig
from xc_core.training.selection import split
from xc_core.training.validation import validation_split

VAL = TrainConfig(val_fraction=0.2, val_max=60)
CLF = ClassifierConfig(time_blocks=2, temporal_span=0.3, oof_min_rows=0)


def _pairs(matrix: sp.spmatrix) -> set[tuple[int, int]]:
    return {(int(r), int(c)) for r, c in zip(*sp.csr_matrix(matrix).nonzero(), strict=True)}


def test_training_before_a_day_keeps_only_the_pairs_clicked_before_it(tiny_data: XCDataset) -> None:
    full = validation_split(tiny_data, VAL)
    assert full.first_day is not None and full.first_day > 2
    day = full.first_day - 2
    cut = full.trained_before(day, tiny_data)
    days = tiny_data.train_pair_days
    assert _pairs(cut.y_fit) == {(d, j) for d, j, t in days.tolist() if t < day}
    assert _pairs(cut.y_fit) < _pairs(full.y_fit)  # the days between lose pairs: the test can fail
    assert set(cut.train_rows.tolist()) == set(np.unique(days[days[:, 2] < day, 0]).tolist()) & set(
        full.train_rows.tolist())
    assert cut.val_rows.tolist() == full.val_rows.tolist() and (cut.truth != full.truth).nnz == 0
    # no cut, a cut at or past the validation days, and a documents split are the split itself
    assert full.trained_before(None, tiny_data) is full and full.trained_before(full.first_day, tiny_data) is full
    folder_like = dataclasses.replace(tiny_data, train_pair_days=np.empty((0, 3), np.int64))
    documents = validation_split(folder_like, VAL)
    assert documents.trained_before(day, folder_like) is documents


def test_the_cutoff_is_the_stage_first_block_so_it_scores_rows_the_encoder_never_saw_clicked(
        tiny_data: XCDataset) -> None:
    cfg = VAL.model_copy(update={"stage_cutoff": True, "train_share": 0.7})
    resolved = with_stage_cutoff(cfg, tiny_data, CLF)
    day = stage_cutoff_day(tiny_data, cfg, CLF)
    assert day is not None and resolved.train_before_day == day and resolved.train_share == 1.0
    seen = validation_split(tiny_data, cfg).holdout_view(tiny_data)
    folds = out_of_fold(seen, CLF.folds, CLF.oof_max_rows, cfg.seed, "auto", CLF.temporal_span, np.empty(0, np.int64),
                        CLF.time_blocks, CLF.oof_min_rows, CLF.max_time_blocks)
    assert folds and min(f.first_day or 0 for f in folds) == day
    trained = split(tiny_data, resolved)
    days = tiny_data.train_pair_days
    clicked = {(int(d), int(j)): int(t) for d, j, t in days[np.argsort(-days[:, 2])].tolist()}  # first day wins
    rows = set(trained.train_rows.tolist())
    assert all(clicked[p] < day for p in _pairs(trained.y_fit) if p in clicked and p[0] in rows)
    scored = np.concatenate([f.score_rows for f in folds])
    assert np.isin(scored, trained.train_rows).any() and not np.isin(scored, trained.train_rows).all()
    # off, or on a data set without click days: the profile's train_share of documents, as before
    assert with_stage_cutoff(cfg.model_copy(update={"stage_cutoff": False}), tiny_data, CLF).train_before_day is None
    folder_like = dataclasses.replace(tiny_data, train_pair_days=np.empty((0, 3), np.int64))
    assert with_stage_cutoff(cfg, folder_like, CLF) == cfg
