"""Loss values on hand-computed examples: margin, hardest negatives, masking of true positives/anchors."""

from __future__ import annotations

import math

import torch

from xc_core.training.losses import GraphRegularizer, TripletLoss, hard_triplet_margin


def _unit(*angles_deg: float) -> torch.Tensor:
    rad = torch.tensor(angles_deg, dtype=torch.float64) * math.pi / 180
    return torch.stack([torch.cos(rad), torch.sin(rad)], dim=1)


def test_triplet_uses_the_hardest_negative_with_margin() -> None:
    docs = _unit(0, 90, 180)
    labels = _unit(10, 100, 260)  # cos(doc_i, label_i) = cos 10°, cos 10°, cos 80°
    scores = docs @ labels.T
    mask = torch.eye(3, dtype=torch.bool)
    loss = TripletLoss(margin=0.3, hard_negatives=1)(docs, labels, mask)
    expected = []
    for i in range(3):
        hardest = max(scores[i, j] for j in range(3) if j != i)
        expected.append(max(0.0, 0.3 - float(scores[i, i]) + float(hardest)))
    assert math.isclose(float(loss), sum(expected) / 3, rel_tol=1e-9)


def test_all_negatives_average_every_hinge_term() -> None:
    docs, labels = _unit(0, 90, 180), _unit(10, 100, 260)
    scores = docs @ labels.T
    terms = [max(0.0, 0.3 - float(scores[i, i]) + float(scores[i, j])) for i in range(3) for j in range(3) if j != i]
    loss = TripletLoss(margin=0.3, hard_negatives=None)(docs, labels, torch.eye(3, dtype=torch.bool))
    assert math.isclose(float(loss), sum(terms) / len(terms), rel_tol=1e-9)


def test_a_true_positive_in_the_batch_is_never_a_negative() -> None:
    docs, labels = _unit(0, 0), _unit(5, 5)  # row 1's label is also a positive of row 0 and vice versa
    both_positive = torch.ones(2, 2, dtype=torch.bool)
    assert float(TripletLoss()(docs, labels, both_positive)) == 0.0
    assert float(TripletLoss()(docs, labels, torch.eye(2, dtype=torch.bool))) > 0.0


def test_zero_loss_still_backpropagates() -> None:
    docs = _unit(0, 90).requires_grad_(True)
    loss = TripletLoss()(docs, _unit(0, 90), torch.ones(2, 2, dtype=torch.bool))
    loss.backward()
    assert docs.grad is not None and float(loss) == 0.0


def test_regularizer_ignores_rows_without_anchor_as_rows_and_as_negatives() -> None:
    nodes, anchors = _unit(0, 90, 45), _unit(20, 110, 0)
    valid = torch.tensor([True, True, False])
    none = torch.zeros(3, 3, dtype=torch.bool)
    value = GraphRegularizer(margin=0.3, hard_negatives=1)(nodes, anchors, valid, none)
    s = nodes @ anchors.T
    expected = (max(0, 0.3 - s[0, 0] + s[0, 1]) + max(0, 0.3 - s[1, 1] + s[1, 0])) / 2
    assert math.isclose(float(value), float(expected), rel_tol=1e-9)
    own = torch.tensor([[False, True, False], [True, False, False], [False, False, False]])
    assert float(GraphRegularizer()(nodes, anchors, valid, own)) == 0.0  # each other's anchors: nothing to push


def test_gradients_pull_the_positive_and_push_the_negative() -> None:
    scores = torch.tensor([[0.1, 0.5], [0.0, 0.9]], requires_grad=True)
    loss = hard_triplet_margin(scores, torch.ones(2, 2, dtype=torch.bool), margin=0.3, hard_negatives=1)
    loss.backward()
    assert scores.grad[0, 0] < 0 < scores.grad[0, 1]  # raise the positive, lower the negative
    assert scores.grad[1, 0] == 0 and scores.grad[1, 1] == 0  # row 1 satisfies the margin
