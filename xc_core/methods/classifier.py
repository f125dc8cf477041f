"""``<method>-clf``: a method's encoder followed by the classifier stage (``xc_core.classifier``).

``ramen-clf`` is RAMEN (NGAME) in the RAMEN paper: the graph-regularized encoder, then per-label
classifiers. The encoder part is exactly the base method's (same switches), so an already trained base
encoder of the same profile and seed is reused instead of trained twice (``methods/encoder/training.py``).
"""

from dataclasses import replace

from xc_core.methods.base import register
from xc_core.methods.encoder import encoder_method

SUFFIX = "-clf"
BASES = ("pretrained", "dual_encoder", "ramen")


def base_method_name(name: str) -> str:
    """The method whose encoder ``name`` ends with: ``ramen-clf@links`` → ``ramen@links``."""
    return name.replace(SUFFIX, "", 1)


for _base in BASES:
    _method = encoder_method(_base)
    register(replace(_method, name=f"{_base}{SUFFIX}", classifier=True, baselines=(_base,),
                     description=f"{_method.description}; then per-label classifiers fused with the encoder"))
