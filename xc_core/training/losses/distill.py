"""Score distillation from the frozen encoder: keep the order the shipped encoder gives a row's *other* labels.

Click labels only say which label a query took; every other label of the batch is a negative to the task loss,
however related it is. Trained on clicks alone, the encoder ranks the clicked label higher and loses the graded
similarity of the rest (same product, same category), which the ranks below the top few — the candidates an ad
auction draws from — live on (``experiments/ab_depth``). This term pulls the trained encoder's in-batch score
distribution over each row's non-positive labels towards the frozen encoder's, so the task loss decides the
positive and the teacher keeps the order of the others (learning without forgetting, Li & Hoiem 2016; the
teacher is the encoder the tower starts from, so an untrained tower has zero loss).

    L_distill = mean_i KL( softmax_j(τ t_ij) || softmax_j(τ s_ij) ),   j over row i's non-positive batch labels

with s_ij the trained and t_ij the frozen encoder's cosine of document i and label j, τ = ``scale``.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def score_distillation(student: torch.Tensor, teacher: torch.Tensor, positive_mask: torch.Tensor,
                       scale: float) -> torch.Tensor:
    """KL of the teacher's from the student's softmax over each row's non-positive columns.

    ``student``/``teacher``: [B, B] cosines of document i and label j (the teacher's without gradient);
    ``positive_mask`` [B, B]: True where label j is a positive of document i (the diagonal always is).
    Rows with fewer than two non-positive columns add nothing (a one-column softmax carries no order).

    Example:
        >>> import torch
        >>> t = torch.tensor([[1.0, 0.5, 0.1], [0.2, 1.0, 0.4], [0.3, 0.1, 1.0]])
        >>> float(score_distillation(t, t, torch.eye(3, dtype=torch.bool), 20.0)) == 0.0
        True
    """
    if student.shape != teacher.shape or student.shape != positive_mask.shape:
        raise ValueError(f"student {tuple(student.shape)}, teacher {tuple(teacher.shape)} and positive_mask "
                         f"{tuple(positive_mask.shape)} must have the same [B, B] shape")
    others = ~positive_mask.to(device=student.device, dtype=torch.bool)
    others &= ~torch.eye(len(others), dtype=torch.bool, device=student.device)
    rows = others.sum(dim=1) >= 2
    if not rows.any():
        return student.sum() * 0.0
    log_s = F.log_softmax((scale * student).masked_fill(~others, float("-inf"))[rows], dim=1)
    log_t = F.log_softmax((scale * teacher).masked_fill(~others, float("-inf"))[rows], dim=1)
    kl = torch.where(others[rows], log_t.exp() * (log_t - log_s), torch.zeros_like(log_s))
    return kl.sum(dim=1).mean()
