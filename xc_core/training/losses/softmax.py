"""In-batch softmax (InfoNCE / multiple-negatives ranking) loss over cosine scores, with masked false negatives."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xc_core.training.losses.triplet import _check, anchor_scores


def in_batch_softmax(scores: torch.Tensor, negatives: torch.Tensor, scale: float,
                     valid: torch.Tensor | None = None, row_scores: torch.Tensor | None = None,
                     row_valid: torch.Tensor | None = None, extra_scores: torch.Tensor | None = None,
                     extra_allowed: torch.Tensor | None = None, column_log_q: torch.Tensor | None = None,
                     extra_log_q: float = 0.0) -> torch.Tensor:
    """Mean over valid rows of −log softmax_j(scale · s_ij)[i], j over the row's allowed negatives and itself.

    ``scores[i, j]`` = cos(left_i, right_j) and the positive of row i is ``scores[i, i]``. Column j ≠ i enters
    row i's softmax only if ``negatives[i, j]`` (and, when ``valid`` is given, both rows are valid). Invalid
    rows add nothing; with no valid row the result is a zero still connected to ``scores``. ``row_scores`` [B]
    (optional): one more candidate in row i's softmax, cos(left_i, h_i) of the row's own extra negative h_i, where
    ``row_valid[i]``; a row without one is scored as without ``row_scores``:

        L = mean_i −log( exp(τ s_ii) / (exp(τ s_ii) + Σ_{j ∈ N_i} exp(τ s_ij) + [h_i] exp(τ cos(x_i, h_i))) )

    ``extra_scores`` [B, M] (optional): M more candidates in every row's softmax (``sampled_negatives``: labels
    drawn from the whole label set), each where ``extra_allowed`` [B, M] (not one of the row's positives).

    ``column_log_q`` [B] (optional): the sampling-bias correction of Yi et al. 2019 ("Sampling-Bias-Corrected
    Neural Modeling for Large Corpus Item Recommendations"): column j's logit becomes τ s_ij − log q_j, where q_j is
    how often label j is expected among a batch's labels. In-batch negatives are other rows' positives, so a popular
    label is a negative in proportion to its popularity; without the correction the loss learns to demote it.
    ``extra_log_q`` is the same for every ``extra_scores`` column (log of a uniformly drawn label's expected count).
    A row's own extra negative (``row_scores``) is not corrected: it is mined for that row, not drawn by popularity.
    """
    _check(scores, negatives, "negatives")
    allowed = negatives.to(device=scores.device, dtype=torch.bool).clone()
    allowed.fill_diagonal_(True)  # the positive is always in its own softmax
    rows = torch.ones(scores.shape[0], dtype=torch.bool, device=scores.device)
    if valid is not None:
        rows = valid.to(device=scores.device, dtype=torch.bool)
        allowed &= rows[None, :] | torch.eye(len(rows), dtype=torch.bool, device=scores.device)
    if not rows.any():
        return scores.sum() * 0.0
    logits = scale * scores
    if column_log_q is not None:
        logits = logits - column_log_q.to(device=scores.device, dtype=scores.dtype)[None, :]
    logits = logits.masked_fill(~allowed, float("-inf"))
    if row_scores is not None:
        if row_valid is None or row_scores.shape != scores.shape[:1] or row_valid.shape != scores.shape[:1]:
            raise ValueError(f"row_scores and row_valid must both have shape ({scores.shape[0]},)")
        extra = (scale * row_scores).masked_fill(~row_valid.to(device=scores.device, dtype=torch.bool),
                                                 float("-inf"))
        logits = torch.cat([logits, extra[:, None]], dim=1)
    if extra_scores is not None:
        if extra_allowed is None or extra_scores.shape[0] != scores.shape[0] or \
                extra_allowed.shape != extra_scores.shape:
            raise ValueError(f"extra_scores and extra_allowed must both have shape ({scores.shape[0]}, M)")
        allowed_extra = extra_allowed.to(device=scores.device, dtype=torch.bool)
        extra_logits = scale * extra_scores - extra_log_q
        logits = torch.cat([logits, extra_logits.masked_fill(~allowed_extra, float("-inf"))], dim=1)
    target = torch.arange(scores.shape[0], device=scores.device)
    return F.cross_entropy(logits[rows], target[rows])


class InBatchSoftmaxLoss(nn.Module):
    """Task loss L as an in-batch softmax: each document must pick its label among the batch's labels.

    Papers: the multiple-negatives ranking loss of Henderson et al. 2017 ("Efficient Natural Language Response
    Suggestion for Smart Reply") and sentence-transformers' ``MultipleNegativesRankingLoss`` (scale 20);
    InfoNCE (van den Oord et al. 2018). xc uses it instead of RAMEN's hardest-negative triplet loss because on
    sparse-label sets the hardest in-batch "negatives" are often unrecorded positives; the softmax spreads the
    push over every negative in proportion to its score (docs/training.md: a text-only fine-tune with this
    loss beat the untrained encoder where the triplet loss fell below it).

    Formula: with s_ij = cos(x_i, z_j) and N_i the in-batch labels that are not positives of x_i,

        L = mean_i −log( exp(τ s_ii) / (exp(τ s_ii) + Σ_{j ∈ N_i} exp(τ s_ij)) ),     τ = ``scale``.

    Batch layout: as :class:`~xc_core.training.losses.TripletLoss` — ``doc_emb`` and ``label_emb`` [B, d] unit
    rows, row i a positive pair; ``positive_mask`` [B, B] True where label j is also a positive of document i
    (kept out of the softmax's denominator).

    Example:
        >>> import torch
        >>> docs = torch.eye(2)
        >>> labels = torch.eye(2)                               # each document matches its own label
        >>> loss = InBatchSoftmaxLoss(scale=20.0)
        >>> float(loss(docs, labels, torch.eye(2, dtype=torch.bool))) < 1e-6
        True
    """

    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, doc_emb: torch.Tensor, label_emb: torch.Tensor, positive_mask: torch.Tensor,
                hard_emb: torch.Tensor | None = None, hard_valid: torch.Tensor | None = None,
                sampled_emb: torch.Tensor | None = None, sampled_positive: torch.Tensor | None = None,
                column_log_q: torch.Tensor | None = None, extra_log_q: float = 0.0) -> torch.Tensor:
        """``hard_emb`` [B, d] (optional): one extra negative per row (``hard_valid`` [B] marks the rows that have
        one), added to that row's softmax only (``training.attributes``: a label of another brand / place).
        ``sampled_emb`` [M, d] (optional): labels in every row's softmax, except where ``sampled_positive`` [B, M]
        (``sampled_negatives``). ``column_log_q`` [B] and ``extra_log_q``: the sampling-bias correction of
        :func:`in_batch_softmax` (``logq_correction``)."""
        scores = doc_emb @ label_emb.T
        _check(scores, positive_mask, "positive_mask")
        negatives = ~positive_mask.to(device=scores.device, dtype=torch.bool)
        extra: dict[str, Any] = {"column_log_q": column_log_q, "extra_log_q": extra_log_q}
        if sampled_emb is not None:
            if sampled_positive is None:
                raise ValueError("sampled_emb needs sampled_positive, the [B, M] mask of the rows' positives")
            extra |= {"extra_scores": doc_emb @ sampled_emb.T,
                     "extra_allowed": ~sampled_positive.to(device=scores.device, dtype=torch.bool)}
        if hard_emb is None:
            return in_batch_softmax(scores, negatives, self.scale, **extra)
        if hard_emb.shape != doc_emb.shape or hard_valid is None or hard_valid.shape != scores.shape[:1]:
            raise ValueError(f"hard_emb must have the shape of doc_emb {tuple(doc_emb.shape)} and hard_valid "
                             f"({scores.shape[0]},)")
        return in_batch_softmax(scores, negatives, self.scale, row_scores=(doc_emb * hard_emb).sum(dim=1),
                                row_valid=hard_valid, **extra)

    def extra_repr(self) -> str:
        return f"scale={self.scale}"


class SoftmaxGraphRegularizer(nn.Module):
    """RAMEN's regularizer R^t in softmax form: each node must pick its own anchor among the batch's anchors.

    The same pull/push as :class:`~xc_core.training.losses.GraphRegularizer` (RAMEN eq. 2) with the hinge over
    the hardest negatives replaced by an in-batch softmax, so task and regularizers share one loss family.

    Formula: with v_i the node of row i, a_i its sampled anchor of set t, V the rows with an anchor and N_i the
    anchors a_j (j ∈ V, j ≠ i) that are not anchors of v_i,

        R^t = mean_{i ∈ V} −log( exp(τ s_ii) / (exp(τ s_ii) + Σ_{j ∈ N_i} exp(τ s_ij)) ).

    Batch layout: as :class:`~xc_core.training.losses.GraphRegularizer` (``valid`` marks rows with an anchor,
    ``anchor_is_neighbour`` [B, B] the anchors never pushed away).

    Example:
        >>> import torch
        >>> reg = SoftmaxGraphRegularizer(scale=20.0)
        >>> valid = torch.tensor([True, True, False])
        >>> float(reg(torch.eye(3), torch.eye(3), valid, torch.zeros(3, 3, dtype=torch.bool))) < 1e-6
        True
    """

    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, node_emb: torch.Tensor, anchor_emb: torch.Tensor, valid: torch.Tensor,
                anchor_is_neighbour: torch.Tensor, hard_emb: torch.Tensor | None = None,
                hard_valid: torch.Tensor | None = None, extra_emb: torch.Tensor | None = None,
                extra_allowed: torch.Tensor | None = None) -> torch.Tensor:
        """``hard_emb`` [B, d] (optional): one more negative anchor per row, in that row's softmax only, where
        ``hard_valid`` [B] (``anchor_negatives``: an anchor of the set near the node that is not its own).
        ``extra_emb`` [M, d] (optional): M more negatives in every row's softmax, where ``extra_allowed`` [B, M]
        (``regularizer_sampled_negatives``: the task's sampled labels)."""
        scores, negatives = anchor_scores(node_emb, anchor_emb, valid, anchor_is_neighbour)
        if extra_emb is not None and extra_allowed is None:
            raise ValueError("extra_emb needs extra_allowed [B, M]: which extra negatives each row may rank")
        extra_scores = node_emb @ extra_emb.T if extra_emb is not None else None
        if hard_emb is None:
            return in_batch_softmax(scores, negatives, self.scale, valid=valid, extra_scores=extra_scores,
                                    extra_allowed=extra_allowed)
        if hard_emb.shape != node_emb.shape or hard_valid is None:
            raise ValueError(f"hard_emb must have the shape of node_emb {tuple(node_emb.shape)}, with hard_valid")
        row_valid = hard_valid.to(device=scores.device, dtype=torch.bool) & valid.to(scores.device)
        return in_batch_softmax(scores, negatives, self.scale, valid=valid,
                                row_scores=(node_emb * hard_emb).sum(dim=1), row_valid=row_valid,
                                extra_scores=extra_scores, extra_allowed=extra_allowed)

    def extra_repr(self) -> str:
        return f"scale={self.scale}"
