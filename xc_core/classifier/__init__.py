"""The classifier stage: per-label vectors on top of any encoder, fused with it at search time.

``train.py`` learns the vectors (W) over cached embeddings; ``channel.py`` is the interface of the other channels
and ``channels.py`` their registry (``lexical.py``, ``xrlinear/``, ``memory.py``, ``names.py``) with ``Fusion``, the
weights; ``fusion.py`` is the one search path (label index ∪ classifier index ∪ the channels' shortlists,
re-scored: ``shortlist.py``); ``stage.py`` runs them for a trained encoder, chooses the fusion out of fold and saves
the result."""

from xc_core.classifier.config import ClassifierConfig
from xc_core.classifier.fusion import FusedClassifier, fused_search

__all__ = ["ClassifierConfig", "FusedClassifier", "fused_search"]
