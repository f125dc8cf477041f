"""Out-of-fold rows of the classifier stage follow the data set's split kind: rolling-origin blocks of days on an
event log (a repeated query is trained on with its earlier clicks, scored on its later ones), document folds
elsewhere; rows the encoder trained on are never scored."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.folds import document_folds, out_of_fold
from xc_core.datasets.container import XCDataset


def test_temporal_folds_refit_on_the_days_before_each_block_and_score_its_clicks(tiny_data: XCDataset) -> None:
    days = tiny_data.train_pair_days
    assert len(days) and (days[:, 2] >= 0).all()
    folds = out_of_fold(tiny_data, folds=10, max_rows=10_000, seed=0, time_blocks=3)
    assert len(folds) == 3 and all(f.name.startswith("days ") for f in folds)
    starts = [int(f.name.split()[1].split("-")[0]) for f in folds]
    assert starts == sorted(starts)
    repeated = 0
    for fold, start in zip(folds, starts, strict=True):
        end = int(fold.name.split("-")[1]) + 1
        fit_pairs = {(d, j) for d, j, day in days.tolist() if day < start}
        block_pairs = {(d, j) for d, j, day in days.tolist() if start <= day < end}
        y_fit = sp.csr_matrix(fold.y_fit)
        assert set(zip(*y_fit.nonzero(), strict=True)) == fit_pairs  # W never reads the block's clicks
        rows, cols = fold.truth.nonzero()
        scored = set(fold.score_rows.tolist())
        assert {(int(fold.score_rows[r]), int(c)) for r, c in zip(rows, cols, strict=True)} == {
            (d, j) for d, j in block_pairs if d in scored}
        assert set(fold.fit_rows) == {d for d, _ in fit_pairs}
        assert scored == {d for d, _ in block_pairs}, "every query of the block, in the block's own mix"
        repeated += len(scored & set(fold.fit_rows.tolist()))
    assert repeated > 0, "queries asked before a block are scored too, as repeated test queries are"


def test_document_folds_partition_the_labelled_documents_and_skip_the_encoders_rows(tiny_data: XCDataset) -> None:
    data = dataclasses.replace(tiny_data, train_pair_days=np.empty((0, 3), np.int64))
    labelled = np.flatnonzero(np.diff(sp.csr_matrix(data.y_train).indptr) > 0)
    never = np.zeros(len(data.train_texts), bool)
    never[labelled[::4]] = True  # as if the encoder had trained on every fourth document
    folds = document_folds(data, folds=5, max_rows=10_000, seed=0, never=never)
    scored = np.concatenate([f.score_rows for f in folds])
    assert len(scored) == len(np.unique(scored)) and not never[scored].any()
    assert set(scored) == set(labelled[~never[labelled]])
    for fold in folds:
        assert not set(fold.fit_rows) & set(fold.score_rows) and len(fold.fit_rows) >= 0.75 * len(labelled)
        assert (fold.truth != sp.csr_matrix(data.y_train)[fold.score_rows]).nnz == 0
    few = document_folds(data, folds=5, max_rows=50, seed=0, never=np.zeros(len(data.train_texts), bool))
    assert all(len(f.score_rows) == 10 for f in few)  # the cost cap: max_rows split over the folds


def test_temporal_blocks_are_added_before_the_first_until_the_rows_can_show_a_gain(tiny_data: XCDataset) -> None:
    base = out_of_fold(tiny_data, folds=10, max_rows=10_000, seed=0, time_blocks=2)
    rows = sum(len(f.score_rows) for f in base)
    grown = out_of_fold(tiny_data, folds=10, max_rows=10_000, seed=0, time_blocks=2, min_rows=rows + 1, max_blocks=6)
    assert len(grown) > len(base) and sum(len(f.score_rows) for f in grown) > rows
    assert [f.name for f in grown[-len(base):]] == [f.name for f in base]  # the same blocks, earlier ones added
    n_days = int(tiny_data.train_pair_days[:, 2].max()) + 1
    first = int(grown[0].name.split()[1].split("-")[0])
    assert 3 * first >= n_days, "the first block's W still fits on a third of the window"
    capped = out_of_fold(tiny_data, folds=10, max_rows=10_000, seed=0, time_blocks=2, min_rows=10**9, max_blocks=3)
    assert len(capped) == 3  # max_blocks bounds the refits, however short of rows
    enough = out_of_fold(tiny_data, folds=10, max_rows=10_000, seed=0, time_blocks=2, min_rows=rows, max_blocks=6)
    assert [f.name for f in enough] == [f.name for f in base]


def _fusion_test(data: XCDataset, home: Path, out: Path, fold_workers: int) -> tuple[list, dict]:
    """The stage's out-of-fold grid and the fusion test it printed, the folds refit ``fold_workers`` at a time."""
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.stage import fit_classifier_stage
    from xc_core.profiles import encoder_config, get_profile

    encoder = Path(encoder_config(get_profile("tiny"), home).model_path or "")
    # test-sized refits and a small grid: what is compared is the fold threads, not the grid's breadth
    cfg = ClassifierConfig(folds=2, epochs=1, random_negatives=256, fold_workers=fold_workers,
                           alphas=(0.5, 1.0), untrained_offsets=(0.0, 0.1), linear_weights=(0.0, 0.4),
                           memory_weights=(0.0, 1.6), popularity_weights=(0.0, 0.1), name_weights=(0.0, 0.4),
                           tail_offsets=(0.0, 0.1))
    fused = fit_classifier_stage(data, encoder, 16, cfg, out)
    return fused.info["alpha_curve"], fused.info["fallback_tests"]["fusion"]


def test_folds_refit_two_at_a_time_give_the_grid_and_test_of_one_at_a_time(tiny_data: XCDataset, tiny_home: Path,
                                                                           tmp_path: Path) -> None:
    """The refits are independent: the threads change the wall time, never the curve, the served fusion or its
    out-of-fold test."""
    curve, test = _fusion_test(tiny_data, tiny_home, tmp_path / "two", fold_workers=2)
    alone_curve, alone = _fusion_test(tiny_data, tiny_home, tmp_path / "one", fold_workers=1)
    assert len(curve) > 1 and test["folds"] >= 2
    assert alone_curve == curve and alone["served"] == test["served"]
    assert (alone["gain"], alone["low"], alone["high"]) == (test["gain"], test["low"], test["high"])
