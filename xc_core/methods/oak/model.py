"""OAK's GCN layer: one graph convolution over a query and the graph nodes its linker found.

    h(q) = normalize(W_self e(q) + W_nbr · Σ_i α_i e(a_i)),   α = softmax_i(e(q)ᵀ W_att e(a_i))  (or 1/n: mean)

over the present neighbours a_i only; with none the sum is zero and h(q) = normalize(W_self e(q)). W_self starts
as the identity and W_nbr, W_att at zero, so an untrained layer *is* the encoder (uniform attention = mean) and
training decides how much the graph is worth (OAK, Mohan et al. 2024; RAMEN §2, "Limitation of GCN methods").
"""

from __future__ import annotations

import torch
from torch import nn

from xc_core.methods.oak.config import Aggregation


class GraphConvolution(nn.Module):
    def __init__(self, dim: int, aggregation: Aggregation = "attention") -> None:
        super().__init__()
        self.aggregation = aggregation
        self.self_map = nn.Linear(dim, dim, bias=False)
        self.neighbour_map = nn.Linear(dim, dim, bias=False)
        self.attention = nn.Linear(dim, dim, bias=False)
        with torch.no_grad():
            self.self_map.weight.copy_(torch.eye(dim))
            self.neighbour_map.weight.zero_()
            self.attention.weight.zero_()

    def pool(self, query: torch.Tensor, neighbours: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """(B, D) weighted sum of the present neighbours; a row without any gets zeros."""
        mask = present.to(query.dtype)
        if self.aggregation == "mean":
            weights = mask / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        else:
            logits = torch.einsum("bd,bnd->bn", self.attention(query), neighbours)
            weights = torch.softmax(logits.masked_fill(~present, float("-inf")), dim=1)
            weights = torch.nan_to_num(weights) * mask  # a row with no neighbour: softmax of all −inf is NaN
        return torch.einsum("bn,bnd->bd", weights, neighbours)

    def forward(self, query: torch.Tensor, neighbours: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """``query`` (B, D), ``neighbours`` (B, N, D), ``present`` (B, N) bool → unit representations (B, D)."""
        if neighbours.shape[1] == 0:
            return nn.functional.normalize(self.self_map(query), dim=-1)
        pooled = self.pool(query, neighbours, present)
        return nn.functional.normalize(self.self_map(query) + self.neighbour_map(pooled), dim=-1)
