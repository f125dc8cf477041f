"""TextGNN's towers and crossing layer (TextGNN §4.1, Fig. 2), over node embeddings the shared text encoder made.

A tower takes the centre node's embedding h_0 and up to S neighbour embeddings h_1..h_S (padded slots masked)
and returns one vector:

* **GAT aggregator** (§4.1.2; Veličković et al. 2018, one head): z_j = W h_j, e_j = LeakyReLU(aᵀ[z_0 ‖ z_j])
  over j ∈ {centre, neighbours present}, α = softmax(e), g = O(Σ_j α_j z_j). Padded slots get e_j = −∞, so
  whatever they hold never reaches the output.
* **skip layer** (§4.1.3): ``add`` → h_0 + g; ``concat`` → D([h_0 ‖ g]) with a dense layer D back to the
  encoder's width. The output projection O starts at zero (``add``) and D as [I | 0] (``concat``), so an
  untrained tower *is* the text encoder and the graph's contribution is learnt from there.

Towers return unit vectors (cosine retrieval). The crossing layer (§4.1.4, TwinBERT's residual net) scores a
(query, keyword) pair: x = [q ‖ k], y = F(x) + x, P(relevant) = σ(wᵀy + b).
"""

from __future__ import annotations

import torch
from torch import nn

from xc_core.methods.textgnn.config import Skip


class GATAggregator(nn.Module):
    """One-hop, one-head graph attention of the centre over [centre, neighbours]."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.project = nn.Linear(dim, dim, bias=False)
        self.attend = nn.Linear(2 * dim, 1, bias=False)
        self.out = nn.Linear(dim, dim)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, centre: torch.Tensor, neighbours: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """``centre`` (B, D), ``neighbours`` (B, S, D), ``present`` (B, S) bool → aggregated (B, D)."""
        nodes = torch.cat([centre.unsqueeze(1), neighbours], dim=1)  # (B, 1+S, D)
        z = self.project(nodes)
        pairs = torch.cat([z[:, :1].expand_as(z), z], dim=-1)
        logits = nn.functional.leaky_relu(self.attend(pairs).squeeze(-1), 0.2)  # (B, 1+S)
        centre_slot = torch.ones(len(present), 1, dtype=torch.bool, device=present.device)  # never padded
        keep = torch.cat([centre_slot, present.bool()], dim=1)
        alpha = torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=1)
        # zeroing the padded rows too: 0 · NaN (a padded slot holding garbage) would still poison the sum
        pooled = (alpha.unsqueeze(-1) * z.masked_fill(~keep.unsqueeze(-1), 0.0)).sum(dim=1)
        return self.out(pooled)


class Tower(nn.Module):
    """One side (query or keyword): GAT aggregator plus the skip connection to the centre's embedding."""

    def __init__(self, dim: int, skip: Skip = "add") -> None:
        super().__init__()
        self.skip = skip
        self.aggregate = GATAggregator(dim)
        self.dense = nn.Linear(2 * dim, dim) if skip == "concat" else None
        if self.dense is not None:
            with torch.no_grad():
                self.dense.weight.zero_()
                self.dense.weight[:, :dim].copy_(torch.eye(dim))
                self.dense.bias.zero_()

    def forward(self, centre: torch.Tensor, neighbours: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        graph = self.aggregate(centre, neighbours, present)
        combined = centre + graph if self.dense is None else self.dense(torch.cat([centre, graph], dim=-1))
        return nn.functional.normalize(combined, dim=-1)


class CrossingLayer(nn.Module):
    """TwinBERT's residual crossing of the two tower outputs, then a logistic output (a logit per pair)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.residual = nn.Sequential(nn.Linear(2 * dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, 2 * dim))
        self.logistic = nn.Linear(2 * dim, 1)

    def forward(self, query: torch.Tensor, keyword: torch.Tensor) -> torch.Tensor:
        x = torch.cat([query, keyword], dim=-1)
        return self.logistic(self.residual(x) + x).squeeze(-1)


class TextGNNHeads(nn.Module):
    """The two towers TextGNN trains on top of the shared encoder (the encoder itself is the HF model)."""

    def __init__(self, dim: int, skip: Skip = "add") -> None:
        super().__init__()
        self.query = Tower(dim, skip)
        self.keyword = Tower(dim, skip)
