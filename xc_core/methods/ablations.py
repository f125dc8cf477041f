"""RAMEN ablations: each switches off one ingredient."""

from xc_core.methods.base import Method, register

RAMEN_NO_PRUNING = register(Method("ramen_no_pruning", "RAMEN without anchor pruning",
                                   overrides={"regularize": True, "prune": False, "bandit": True}))
RAMEN_NO_DOC_GRAPH = register(Method("ramen_no_doc_graph", "RAMEN with label-side regularizers only",
                                     overrides={"regularize": True, "doc_sets": [], "prune": True, "bandit": True}))
RAMEN_NO_LABEL_GRAPH = register(Method("ramen_no_label_graph", "RAMEN with document-side regularizers only",
                                       overrides={"regularize": True, "label_sets": [], "prune": True, "bandit": True}))
RAMEN_NO_BANDIT = register(Method("ramen_no_bandit", "RAMEN with fixed uniform λ (no bandit)",
                                  overrides={"regularize": True, "prune": True, "bandit": False}))
