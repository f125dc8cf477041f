"""``dual_encoder``: text only — same encoder, batches, loss and schedule as RAMEN, no regularizers
(the ANCE/NGAME-style baseline RAMEN is measured against)."""

from xc_core.methods.base import Method, register

DUAL_ENCODER = register(Method("dual_encoder", "text-only dual encoder (no graph)",
                               overrides={"regularize": False, "prune": False, "bandit": False}))
