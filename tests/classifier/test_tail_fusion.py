"""Issue #63: the classifier stage's fusion never buys the head with the tail. Its out-of-fold choice keeps the gate's
guards (the tail bin's P@5, PSP@5) at the encoder's, and a tail-bin offset lets a head-lifting channel be served
without pushing the rare labels the encoder ranked well out of the top 5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.evaluation.analyses import TAIL_BIN

HEAD, TAIL, MID = np.arange(0, 30), np.arange(30, 60), np.arange(60, 90)


def _grid(tail_bins: bool) -> Any:
    """Head rows: the positive is a popular head label the encoder ranks second, below a mid-frequency decoy (label
    popularity ρ ≥ 0.1 fixes them). Tail rows: the positive is a rare label the encoder ranks first, just above five
    head labels (any ρ > 0.06 pushes it to rank 6, unless the tail labels get their offset back)."""
    labels = np.eye(90, 128, dtype=np.float32)
    head_rows, tail_rows = 300, 150
    positive = np.r_[HEAD[np.arange(head_rows) % 30], TAIL[np.arange(tail_rows) % 30]]
    queries = np.zeros((head_rows + tail_rows, 128), np.float32)
    for row in range(head_rows):
        queries[row] = 0.45 * labels[positive[row]] + 0.5 * labels[MID[row % 30]]
    for row in range(head_rows, head_rows + tail_rows):
        queries[row] = 0.55 * labels[positive[row]] + 0.5 * labels[HEAD[(row + np.arange(5)) % 30]].sum(axis=0)
    return _fusion_grid(queries, positive, np.isin(np.arange(90), HEAD), tail_bins)


def _fusion_grid(queries: np.ndarray, positive: np.ndarray, popular: np.ndarray, tail_bins: bool = True) -> Any:
    """The grid over 90 one-hot labels: each row's one positive, the popularity prior on the ``popular`` labels, and
    (``tail_bins``) the label bins: TAIL in the tail bin, HEAD in the head's."""
    from xc_core.classifier.memory import LabelPopularity
    from xc_core.classifier.stage import FusionGrid

    labels = np.eye(90, 128, dtype=np.float32)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    truth = sp.csr_matrix((np.ones(len(positive)), (np.arange(len(positive)), positive)), shape=(len(queries), 90))
    bins = np.where(np.isin(np.arange(90), TAIL), TAIL_BIN, np.where(np.isin(np.arange(90), HEAD), 4, 2))
    return FusionGrid(queries, truth, labels, labels, 20, np.empty((0, 2), np.int64), np.ones(90),
                      channels={"popularity": LabelPopularity(popular.astype(np.float32))},
                      bins=bins if tail_bins else None)


def _config(**update: Any) -> Any:
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig

    return ClassifierConfig(alphas=(1.0,), lexical=LexicalConfig(weights=(0.0,)), memory_weights=(0.0,),
                            name_weights=(0.0,), linear_weights=(0.0,), untrained_offsets=(0.0,), **update)


def test_the_tail_offset_serves_the_head_channel_and_keeps_the_tail_at_the_encoders() -> None:
    from xc_core.classifier.channels import ENCODER_ONLY
    from xc_core.classifier.stage import OutOfFoldGrid, choose_fusion
    from xc_core.evaluation.analyses import TAIL_P5

    grid = _grid(tail_bins=True)
    served, tests, _ = choose_fusion(grid, _config())
    fusion = tests["fusion"]
    assert fusion["kept"], fusion["reason"]
    assert served["popularity_weight"] > 0 and served["tail_offset"] > 0, served
    assert served["P@1"] == 1.0, "head rows lifted by popularity, tail rows' positives kept first by the offset"
    rows = np.arange(grid.truth.shape[0])
    oof = OutOfFoldGrid([grid])
    assert fusion["tail_guard"]["served"] >= fusion["tail_guard"]["encoder"] == oof.value(ENCODER_ONLY, TAIL_P5, rows)
    assert set(fusion["guards"]) >= {"PSP@5", TAIL_P5}, "the gate's guards are the stage's"


