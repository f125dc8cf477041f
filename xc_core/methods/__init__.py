"""Training methods; importing this package registers every one of them."""

from xc_core.methods import ablations, auggt, dual_encoder, pretrained, ramen  # noqa: F401 - registration
from xc_core.methods.base import METHODS, Method, get_method, register

__all__ = ["METHODS", "Method", "get_method", "register"]
