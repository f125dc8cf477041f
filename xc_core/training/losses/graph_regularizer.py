"""RAMEN's graph regularizer R^t: one anchor set t, one side (documents R_x^t or labels R_z^t)."""

from __future__ import annotations

import torch
from torch import nn

from xc_core.training.losses.triplet import anchor_scores, hard_triplet_margin


class GraphRegularizer(nn.Module):
    """Pull each node towards its sampled anchor of set t, push it from the other rows' anchors.

    Paper: A. Mittal et al., "Graph Regularized Encoder Training for Extreme Classification" (RAMEN,
    arXiv:2402.18434), eq. 2. The objective is λ_l·L + Σ_t (λ_x^t R_x^t + λ_z^t R_z^t); one instance of this
    module computes one R^t for one side, with the task loss's margin and hard negative mining.

    Formula: with v_i the node of row i (a document for R_x^t, a label for R_z^t), a_i its anchor sampled
    from set t, s_ij = cos(v_i, a_j), V the rows that have an anchor in t and N_i the anchors a_j, j ∈ V,
    j ≠ i, that are not themselves anchors of v_i,

        R^t = mean over (i ∈ V, j ∈ top-h(N_i)) of max(0, γ − s_ii + s_ij),     γ = 0.3.

    Batch layout: ``node_emb`` [B, d] and ``anchor_emb`` [B, d] hold L2-normalised rows (cosine = dot
    product); ``valid`` [B] bool is False for rows with no anchor in t — their ``anchor_emb`` row is
    padding and takes part neither as a row nor as anyone's negative; ``anchor_is_neighbour`` [B, B] bool is
    True at (i, j) when anchor a_j is also an anchor of node v_i, so it is not pushed away.

    Example:
        >>> import torch
        >>> nodes = torch.eye(3)
        >>> anchors = torch.tensor([[0.6, 0.8, 0.0], [0.8, 0.6, 0.0], [1.0, 0.0, 0.0]])
        >>> valid = torch.tensor([True, True, False])          # row 2 has no anchor: its row is padding
        >>> reg = GraphRegularizer(margin=0.3, hard_negatives=1)
        >>> round(float(reg(nodes, anchors, valid, torch.zeros(3, 3, dtype=torch.bool))), 4)  # (0.5 + 0.5) / 2
        0.5
    """

    def __init__(self, margin: float = 0.3, hard_negatives: int | None = 1) -> None:
        super().__init__()
        self.margin, self.hard_negatives = margin, hard_negatives

    def forward(self, node_emb: torch.Tensor, anchor_emb: torch.Tensor, valid: torch.Tensor,
                anchor_is_neighbour: torch.Tensor) -> torch.Tensor:
        scores, negatives = anchor_scores(node_emb, anchor_emb, valid, anchor_is_neighbour)
        return hard_triplet_margin(scores, negatives, self.margin, self.hard_negatives, valid=valid)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, hard_negatives={self.hard_negatives}"
