"""RAMEN losses on hand-computed batches: margin, hardest negative, masking, invalid rows, gradients."""

from __future__ import annotations

import doctest
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from xc_core.training.losses import GraphRegularizer, TripletLoss, hard_triplet_margin
from xc_core.training.losses import graph_regularizer as graph_regularizer_module
from xc_core.training.losses import triplet as triplet_module

# Documents are the axes e_0, e_1, e_2, so cos(x_i, z_j) is coordinate i of z_j and the score matrix is the
# transpose of LABELS:
#            z_0  z_1  z_2
#   x_0  [   0.6  0.8  0.0 ]   positive 0.6; hardest negative z_1 (0.8): 0.3 − 0.6 + 0.8 = 0.5; z_2: 0
#   x_1  [   0.0  0.6  0.6 ]   positive 0.6; hardest negative z_2 (0.6): 0.3 − 0.6 + 0.6 = 0.3; z_0: 0
#   x_2  [   0.8  0.0  0.8 ]   positive 0.8; hardest negative z_0 (0.8): 0.3 − 0.8 + 0.8 = 0.3; z_1: 0
DOCS = torch.eye(3, dtype=torch.float64)
LABELS = torch.tensor([[0.6, 0.0, 0.8], [0.8, 0.6, 0.0], [0.0, 0.6, 0.8]], dtype=torch.float64)
ONLY_SELF = torch.eye(3, dtype=torch.bool)


def _close(value: torch.Tensor, expected: float) -> bool:
    return math.isclose(float(value), expected, abs_tol=1e-12)


def test_example_batch_is_unit_vectors_with_the_scores_in_the_comment() -> None:
    assert torch.allclose(LABELS.norm(dim=1), torch.ones(3, dtype=torch.float64))
    assert torch.equal(DOCS @ LABELS.T, LABELS.T)


def test_triplet_takes_the_hardest_negative_of_each_row_with_margin() -> None:
    loss = TripletLoss(margin=0.3, hard_negatives=1)(DOCS, LABELS, ONLY_SELF)
    assert _close(loss, (0.5 + 0.3 + 0.3) / 3)


def test_triplet_with_all_negatives_averages_every_hinge_including_zeros() -> None:
    loss = TripletLoss(margin=0.3, hard_negatives=None)(DOCS, LABELS, ONLY_SELF)
    assert _close(loss, (0.5 + 0.0 + 0.3 + 0.0 + 0.3 + 0.0) / 6)


def test_triplet_default_is_margin_0_3_and_one_hard_negative() -> None:
    assert _close(TripletLoss()(DOCS, LABELS, ONLY_SELF), 1.1 / 3)


def test_a_true_positive_in_the_batch_is_not_used_as_a_negative() -> None:
    mask = ONLY_SELF.clone()
    mask[0, 1] = True  # z_1 is also a positive of x_0: its next-hardest negative is z_2, 0.3 − 0.6 + 0 → 0
    assert _close(TripletLoss()(DOCS, LABELS, mask), (0.0 + 0.3 + 0.3) / 3)


def test_a_row_whose_only_negatives_are_true_positives_contributes_nothing() -> None:
    mask = ONLY_SELF.clone()
    mask[0, 1] = mask[0, 2] = True  # x_0 has no negative left: out of the mean, not a zero term in it
    assert _close(TripletLoss()(DOCS, LABELS, mask), (0.3 + 0.3) / 2)


def test_loss_is_zero_and_still_differentiable_when_no_row_has_a_negative() -> None:
    docs = DOCS.clone().requires_grad_(True)
    labels = LABELS.clone().requires_grad_(True)
    loss = TripletLoss()(docs, labels, torch.ones(3, 3, dtype=torch.bool))
    assert float(loss.detach()) == 0.0 and loss.grad_fn is not None
    loss.backward()
    assert docs.grad is not None and labels.grad is not None
    assert not docs.grad.any() and not labels.grad.any()


def test_gradient_lowers_the_chosen_negative_and_raises_the_positive_only_for_active_terms() -> None:
    scores = (DOCS @ LABELS.T).clone().requires_grad_(True)
    hard_triplet_margin(scores, ~ONLY_SELF, margin=0.3, hard_negatives=1).backward()
    third = 1 / 3  # three terms, each hinge active: d/ds_ii = −1/3, d/ds_ij (chosen j) = +1/3
    expected = torch.tensor([[-third, third, 0.0], [0.0, -third, third], [third, 0.0, -third]], dtype=torch.float64)
    assert scores.grad is not None and torch.allclose(scores.grad, expected)


