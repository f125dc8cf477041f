"""RAMEN ablations: each switches off one ingredient."""

from xc_core.methods.base import Roles, register
from xc_core.methods.encoder import EncoderMethod
from xc_core.methods.ramen import RAMEN


def _ablation(name: str, description: str, roles: Roles | None = None, **overrides: object) -> EncoderMethod:
    switches = {"regularize": True, "prune": True, "bandit": True, **overrides}
    return register(EncoderMethod(name, description, overrides=switches, needs_anchor_sets=True,
                                  ablation_of=RAMEN.name, roles=roles or Roles()))


# the two on the results pages (RAMEN Table 6) first: registration order is the results' row order
RAMEN_NO_BANDIT = _ablation("ramen_no_bandit", "RAMEN with fixed uniform λ (no bandit)", Roles(results=True),
                            bandit=False)
RAMEN_NO_PRUNING = _ablation("ramen_no_pruning", "RAMEN without anchor pruning", Roles(results=True), prune=False)
RAMEN_NO_DOC_GRAPH = _ablation("ramen_no_doc_graph", "RAMEN with label-side regularizers only", doc_sets=[])
RAMEN_NO_LABEL_GRAPH = _ablation("ramen_no_label_graph", "RAMEN with document-side regularizers only", label_sets=[])