def test_without_the_offset_the_guard_refuses_the_head_channel_and_without_bins_it_cannot_see_the_tail() -> None:
    from xc_core.classifier.stage import choose_fusion
    from xc_core.evaluation.fallback import FallbackPolicy

    guarded, tests, _ = choose_fusion(_grid(tail_bins=True), _config(tail_offsets=(0.0,)))
    assert guarded["popularity_weight"] == 0, "every ρ > 0 loses the tail rows' positives: no candidate keeps it"
    assert not tests["fusion"]["kept"]
    # main's guards (P@1, PSP@1; no tail bins): the pick buys the head with the tail, which the gate then rejects
    blind, tests, _ = choose_fusion(_grid(tail_bins=False), _config(tail_offsets=(0.0,), fallback=FallbackPolicy()))
    assert blind["popularity_weight"] > 0 and tests["fusion"]["kept"] and blind["P@5"] < guarded["P@5"], blind


def test_a_saved_classifier_serves_its_tail_offset(tmp_path: Path) -> None:
    """The offset travels with the model: saved and loaded with its labels, in the served search's per-label offsets,
    off in W's ranking alone, and a label added later (no click yet) is a tail label."""
    import pytest

    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.fusion import TAIL_FILE, FusedClassifier, fused_search
    from xc_core.index import IndexConfig, LabelIndex

    labels = np.eye(12, 16, dtype=np.float32)
    tail = np.arange(12) >= 6
    fused = FusedClassifier(labels, Fusion(tail_offset=0.3), 10, tail=tail)
    loaded = FusedClassifier.load(fused.save(tmp_path / "clf"))
    assert loaded.fusion["tail_offset"] == 0.3 and loaded.tail is not None and loaded.tail.tolist() == tail.tolist()
    offsets = loaded.label_offsets()
    assert offsets is not None and offsets[7] == pytest.approx(0.3) and offsets[2] == 0.0
    index = LabelIndex.build(labels, None, IndexConfig(kind="flat"))
    query = (0.8 * labels[[2]] + 0.6 * labels[[7]]).astype(np.float32)
    assert fused_search(query, index, index, labels, loaded, 2)[1][0].tolist() == [7, 2], "the offset lifts label 7"
    assert loaded.classifier_alone().label_offsets() is None
    assert loaded.with_new_labels(labels[:1]).tail[-1], "a label without a click yet is in the tail bin"  # type: ignore[index]
    off = FusedClassifier.load(loaded.with_fusion(tail_offset=0.0).save(tmp_path / "off"))
    assert off.fusion["tail_offset"] == 0.0 and not (tmp_path / "off" / TAIL_FILE).exists()


def test_the_grids_shared_best_gains_change_no_choice(monkeypatch: Any) -> None:
    """The out-of-fold grid computes the rows' propensity-scored best gains once for every fusion's PSP terms; with
    them recomputed per call instead, the served fusion, its record and the curve are the same to the last bit."""
    from xc_core.classifier.stage import OutOfFoldGrid, choose_fusion

    weights = 1.0 + 4.0 * np.random.default_rng(3).random(90)  # unequal propensities: PSP differs from P

    def run() -> Any:
        grid = _grid(tail_bins=True)
        grid.inv_propensity = weights
        return choose_fusion(OutOfFoldGrid([grid]), _config())

    shared = run()
    monkeypatch.setattr(OutOfFoldGrid, "_best_gains", lambda self: None)
    assert run() == shared
    assert shared[0]["PSP@5"] != shared[0]["P@5"], "the propensities weigh: the test can tell the terms apart"


