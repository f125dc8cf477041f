"""Losses, one per file (sentence-transformers style): each documents its formula, paper, batch layout and
usage. A *loss family* pairs a task loss L with the regularizer R^t of the same form; the trainer asks
:func:`loss_family` for the one its config names and composes them without knowing any by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from xc_core.training.losses.graph_regularizer import GraphRegularizer
from xc_core.training.losses.softmax import InBatchSoftmaxLoss, SoftmaxGraphRegularizer, in_batch_softmax
from xc_core.training.losses.triplet import TripletLoss, hard_triplet_margin

#: family name → builder(config) → (task loss, regularizer); ``config`` is a TrainConfig.
LOSS_FAMILIES: dict[str, Callable[[Any], tuple[nn.Module, nn.Module]]] = {
    # RAMEN eq. 2 as published: triplet margin over the hardest in-batch negatives.
    "triplet": lambda c: (TripletLoss(c.margin, c.hard_negatives), GraphRegularizer(c.margin, c.hard_negatives)),
    # In-batch softmax over every negative (xc's default: see softmax.py for why).
    "softmax": lambda c: (InBatchSoftmaxLoss(c.softmax_scale), SoftmaxGraphRegularizer(c.softmax_scale)),
}


def loss_family(name: str, config: Any) -> tuple[nn.Module, nn.Module]:
    if name not in LOSS_FAMILIES:
        raise ValueError(f"unknown loss '{name}': choose one of {', '.join(LOSS_FAMILIES)}")
    return LOSS_FAMILIES[name](config)


__all__ = ["LOSS_FAMILIES", "GraphRegularizer", "InBatchSoftmaxLoss", "SoftmaxGraphRegularizer", "TripletLoss",
           "hard_triplet_margin", "in_batch_softmax", "loss_family"]