def test_gradients_reach_both_encoders_through_the_embeddings() -> None:
    docs = DOCS.clone().requires_grad_(True)
    labels = LABELS.clone().requires_grad_(True)
    TripletLoss()(docs, labels, ONLY_SELF).backward()
    assert docs.grad is not None and labels.grad is not None
    assert docs.grad.abs().sum() > 0 and labels.grad.abs().sum() > 0


def test_regularizer_excludes_a_row_without_anchor_as_row_and_as_negative() -> None:
    # Row 2 invalid. x_0: only negative left is a_1 (0.8) → 0.5. x_1: a_2 (0.6, would give 0.3) is padding,
    # so its hardest is a_0 (0.0) → 0.3 − 0.6 + 0 → 0. Row 2 itself (0.3) is out of the mean.
    valid = torch.tensor([True, True, False])
    value = GraphRegularizer()(DOCS, LABELS, valid, torch.zeros(3, 3, dtype=torch.bool))
    assert _close(value, (0.5 + 0.0) / 2)


def test_regularizer_does_not_push_a_node_from_its_own_other_anchors() -> None:
    neighbour = torch.zeros(3, 3, dtype=torch.bool)
    neighbour[0, 1] = True  # a_1 is also an anchor of x_0: x_0 falls back to a_2, 0.3 − 0.6 + 0 → 0
    value = GraphRegularizer()(DOCS, LABELS, torch.ones(3, dtype=torch.bool), neighbour)
    assert _close(value, (0.0 + 0.3 + 0.3) / 3)


def test_regularizer_gives_no_gradient_to_an_invalid_row() -> None:
    nodes = DOCS.clone().requires_grad_(True)
    anchors = LABELS.clone().requires_grad_(True)
    valid = torch.tensor([True, True, False])
    GraphRegularizer()(nodes, anchors, valid, torch.zeros(3, 3, dtype=torch.bool)).backward()
    assert nodes.grad is not None and anchors.grad is not None
    assert not nodes.grad[2].any() and not anchors.grad[2].any()
    assert nodes.grad[0].any() and anchors.grad[1].any()  # x_0 pushed from a_1


def test_regularizer_with_every_row_invalid_is_a_differentiable_zero() -> None:
    nodes = DOCS.clone().requires_grad_(True)
    value = GraphRegularizer()(nodes, LABELS, torch.zeros(3, dtype=torch.bool), torch.zeros(3, 3, dtype=torch.bool))
    value.backward()
    assert float(value.detach()) == 0.0 and nodes.grad is not None


def test_mismatched_mask_shape_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive_mask"):
        TripletLoss()(DOCS, LABELS, torch.eye(2, dtype=torch.bool))