def test_a_tail_offset_with_a_depth_lifts_only_the_first_candidates_in_the_grid_and_the_served_search(
        tmp_path: Path) -> None:
    """``tail_offset_depth``: the offset reorders a query's first N candidates (by the rest of the score) and leaves
    every deeper score as without it, where an auction over the top 100 reads them; the grid ranks as the served
    search does, and the depth travels with the model."""
    import pytest

    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.fusion import FusedClassifier, fused_search
    from xc_core.index import IndexConfig, LabelIndex

    labels = np.eye(12, 16, dtype=np.float32)
    tail = np.arange(12) >= 6
    # the query's cosines fall from label 0 down: tail labels 6 and 7 at ranks 7–8, tail label 9 at rank 10
    query = np.linspace(1.0, 0.45, 12, dtype=np.float32)[None, :] @ labels
    query /= np.linalg.norm(query)
    index = LabelIndex.build(labels, None, IndexConfig(kind="flat"))
    plain = fused_search(query, index, index, labels, FusedClassifier(labels, Fusion(alpha=0.999), 12), 12)
    everywhere = FusedClassifier(labels, Fusion(alpha=0.999, tail_offset=0.3), 12, tail=tail)
    deep = FusedClassifier.load(FusedClassifier(labels, Fusion(alpha=0.999, tail_offset=0.3), 12, tail=tail,
                                                tail_depth=8).save(tmp_path / "clf"))
    assert deep.tail_depth == 8 and deep.label_offsets() is None and deep.tail_lift() is not None
    lifted = fused_search(query, index, index, labels, deep, 12)
    all_lifted = fused_search(query, index, index, labels, everywhere, 12)
    assert all_lifted[1][0][:6].tolist() == [6, 7, 8, 9, 10, 11], "at every rank: every tail label first"
    assert lifted[1][0][:2].tolist() == [6, 7], "within the first 8: labels 6 and 7 lifted to the top"
    score = dict(zip(lifted[1][0].tolist(), lifted[0][0].tolist(), strict=True))
    before = dict(zip(plain[1][0].tolist(), plain[0][0].tolist(), strict=True))
    assert all(score[label] == pytest.approx(before[label]) for label in (8, 9, 10, 11)), "deeper ones untouched"
    assert score[6] == pytest.approx(before[6] + 0.3)
    # the out-of-fold grid ranks the same query the same way
    from xc_core.classifier.stage import FusionGrid

    truth = sp.csr_matrix(np.eye(1, 12, 6, dtype=np.float32))
    bins = np.where(tail, TAIL_BIN, 4)
    grid = FusionGrid(query, truth, labels, labels, 12, np.empty((0, 2), np.int64), np.ones(12), bins=bins,
                      tail_depth=8)
    assert grid.ranked(Fusion(alpha=0.999, tail_offset=0.3))[1][0].tolist() == lifted[1][0][:5].tolist()


def test_lift_top_lifts_the_first_candidates_a_stable_sort_gives_ties_included() -> None:
    from xc_core.classifier.fusion import lift_top

    rng = np.random.default_rng(0)
    score = np.round(rng.random((400, 40)), 1).astype(np.float32)  # many equal scores
    score[:, 30:] = -np.inf  # candidates a row does not have
    lift = rng.random((400, 40)).astype(np.float32)
    for depth in (1, 5, 10, 35, 40):
        top = np.argsort(-score, axis=1, kind="stable")[:, :depth]
        expected = score.copy()
        np.put_along_axis(expected, top, np.take_along_axis(score + lift, top, axis=1), axis=1)
        assert np.array_equal(lift_top(score, lift, depth), expected), depth


def test_the_grid_ranks_every_tail_offset_from_a_few_candidates_as_from_all() -> None:
    """The out-of-fold grid ranks a fusion's tail offsets from each row's first ``depth`` candidates and its top
    five open ones (``stage._TailView``): the same scores and ids, to the bit, as lifting and ranking every
    candidate — with many equal scores, own labels blocked, rows short of candidates, and either view."""
    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.fusion import lift_top
    from xc_core.classifier.shortlist import best_first
    from xc_core.classifier.stage import FusionGrid

    rng = np.random.default_rng(7)
    n_rows, n_labels = 60, 40
    labels = np.round(rng.random((n_labels, 8)), 1).astype(np.float32)  # coarse: many equal cosines
    queries = np.round(rng.random((n_rows, 8)), 1).astype(np.float32)
    truth = sp.csr_matrix((rng.random((n_rows, n_labels)) < 0.1).astype(np.float32))
    own = np.stack([np.arange(n_rows), rng.integers(0, n_labels, n_rows)], axis=1)  # a blocked label per row
    bins = np.where(rng.random(n_labels) < 0.5, TAIL_BIN, 4)
    for depth in (1, 3, 10):
        grid = FusionGrid(queries, truth, labels, labels[::-1].copy(), 6, own, np.ones(n_labels), bins=bins,
                          tail_depth=depth)
        grid.candidates[::7, -3:] = -1  # rows short of candidates
        grid.blocked = grid.blocked | (grid.candidates < 0)
        for alpha in (0.0, 0.5, 1.0):
            base = alpha * grid.encoder_scores + (1 - alpha) * grid.classifier_scores
            padded = np.where(grid.candidates < 0, -np.inf, base).astype(np.float32)
            for tau in (0.0, 0.05, 0.3, 5.0):
                lifted = lift_top(padded, (np.float32(tau) * grid.on_tail).astype(np.float32), depth)
                expected = best_first(np.where(grid.blocked, -np.inf, lifted).astype(np.float32), grid.candidates, 5)
                found = grid.ranked(Fusion(alpha=alpha, tail_offset=tau))
                assert np.array_equal(found[1], expected[1]) and np.array_equal(found[0], expected[0]), (depth, tau)


