"""A method's code version per stage: what decides that a trained model or its evaluation is current.

``provenance.code_version`` hashes all of xc_core, so any edit would make every model stale; here a record is
stale only when code it ran changed: the method's own modules (the one that registered it and its class's), what
they import, the stage's modules and the methods it builds on (``-clf`` on its encoder). The registry package
``xc_core.methods`` is not followed: it imports every method."""

from __future__ import annotations

from typing import Any

from xc_core.methods.base import REGISTERED_IN, get_method
from xc_core.provenance import outdated, sources_version

#: the stage modules whose code a record of that stage depends on, besides the method's own
STAGE_MODULES: dict[str, tuple[str, ...]] = {
    "train": ("xc_core.stages.train",),
    "evaluate": ("xc_core.stages.index", "xc_core.stages.evaluate"),
    "abtest": ("xc_core.stages.abtest",),
}
REGISTRY = ("xc_core.methods",)


def required(name: str) -> tuple[str, ...]:
    """The methods whose trained models ``name`` builds on (``Method.requires``)."""
    return get_method(name).requires.methods


def method_modules(name: str) -> tuple[str, ...]:
    """The modules whose code is the method's: its class's and the registering module's, and those of every method
    it requires (``ramen@links``: ramen's)."""
    method, base = get_method(name), name.partition("@")[0]
    own = [type(method).__module__, REGISTERED_IN.get(base, "")]
    for other in required(name):
        own.extend(method_modules(other))
    return tuple(dict.fromkeys(m for m in own if m))


def method_code_version(name: str, stage: str) -> str:
    """The short hash of the code a ``stage`` record of method ``name`` ran (``train``, ``evaluate``, ``abtest``)."""
    if stage not in STAGE_MODULES:
        raise ValueError(f"stage '{stage}': one of {', '.join(STAGE_MODULES)}")
    return sources_version([*method_modules(name), *STAGE_MODULES[stage]], stop=REGISTRY)


#: where a train or evaluation record keeps its method's code version (its ``code_version`` is the whole package's,
#: which any edit of xc_core changes)
RECORD_KEY = "method_code_version"


def method_stamp(name: str, stage: str) -> dict[str, str]:
    """What a ``stage`` record of method ``name`` carries besides :func:`xc_core.provenance.code_stamp`."""
    return {RECORD_KEY: method_code_version(name, stage)}


def record_outdated(record: dict[str, Any], name: str, stage: str) -> str | None:
    """Why ``record`` (a train or evaluation summary of method ``name``) is not current under the per-method rule, or
    None when the code its stage ran is unchanged: the rule the results job's freshness applies, for code that reads
    records without Dagster (a ``-clf`` reusing its base's encoder, the benchmarks' grids)."""
    why = outdated(record, method_code_version(name, stage), RECORD_KEY, "method code version")
    return why if why is None or RECORD_KEY not in record else f"the {stage} code of {name} changed: {why}"
