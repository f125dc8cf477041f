"""``pretrained``: the encoder as shipped, no training, no anchor sets — the zero-shot floor every method must beat."""

from xc_core.methods.base import Roles, register
from xc_core.methods.encoder import EncoderMethod

# Every layer in every profile (a profile may cut layers for speed): the floor is the encoder a user already has.
PRETRAINED = register(EncoderMethod("pretrained", "the full shipped encoder, untrained (zero-shot floor)",
                                    trains=False, overrides={"regularize": False, "prune": False, "bandit": False},
                                    encoder_overrides={"n_layers": None},
                                    # the A/B control: every method is tested against the untrained encoder
                                    roles=Roles(headline=True, run=True, results=True, control=True, reference=2)))
