"""Losses, one per file (sentence-transformers style): each documents its formula, paper, batch layout and
usage; the trainer composes them and knows none by name."""

from xc_core.training.losses.graph_regularizer import GraphRegularizer
from xc_core.training.losses.triplet import TripletLoss, hard_triplet_margin

__all__ = ["GraphRegularizer", "TripletLoss", "hard_triplet_margin"]
