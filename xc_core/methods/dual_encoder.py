"""``dual_encoder``: text only — same encoder, batches, loss and schedule as RAMEN, no regularizers
(the ANCE/NGAME-style baseline RAMEN is measured against)."""

from xc_core.methods.base import Roles, register
from xc_core.methods.encoder import EncoderMethod

DUAL_ENCODER = register(EncoderMethod("dual_encoder", "text-only dual encoder (no graph)",
                                      overrides={"regularize": False, "prune": False, "bandit": False},
                                      roles=Roles(headline=True, run=True, results=True, reference=1)))

#: Control for label-side anchor sets that are really labelled pairs (e.g. aol-1000's click graph): text-only,
#: trained on the pairs RAMEN's label-side regularizer would reach. RAMEN beating this, not only
#: ``dual_encoder``, is what shows graph signal rather than more labelled pairs.
DUAL_ENCODER_ANCHOR_PAIRS = register(EncoderMethod(
    "dual_encoder_anchor_pairs", "text-only dual encoder trained on the label-side anchor pairs too (control)",
    overrides={"regularize": False, "prune": False, "bandit": False, "anchor_pairs": True}, needs_anchor_sets=True))
