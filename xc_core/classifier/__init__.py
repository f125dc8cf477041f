"""The classifier stage (issue #18): per-label vectors on top of any encoder, fused with it at search time.

``train.py`` learns the vectors over cached embeddings, ``fusion.py`` is the one search path (label index ∪
classifier index, re-scored), ``stage.py`` runs both for a trained encoder and saves the result."""

from xc_core.classifier.config import ClassifierConfig
from xc_core.classifier.fusion import FusedClassifier, fused_search

__all__ = ["ClassifierConfig", "FusedClassifier", "fused_search"]
