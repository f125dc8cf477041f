"""IRENE's combiner C_φ: a label's text embedding E(z_l) and the classifiers of up to |S| associated seen labels
→ one representation (IRENE §4.1, Fig. 1).

``attention``: one self-attention layer over [E(z_l) + t_enc, w_1 + t_clf, …] with learned type embeddings, the
output at the text token, then a linear map. It starts as the identity on E(z_l) (zero attention output, identity
map), so an untrained combiner *is* the encoder, and with an empty S it stays a linear map of E(z_l). ``sum``,
``max`` and ``weighted_sum`` are the simpler poolings of IRENE's Table 8, followed by the same linear map.
"""

from __future__ import annotations

import torch
from torch import nn

from xc_core.methods.irene.config import Pooling


class Combiner(nn.Module):
    def __init__(self, dim: int, pooling: Pooling = "attention", heads: int = 4, slots: int = 3) -> None:
        super().__init__()
        self.pooling = pooling
        self.t_enc = nn.Parameter(torch.zeros(dim))
        self.t_clf = nn.Parameter(torch.zeros(dim))
        self.position = nn.Parameter(torch.zeros(slots + 1))  # weighted_sum: one weight per position
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        nn.init.zeros_(self.attention.out_proj.weight)
        nn.init.zeros_(self.attention.out_proj.bias)
        self.out = nn.Linear(dim, dim)
        with torch.no_grad():
            self.out.weight.copy_(torch.eye(dim))
            self.out.bias.zero_()
            nn.init.normal_(self.t_enc, std=0.02)
            nn.init.normal_(self.t_clf, std=0.02)

    def forward(self, text: torch.Tensor, associated: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """``text`` (B, D), ``associated`` (B, S, D), ``present`` (B, S) bool → unit representations (B, D)."""
        mask = present.unsqueeze(-1).to(text.dtype)
        if self.pooling == "attention":
            tokens = torch.cat([(text + self.t_enc).unsqueeze(1), associated + self.t_clf], dim=1)
            text_slot = torch.zeros(len(present), 1, dtype=torch.bool, device=present.device)  # never padded
            padding = torch.cat([text_slot, ~present], dim=1)
            attended, _ = self.attention(tokens[:, :1], tokens, tokens, key_padding_mask=padding, need_weights=False)
            pooled = text + attended[:, 0]
        elif self.pooling == "sum":
            pooled = text + (associated * mask).sum(dim=1)
        elif self.pooling == "max":
            filled = associated.masked_fill(~present.unsqueeze(-1), float("-inf"))
            # no slot at all (|S| = 0 configured): max over an empty dimension is an error, the text alone is right
            pooled = torch.maximum(text, filled.max(dim=1).values) if associated.shape[1] else text
        else:
            weights = torch.softmax(self.position, dim=0)
            pooled = weights[0] * text + (weights[1:associated.shape[1] + 1].view(1, -1, 1) * associated * mask).sum(1)
        return nn.functional.normalize(self.out(pooled), dim=-1)
