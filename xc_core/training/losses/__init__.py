"""Losses, one per file (sentence-transformers style): the trainer composes them, knowing none by name."""

from xc_core.training.losses.graph_regularizer import GraphRegularizer
from xc_core.training.losses.triplet import TripletLoss, hard_triplet_margin

__all__ = ["GraphRegularizer", "TripletLoss", "hard_triplet_margin"]