def _reference(scores: torch.Tensor, negatives: torch.Tensor, margin: float, hard: int | None,
               valid: torch.Tensor) -> float:
    """The definition written as plain loops, to check the vectorised version against."""
    terms: list[float] = []
    b = scores.shape[0]
    for i in range(b):
        if not valid[i]:
            continue
        allowed = sorted((float(scores[i, j]) for j in range(b) if j != i and negatives[i, j] and valid[j]),
                         reverse=True)
        terms += [max(0.0, margin - float(scores[i, i]) + s) for s in allowed[: hard or b]]
    return sum(terms) / len(terms) if terms else 0.0


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 7), hard=st.one_of(st.none(), st.integers(1, 8)), seed=st.integers(0, 2**16))
def test_vectorised_loss_matches_the_loop_definition(b: int, hard: int | None, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(b, b, generator=g, dtype=torch.float64) * 2 - 1
    negatives = torch.rand(b, b, generator=g) < 0.7
    valid = torch.rand(b, generator=g) < 0.8
    value = hard_triplet_margin(scores, negatives, 0.3, hard, valid=valid)
    assert math.isclose(float(value), _reference(scores, negatives, 0.3, hard, valid), abs_tol=1e-12)


def test_docstring_examples_hold() -> None:
    for module in (triplet_module, graph_regularizer_module):
        assert doctest.testmod(module, raise_on_error=False).failed == 0


# -- in-batch softmax family -----------------------------------------------------------------------------
def test_softmax_loss_is_cross_entropy_over_the_scaled_row_scores() -> None:
    from xc_core.training.losses import InBatchSoftmaxLoss

    loss = InBatchSoftmaxLoss(scale=2.0)(DOCS, LABELS, ONLY_SELF)
    scores = 2.0 * (DOCS @ LABELS.T)
    expected = float(torch.nn.functional.cross_entropy(scores, torch.arange(3)))
    assert _close(loss, expected)


def test_softmax_loss_keeps_known_positives_out_of_the_denominator() -> None:
    from xc_core.training.losses import InBatchSoftmaxLoss

    mask = ONLY_SELF.clone()
    mask[0, 1] = True  # z_1 is also a positive of x_0: it must not compete with z_0
    loss = InBatchSoftmaxLoss(scale=2.0)(DOCS, LABELS, mask)
    scores = 2.0 * (DOCS @ LABELS.T)
    row0 = -torch.log_softmax(scores[0, [0, 2]], dim=0)[0]
    rest = [-torch.log_softmax(scores[i], dim=0)[i] for i in (1, 2)]
    assert _close(loss, float((row0 + sum(rest)) / 3))


def test_softmax_regularizer_ignores_rows_without_an_anchor_and_their_columns() -> None:
    from xc_core.training.losses import SoftmaxGraphRegularizer

    valid = torch.tensor([True, True, False])
    reg = SoftmaxGraphRegularizer(scale=2.0)(DOCS, LABELS, valid, torch.zeros(3, 3, dtype=torch.bool))
    scores = 2.0 * (DOCS @ LABELS.T)[:2, :2]  # row 2 and column 2 (padding) take no part
    assert _close(reg, float(torch.nn.functional.cross_entropy(scores, torch.arange(2))))
    none = SoftmaxGraphRegularizer()(DOCS, LABELS, torch.zeros(3, dtype=torch.bool),
                                     torch.zeros(3, 3, dtype=torch.bool))
    assert float(none) == 0.0


def test_softmax_module_docstrings_run() -> None:
    from xc_core.training.losses import softmax as softmax_module

    assert doctest.testmod(softmax_module).failed == 0


def test_loss_family_names_every_pair_and_refuses_unknown_names() -> None:
    from xc_core.training.config import TrainConfig
    from xc_core.training.losses import LOSS_FAMILIES, loss_family

    for name in LOSS_FAMILIES:
        task, regularizer = loss_family(name, TrainConfig())
        assert isinstance(task, torch.nn.Module) and isinstance(regularizer, torch.nn.Module)
    with pytest.raises(ValueError, match="unknown loss"):
        loss_family("hinge", TrainConfig())


# -- score distillation from the frozen encoder (losses/distill.py) --------------------------------------------------
def test_distillation_is_zero_for_the_teacher_and_blind_to_the_positives() -> None:
    from xc_core.training.losses import distill

    teacher = torch.tensor([[0.9, 0.5, 0.1, 0.3], [0.2, 0.8, 0.4, 0.0], [0.3, 0.1, 0.7, 0.6], [0.1, 0.2, 0.3, 0.9]])
    positives = torch.eye(4, dtype=torch.bool)
    positives[0, 3] = True  # a second known positive of row 0 leaves its softmax too
    assert float(distill.score_distillation(teacher, teacher, positives, 20.0)) == 0.0
    moved = teacher.clone()
    moved[0, 0], moved[0, 3], moved[1, 1] = -1.0, 5.0, 3.0  # only positives move: nothing to distil
    assert float(distill.score_distillation(moved, teacher, positives, 20.0)) < 1e-6
    swapped = teacher.clone()
    swapped[0, 1], swapped[0, 2] = teacher[0, 2], teacher[0, 1]  # row 0's two other labels change order
    assert float(distill.score_distillation(swapped, teacher, positives, 20.0)) > 0.1
    assert doctest.testmod(distill).failed == 0


def test_distillation_pulls_the_student_towards_the_teachers_order_and_skips_short_rows() -> None:
    from xc_core.training.losses.distill import score_distillation

    teacher = torch.tensor([[0.9, 0.6, 0.1], [0.2, 0.8, 0.4], [0.3, 0.1, 0.7]])
    student = teacher.clone()
    student[0, 1], student[0, 2] = 0.1, 0.6
    student.requires_grad_(True)
    score_distillation(student, teacher, torch.eye(3, dtype=torch.bool), 20.0).backward()
    grad = student.grad
    assert grad is not None and grad[0, 1] < 0 < grad[0, 2]  # descent raises the teacher's favourite label
    two_positives = torch.tensor([[True, True, False], [False, True, False], [False, False, True]])
    base = float(score_distillation(student.detach(), teacher, two_positives, 20.0))
    changed = student.detach().clone()
    changed[0, 2] = -0.9  # row 0 has one other label left: no order to keep, so it adds nothing
    assert float(score_distillation(changed, teacher, two_positives, 20.0)) == pytest.approx(base, abs=1e-7)
    with pytest.raises(ValueError, match="same"):
        score_distillation(student.detach(), teacher[:2], torch.eye(3, dtype=torch.bool), 20.0)