def test_the_out_of_fold_grid_ranks_each_row_as_its_own_fold_does() -> None:
    """``OutOfFoldGrid`` ranks every fold's rows in one stacked grid: candidates padded to the widest fold, a
    channel one fold lacks scoring 0 there. Each row's scores and ids equal its own fold's ranking, in both views,
    with and without a tail offset."""
    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.stage import FusionGrid, OutOfFoldGrid

    rng = np.random.default_rng(11)
    n_labels = 50
    labels = np.round(rng.random((n_labels, 8)), 1).astype(np.float32)
    bins = np.where(rng.random(n_labels) < 0.4, TAIL_BIN, 4)
    parts = []
    for n_rows, search_k in ((30, 6), (20, 6)):
        queries = np.round(rng.random((n_rows, 8)), 1).astype(np.float32)
        truth = sp.csr_matrix((rng.random((n_rows, n_labels)) < 0.1).astype(np.float32))
        weights = np.round(rng.random((n_labels, 8)), 1).astype(np.float32)
        untrained = rng.random(n_labels) < 0.2
        parts.append(FusionGrid(queries, truth, labels, weights, search_k, np.empty((0, 2), np.int64),
                                np.ones(n_labels), untrained=untrained, bins=bins, tail_depth=4))
    narrow = parts[1]  # a narrower fold: its last two candidates dropped
    for name in ("candidates", "encoder_scores", "classifier_scores", "blocked", "on_untrained", "on_tail"):
        setattr(narrow, name, getattr(narrow, name)[:, :-2])
    parts[0].channel_scores["lexical"] = np.round(rng.random(parts[0].candidates.shape), 1).astype(np.float32)
    assert parts[0].candidates.shape[1] != parts[1].candidates.shape[1]
    grid = OutOfFoldGrid(parts)
    for fusion in (Fusion(alpha=0.5), Fusion(alpha=0.3, lexical_weight=0.4, untrained_offset=0.1, tail_offset=0.2),
                   Fusion(alpha=1.0, tail_offset=0.05)):
        for seen in (False, True):
            found = [p.ranked(fusion, seen=seen) for p in parts]
            scores, ids = grid.ranked(fusion, seen=seen)
            assert np.array_equal(ids, np.concatenate([f[1] for f in found])), (fusion, seen)
            assert np.array_equal(scores, np.concatenate([f[0] for f in found])), (fusion, seen)


