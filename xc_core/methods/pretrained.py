"""``pretrained``: the encoder as shipped, no training, no anchor sets — the zero-shot floor every method must beat."""

from xc_core.methods.base import Method, register

# Every layer in every profile (a profile may cut layers for speed): the floor is the encoder a user already has.
PRETRAINED = register(Method("pretrained", "the full shipped encoder, untrained (zero-shot floor)", train=False,
                             overrides={"regularize": False, "prune": False, "bandit": False},
                             encoder_overrides={"n_layers": None}))
