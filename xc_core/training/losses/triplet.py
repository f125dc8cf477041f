"""RAMEN's task loss L: a triplet margin loss over cosine scores with online hard negative mining."""

from __future__ import annotations

import torch
from torch import nn


def _check(scores: torch.Tensor, mask: torch.Tensor, name: str) -> None:
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"scores must be a square [B, B] matrix, got {tuple(scores.shape)}")
    if mask.shape != scores.shape:
        raise ValueError(f"{name} must have the shape of scores {tuple(scores.shape)}, got {tuple(mask.shape)}")


def anchor_scores(node_emb: torch.Tensor, anchor_emb: torch.Tensor, valid: torch.Tensor,
                  anchor_is_neighbour: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A regularizer's batch, checked: (scores [B, B] = node_i · anchor_j, negatives [B, B] = not an own anchor)."""
    scores = node_emb @ anchor_emb.T
    _check(scores, anchor_is_neighbour, "anchor_is_neighbour")
    if valid.shape != scores.shape[:1]:
        raise ValueError(f"valid must have shape ({scores.shape[0]},), got {tuple(valid.shape)}")
    return scores, ~anchor_is_neighbour.to(device=scores.device, dtype=torch.bool)


def hard_triplet_margin(scores: torch.Tensor, negatives: torch.Tensor, margin: float, hard_negatives: int | None,
                        valid: torch.Tensor | None = None) -> torch.Tensor:
    """Mean hinge max(0, γ − s_ii + s_ij) over the ``hard_negatives`` hardest allowed negatives j of each valid row.

    ``scores[i, j]`` = cos(left_i, right_j) and the positive of row i is ``scores[i, i]``. Row i may push away
    column j only if ``negatives[i, j]``, j ≠ i and (when ``valid`` is given) both i and j are valid.
    ``hard_negatives=None`` keeps every allowed negative. The mean runs over the (row, chosen negative) pairs
    that exist, hinges at zero included; a row without any allowed negative adds no term at all. With no
    term anywhere the result is a zero still connected to ``scores``, so ``backward()`` works unchanged.
    """
    _check(scores, negatives, "negatives")
    if hard_negatives is not None and hard_negatives < 1:
        raise ValueError(f"hard_negatives must be >= 1 or None, got {hard_negatives}")
    # Masks are usually built on the CPU from numpy while the scores may live on an accelerator.
    allowed = negatives.to(device=scores.device, dtype=torch.bool).clone()
    allowed.fill_diagonal_(False)
    if valid is not None:
        valid = valid.to(device=scores.device, dtype=torch.bool)
        allowed &= valid[:, None] & valid[None, :]
    n = scores.shape[1]
    top, _ = torch.topk(scores.masked_fill(~allowed, float("-inf")), min(hard_negatives or n, n), dim=1)
    present = torch.isfinite(top)  # −inf marks a slot the row had no allowed negative for
    # Fill before the arithmetic so no −inf (or its NaN gradient) ever enters the graph.
    hinge = torch.clamp(margin - scores.diagonal().unsqueeze(1) + top.masked_fill(~present, 0.0), min=0.0)
    count = present.sum()
    if count == 0:
        return scores.sum() * 0.0
    return hinge.masked_fill(~present, 0.0).sum() / count


class TripletLoss(nn.Module):
    """RAMEN's task loss L: triplet margin over cosine scores with the hardest in-batch negatives.

    Paper: A. Mittal et al., "Graph Regularized Encoder Training for Extreme Classification" (RAMEN,
    arXiv:2402.18434); the in-batch online hard negative mining is the one of NGAME (Dahiya et al., 2023)
    and ANCE (Xiong et al., 2021).

    Formula: with s_ij = cos(x_i, z_j), z_i the label sampled for document x_i, N_i the in-batch labels
    that are not positives of x_i and top-h(N_i) the h of them that x_i scores highest,

        L = mean over (i, j ∈ top-h(N_i)) of max(0, γ − s_ii + s_ij),     γ = 0.3, h = ``hard_negatives``.

    Batch layout: ``doc_emb`` [B, d] and ``label_emb`` [B, d] hold L2-normalised rows (cosine = dot
    product), row i of each forming a positive pair; ``positive_mask`` [B, B] bool is True at (i, j) when
    the label of row j is also a positive of document i, so it is never pushed away (a row whose every
    in-batch label is a positive adds nothing). The diagonal may be either value.

    Example:
        >>> import torch
        >>> docs = torch.eye(2)                                # unit rows
        >>> labels = torch.tensor([[0.6, 0.8], [0.8, 0.6]])    # cos(x_0, z_0) = 0.6, cos(x_0, z_1) = 0.8
        >>> loss = TripletLoss(margin=0.3, hard_negatives=1)
        >>> round(float(loss(docs, labels, torch.eye(2, dtype=torch.bool))), 4)  # (0.5 + 0.5) / 2
        0.5
    """

    def __init__(self, margin: float = 0.3, hard_negatives: int | None = 1) -> None:
        super().__init__()
        self.margin, self.hard_negatives = margin, hard_negatives

    def forward(self, doc_emb: torch.Tensor, label_emb: torch.Tensor, positive_mask: torch.Tensor) -> torch.Tensor:
        scores = doc_emb @ label_emb.T
        _check(scores, positive_mask, "positive_mask")
        return hard_triplet_margin(scores, ~positive_mask.to(device=scores.device, dtype=torch.bool),
                                   self.margin, self.hard_negatives)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, hard_negatives={self.hard_negatives}"
