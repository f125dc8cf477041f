"""Training methods; importing this package registers every built-in one (``base.py``: what a method is)."""

from xc_core.methods import ablations, auggt, dual_encoder, pretrained, ramen  # noqa: F401 - registration

# isort: split
from xc_core.methods import (
    classifier,  # noqa: F401 - registers '<base>-clf' after its bases
    irene,  # noqa: F401 - stage II on a trained encoder
    oak,  # noqa: F401 - two-stage GCN baseline: 'oak' and 'oak-oracle'
    textgnn,  # noqa: F401 - graph neighbours at inference (TextGNN)
)
from xc_core.methods.base import (
    METHODS,
    Fitted,
    Method,
    Predictions,
    Scorer,
    Served,
    TrainJob,
    get_method,
    register,
    scorer_of,
)

#: The headline comparison first (zero-shot floor, text-only baseline, RAMEN, each also with the classifier
#: stage), then every other method.
HEADLINE = ("pretrained", "dual_encoder", "ramen", "pretrained-clf", "dual_encoder-clf", "ramen-clf")
#: What ``make run`` / ``xc run`` / ``xc promote`` train and gate by default: the floor, both encoders, and
#: both with the classifier stage (each ``-clf`` after its base, whose encoder it reuses).
RUN_METHODS = ("pretrained", "dual_encoder", "ramen", "dual_encoder-clf", "ramen-clf")
#: What a single-method command trains, evaluates or registers when none is named (``xc train``, the challenger).
DEFAULT_METHOD = "ramen"


def method_names() -> list[str]:
    """Every registered method, headline first: Dagster's method partitions and ``xc run --methods all``."""
    return [*HEADLINE, *(name for name in METHODS if name not in HEADLINE)]


__all__ = ["DEFAULT_METHOD", "HEADLINE", "METHODS", "RUN_METHODS", "Fitted", "Method", "Predictions", "Scorer",
           "Served", "TrainJob", "get_method", "method_names", "register", "scorer_of"]
