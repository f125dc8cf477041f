"""Training methods; importing this package registers every built-in one (``base.py``: what a method is;
``roles.py``: the registry's role queries — run order, default lists, references)."""

# Registration order is the order of every role list (requirements first whatever it is): the floor, text-only and
# RAMEN, each with the classifier stage, IRENE, the baselines that need the graph at inference, the ablations, AugGT.
# isort: off
from xc_core.methods import pretrained, dual_encoder, ramen, classifier, irene, textgnn, oak, ablations, auggt  # noqa: F401
# isort: on
from xc_core.methods.base import (
    METHODS,
    Fitted,
    Method,
    Predictions,
    Requires,
    Roles,
    Scorer,
    Served,
    TrainJob,
    get_method,
    register,
    scorer_of,
)
from xc_core.methods.roles import (
    control_method,
    cost_reference,
    default_method,
    dependency_order,
    headline_methods,
    keyword_method,
    method_names,
    references,
    requirements,
    result_methods,
    run_methods,
)

# Compatibility names for callers not yet on the queries above, taken from the built-in registrations: a method
# registered later is in the queries' answers, not in these.
HEADLINE = tuple(headline_methods())
RUN_METHODS = tuple(run_methods())
DEFAULT_METHOD = default_method()

__all__ = ["DEFAULT_METHOD", "HEADLINE", "METHODS", "RUN_METHODS", "Fitted", "Method", "Predictions", "Requires",
           "Roles", "Scorer", "Served", "TrainJob", "control_method", "cost_reference", "default_method",
           "dependency_order", "get_method", "headline_methods", "keyword_method", "method_names", "references",
           "register", "requirements", "result_methods", "run_methods", "scorer_of"]
