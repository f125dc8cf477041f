"""The hybrid channel of the fused search: XR-Linear on sparse ⊕ dense features, inside xc.

``config.py`` (settings), ``features.py``, ``tree.py``, ``solver.py``, ``model.py`` (the channel and its search).

Why: W (``train.py``) is one 384-d vector per label over the frozen sentence vectors and forgets the surface forms
(site names, misspellings, codes) a sparse linear model keeps; on the labels with training positives a one-minute
TF-IDF linear model (PECOS XR-Linear) was level with xc. XR-Transformer (Zhang et al., NeurIPS 2021) ranks with
linear models on the *concatenation* of TF-IDF and neural features and beats both parts. PECOS itself pins
numpy < 2, so xc carries the method (Yu et al., "PECOS", JMLR 2022), with PECOS's defaults:

- **features** (:class:`HybridFeatures`): TF-IDF over word 1..2-grams and character 2..4-grams within words (fitted
  on the training documents), L2-normalised as one block, beside the encoder's unit vector; each block weighted by
  its ``*_weight`` (equal by default) and the row L2-normalised.
- **label tree** (:func:`label_tree`): balanced spherical 2-means of the labels' PIFA embeddings (a label = the
  normalised sum of its positive documents' encoder vectors), to leaves of ≤ ``max_leaf`` labels, cut into layers
  of 16, 256, … nodes as PECOS's cluster chain. Clustered on the dense block only (PECOS clusters on all features).
- **solver**: at every layer one L2-regularised squared-hinge SVM per node (liblinear's dual coordinate descent,
  ``L2R_L2LOSS_SVC_DUAL``, C = 1, bias 1, random order per pass) on the documents under its parent node, positive
  where they have a label under the node (teacher-forced negatives); weights below ``prune`` are dropped.
- **search**: beam search down the tree (``beam`` nodes per layer); a label's score is the product of
  ``exp(-max(0, 1 - s) ** 3)`` (PECOS's ``l3-hinge``) along its path, in (0, 1]. Labels without a training positive
  have no classifier and are never in the beam.

The solver is checked against libpecos on the same features (``experiments/solver_parity/``). Stored as plain
arrays (vocabularies JSON, idf, one ``.npz`` per layer), never a pickle.
"""

from xc_core.classifier.xrlinear.config import LinearConfig
from xc_core.classifier.xrlinear.features import HybridFeatures
from xc_core.classifier.xrlinear.model import HYBRID_DIR, SPEC, Layer, LinearChannel, l3_hinge
from xc_core.classifier.xrlinear.tree import label_tree

__all__ = ["HYBRID_DIR", "SPEC", "HybridFeatures", "Layer", "LinearChannel", "LinearConfig", "l3_hinge", "label_tree"]
