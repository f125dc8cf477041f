"""``pretrained``: the encoder as shipped, no training — the zero-shot floor every method must beat."""

from xc_core.methods.base import Method, register

PRETRAINED = register(Method("pretrained", "the shipped encoder, untrained (zero-shot floor)", train=False))
