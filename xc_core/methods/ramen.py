"""``ramen``: dual encoder + graph regularizers on every anchor set, both sides, with pruning and the
bandit-tuned λs (Mittal et al., "Graph Regularized Encoder Training for Extreme Classification").

Two rules around the paper's method: only the anchor sets the graph-worth check finds adding
information keep their starting λ (``TrainConfig.graph_worth``), and the trained encoder is served only when it beats
``dual_encoder``'s on the validation rows (``EncoderMethod.text_only``), else ``dual_encoder``'s is."""

from xc_core.methods.base import Requires, Roles, register
from xc_core.methods.dual_encoder import DUAL_ENCODER
from xc_core.methods.encoder import EncoderMethod

RAMEN = register(EncoderMethod("ramen", "graph-regularized dual encoder (RAMEN)",
                               overrides={"regularize": True, "prune": True, "bandit": True}, needs_anchor_sets=True,
                               baselines=("dual_encoder", "pretrained", "auggt"),
                               # never below the text-only encoder: served only when it beats dual_encoder's
                               text_only=DUAL_ENCODER.name, requires=Requires(methods=(DUAL_ENCODER.name,)),
                               # the method of the papers: the default, the costs' unit, the first reference
                               roles=Roles(headline=True, run=True, results=True, default=True, cost_reference=True,
                                           reference=0)))