def test_the_tail_guards_margin_reads_the_paired_standard_error_and_is_one_by_default() -> None:
    """``tail_guard_margin`` (issue #63, the AVX2 run): a candidate's tail-bin P@5 must exceed the encoder's by that
    many standard errors of the paired per-row difference; the error is the numpy one, and it defaults to 1."""
    from xc_core.classifier.channels import ENCODER_ONLY, Fusion
    from xc_core.classifier.stage import OutOfFoldGrid, choose_fusion
    from xc_core.evaluation.analyses import TAIL_P5
    from xc_core.evaluation.fallback import RowTerms

    grid = _grid(tail_bins=True)
    oof = OutOfFoldGrid([grid])
    rows = np.arange(grid.truth.shape[0])
    pushed = Fusion(popularity_weight=0.1)  # pushes every tail positive to rank 6: a loss on each tail row
    terms = RowTerms(oof.truth, oof.inv_propensity, oof.tail_truth)
    differences = terms(TAIL_P5, oof.top(pushed))[TAIL_P5] - terms(TAIL_P5, oof.top(ENCODER_ONLY))[TAIL_P5]
    assert differences.min() < 0
    assert oof.paired_se(pushed, TAIL_P5, rows) == np.std(differences, ddof=1) / np.sqrt(len(rows))
    assert oof.paired_se(ENCODER_ONLY, TAIL_P5, rows) == 0.0
    assert oof.paired_se(pushed, "PSP@5", rows) == 0.0, "a ratio of sums has no per-row difference"
    assert _config().tail_guard_margin == 1.0
    served, _, _ = choose_fusion(grid, _config(tail_guard_margin=0.0))
    # the served fusion restores each tail row exactly (no per-row difference, so no error): a margin changes nothing
    assert choose_fusion(grid, _config(tail_guard_margin=2.0))[0] == served


def _mixed_tail_grid(gains: int, losses: int) -> Any:
    """Head rows as in :func:`_grid`. Tail rows of two kinds: a popular tail label the encoder ranks sixth, below five
    mid labels (the popularity prior lifts it: a gain), and an unpopular one it ranks first, above five head labels
    (the prior pushes it to rank 6: a loss). With a few more gains than losses the prior's tail gain is positive
    but well inside one standard error of the per-row difference."""
    labels = np.eye(90, 128, dtype=np.float32)
    lifted, pushed = TAIL[:15], TAIL[15:]
    head_rows = 300
    rows = head_rows + gains + losses
    positive = np.r_[HEAD[np.arange(head_rows) % 30], lifted[np.arange(gains) % 15], pushed[np.arange(losses) % 15]]
    queries = np.zeros((rows, 128), np.float32)
    for row in range(rows):
        if row < head_rows:
            queries[row] = 0.45 * labels[positive[row]] + 0.5 * labels[MID[row % 30]]
        elif row < head_rows + gains:
            queries[row] = 0.5 * labels[positive[row]] + 0.55 * labels[MID[(row + np.arange(5)) % 30]].sum(axis=0)
        else:
            queries[row] = 0.55 * labels[positive[row]] + 0.5 * labels[HEAD[(row + np.arange(5)) % 30]].sum(axis=0)
    return _fusion_grid(queries, positive, np.isin(np.arange(90), np.r_[HEAD, lifted]))


def test_the_tail_guards_margin_refuses_a_tail_gain_inside_its_standard_error() -> None:
    """The AVX2 run's failure in miniature: the P@1-best fusion keeps the tail guard in sample by a hair (more tail
    rows lifted than pushed out, by less than one standard error). Without a margin it is served; with the default
    margin the stage keeps the encoder alone, and a clear tail gain still passes."""
    from xc_core.classifier.channels import ENCODER_ONLY, Fusion
    from xc_core.classifier.stage import OutOfFoldGrid, choose_fusion
    from xc_core.evaluation.analyses import TAIL_P5

    no_offset = {"tail_offsets": (0.0,)}
    near = _mixed_tail_grid(gains=80, losses=70)
    oof, rows = OutOfFoldGrid([near]), np.arange(near.truth.shape[0])
    served = choose_fusion(near, _config(tail_guard_margin=0.0, **no_offset))[0]
    assert served["popularity_weight"] > 0, served
    prior = Fusion(popularity_weight=served["popularity_weight"])
    gain = oof.value(prior, TAIL_P5, rows) - oof.value(ENCODER_ONLY, TAIL_P5, rows)
    assert 0 < gain < oof.paired_se(prior, TAIL_P5, rows), "the fixture's tail gain sits inside one standard error"
    assert choose_fusion(near, _config(**no_offset))[0]["popularity_weight"] == 0
    clear = _mixed_tail_grid(gains=120, losses=30)
    assert choose_fusion(clear, _config(**no_offset))[0]["popularity_weight"] > 0
