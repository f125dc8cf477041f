"""The classifier stage: per-label vectors on top of any encoder, fused with it at search time.

``train.py`` learns the vectors over cached embeddings, ``lexical.py`` the TF-IDF nearest-document channel,
``fusion.py`` is the one search path (label index ∪ classifier index ∪ lexical shortlist, re-scored; the union of
the channels' candidates: ``shortlist.py``), ``stage.py`` runs them for a trained encoder, chooses the fusion
weights on validation and saves the result."""

from xc_core.classifier.config import ClassifierConfig
from xc_core.classifier.fusion import FusedClassifier, fused_search

__all__ = ["ClassifierConfig", "FusedClassifier", "fused_search"]
