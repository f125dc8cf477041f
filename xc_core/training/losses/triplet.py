"""RAMEN's task loss: triplet margin loss over cosine scores with online hard negative mining.

Formula (RAMEN eq. 1, as in NGAME/ANCE): for document x_i with its sampled positive label z_i and in-batch
negatives N_i (other rows' labels that are not positives of x_i),

    L = mean over (i, j ∈ top-h(N_i)) of max(0, γ − cos(x_i, z_i) + cos(x_i, z_j)),

where top-h picks the h highest-scoring negatives of row i (the hardest) and γ = 0.3.

Batch layout: ``doc_emb[i]`` and ``label_emb[i]`` are unit vectors (so cosine is a dot product);
``positive_mask[i, j]`` is True when the label sampled for row j is also a positive of document i.

    >>> loss = TripletLoss(margin=0.3, hard_negatives=3)
    >>> value = loss(doc_emb, label_emb, positive_mask)   # doctest: +SKIP
"""

from __future__ import annotations

import torch
from torch import nn


def hard_triplet_margin(scores: torch.Tensor, negatives: torch.Tensor, margin: float, hard_negatives: int | None,
                        valid: torch.Tensor | None = None) -> torch.Tensor:
    """Mean hinge over the hardest allowed negatives of every valid row (vectorised; see module doc).

    ``scores[i, j]`` = cos(left_i, right_j), the positive of row i is ``scores[i, i]``; ``negatives[i, j]``
    marks the columns row i may push away. Rows without any allowed negative add nothing; when nothing
    contributes, the result is a zero still connected to ``scores`` so ``backward()`` works.
    """
    b = scores.shape[0]
    allowed = negatives.clone()
    allowed.fill_diagonal_(False)
    if valid is not None:
        allowed &= valid[:, None] & valid[None, :]
    masked = scores.masked_fill(~allowed, float("-inf"))
    h = b if hard_negatives is None else min(hard_negatives, b)
    top, _ = torch.topk(masked, h, dim=1)
    present = torch.isfinite(top)
    positive = scores.diagonal().unsqueeze(1)
    hinge = torch.clamp(margin - positive + top.masked_fill(~present, 0.0), min=0.0)
    hinge = hinge.masked_fill(~present, 0.0)
    count = present.sum()
    if count == 0:
        return scores.sum() * 0.0
    return hinge.sum() / count


class TripletLoss(nn.Module):
    """Task loss L: triplet margin over cosine scores with the hardest in-batch negatives."""

    def __init__(self, margin: float = 0.3, hard_negatives: int | None = 1) -> None:
        super().__init__()
        self.margin, self.hard_negatives = margin, hard_negatives

    def forward(self, doc_emb: torch.Tensor, label_emb: torch.Tensor, positive_mask: torch.Tensor) -> torch.Tensor:
        scores = doc_emb @ label_emb.T
        return hard_triplet_margin(scores, ~positive_mask.bool(), self.margin, self.hard_negatives)
