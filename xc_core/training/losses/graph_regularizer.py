"""RAMEN's graph regularizer R^t for one anchor set t and one side (documents: R_x^t, labels: R_z^t).

Formula (RAMEN eq. 2): pull node i towards its sampled anchor a_i of set t and push it from the in-batch
anchors of other rows that are not its own anchors, with the task loss's margin γ:

    R^t = mean over (i valid, j ∈ top-h(N_i)) of max(0, γ − cos(v_i, a_i) + cos(v_i, a_j)),

where rows without an anchor in t (``valid`` False) take part neither as rows nor as negatives.

Batch layout: ``node_emb[i]`` (document or label of row i), ``anchor_emb[i]`` its sampled anchor (unit
vectors); ``anchor_is_neighbour[i, j]`` True when row j's anchor is also an anchor of node i.

    >>> reg = GraphRegularizer(margin=0.3, hard_negatives=3)
    >>> value = reg(doc_emb, anchor_emb, valid, anchor_is_neighbour)   # doctest: +SKIP
"""

from __future__ import annotations

import torch
from torch import nn

from xc_core.training.losses.triplet import hard_triplet_margin


class GraphRegularizer(nn.Module):
    def __init__(self, margin: float = 0.3, hard_negatives: int | None = 1) -> None:
        super().__init__()
        self.margin, self.hard_negatives = margin, hard_negatives

    def forward(self, node_emb: torch.Tensor, anchor_emb: torch.Tensor, valid: torch.Tensor,
                anchor_is_neighbour: torch.Tensor) -> torch.Tensor:
        scores = node_emb @ anchor_emb.T
        return hard_triplet_margin(scores, ~anchor_is_neighbour.bool(), self.margin, self.hard_negatives,
                                   valid=valid.bool())
