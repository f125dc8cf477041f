"""``<method>-clf``: a method's encoder followed by the classifier stage (``xc_core.classifier``).

``ramen-clf`` is RAMEN (NGAME) in the RAMEN paper: the graph-regularized encoder, then per-label
classifiers. The encoder part is exactly the base method's (same switches), so an already trained base
encoder of the same profile and seed is reused instead of trained twice (``methods/encoder/training.py``).
"""

from dataclasses import replace

from xc_core.methods.base import Roles, register
from xc_core.methods.dual_encoder import DUAL_ENCODER
from xc_core.methods.encoder import CLASSIFIER_SUFFIX as SUFFIX
from xc_core.methods.encoder import EncoderMethod
from xc_core.methods.pretrained import PRETRAINED
from xc_core.methods.ramen import RAMEN


def with_classifier(base: EncoderMethod, roles: Roles) -> EncoderMethod:
    """Register ``<base>-clf``: the base's encoder (trained first, or its trained one reused), then the stage."""
    return register(replace(base, name=f"{base.name}{SUFFIX}", classifier=True, baselines=(base.name,),
                            requires=replace(base.requires, methods=(base.name,)), roles=roles,
                            description=f"{base.description}; then per-label classifiers fused with the encoder"))


PRETRAINED_CLF = with_classifier(PRETRAINED, Roles(headline=True, results=True))
DUAL_ENCODER_CLF = with_classifier(DUAL_ENCODER, Roles(headline=True, run=True, results=True))
RAMEN_CLF = with_classifier(RAMEN, Roles(headline=True, run=True, results=True))
