"""``ramen``: dual encoder + graph regularizers on every anchor set, both sides, with pruning and the
bandit-tuned λs (Mittal et al., "Graph Regularized Encoder Training for Extreme Classification")."""

from xc_core.methods.base import Roles, register
from xc_core.methods.encoder import EncoderMethod

RAMEN = register(EncoderMethod("ramen", "graph-regularized dual encoder (RAMEN)",
                               overrides={"regularize": True, "prune": True, "bandit": True}, needs_anchor_sets=True,
                               baselines=("dual_encoder", "pretrained", "auggt"),
                               # the method of the papers: the default, the costs' unit, the first reference
                               roles=Roles(headline=True, run=True, results=True, default=True, cost_reference=True,
                                           reference=0)))
