"""The registry's role queries: which methods run by default, appear in the results, pair as references, serve as
the A/B control or the cost reference, and in what order they train — all read from what each registered method
declares (``Method.roles``, ``Method.requires``), so a method registered later joins by declaring, not by an edit
here or in a stage. Lists are in registration order (the order ``xc_core.methods`` imports the built-in modules,
then methods registered later), each method after the methods it requires."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from xc_core.methods.base import METHODS, Roles, get_method


def dependency_order(names: Iterable[str] | None = None) -> list[str]:
    """``names`` (default: every registered method) with each after the methods it requires that are among them;
    otherwise in the order given. A cycle of requirements is an error that names it."""
    pending = list(dict.fromkeys(METHODS if names is None else names))
    needs = {name: [m for m in get_method(name).requires.methods if m in pending and m != name] for name in pending}
    ordered: list[str] = []
    while pending:
        ready = next((n for n in pending if all(m in ordered for m in needs[n])), None)
        if ready is None:
            raise ValueError(f"methods that require each other: {', '.join(pending)}")
        ordered.append(ready)
        pending.remove(ready)
    return ordered


def with_role(role: Callable[[Roles], bool]) -> list[str]:
    """The registered methods whose roles satisfy ``role``, in dependency order."""
    return dependency_order(name for name, method in METHODS.items() if role(method.roles))


def headline_methods() -> list[str]:
    return with_role(lambda r: r.headline)


def run_methods() -> list[str]:
    """What ``make run`` / ``xc run`` / ``xc promote`` / the nightly chain train and gate by default."""
    return with_role(lambda r: r.run)


def result_methods() -> list[str]:
    """What the results job runs by default."""
    return with_role(lambda r: r.results)


def references() -> list[str]:
    """The methods every method is paired against on the results page, lowest rank first."""
    ranked = {name: rank for name, m in METHODS.items() if (rank := m.roles.reference) is not None}
    return sorted(ranked, key=ranked.__getitem__)


def method_names() -> list[str]:
    """Every registered method, headline first: Dagster's method partitions and ``xc run --methods all``."""
    return dependency_order([*headline_methods(), *METHODS])


def _the_one(role: str, holds: Callable[[Roles], bool]) -> str:
    found = [name for name, method in METHODS.items() if holds(method.roles)]
    if len(found) != 1:
        raise LookupError(f"exactly one registered method must have the role '{role}': found "
                          f"{', '.join(found) or 'none'}")
    return found[0]


def default_method() -> str:
    """What a single-method command (``xc train``, the challenger) uses when none is named."""
    return _the_one("default", lambda r: r.default)


def control_method() -> str:
    """The A/B tests' control arm (``xc abtest``, ``xc run``'s ``ab_vs_control``, the results' A/B tests)."""
    return _the_one("control", lambda r: r.control)


def cost_reference() -> str:
    """The method whose costs the costs table divides by."""
    return _the_one("cost_reference", lambda r: r.cost_reference)


def keyword_method() -> str:
    """The method whose serving index novel keywords are streamed into."""
    return _the_one("keywords", lambda r: r.keywords)


def requirements(name: str) -> list[str]:
    """Every method ``name`` builds on, transitively, in dependency order (itself excluded)."""
    found: list[str] = []
    todo = list(get_method(name).requires.methods)
    while todo:
        method = todo.pop()
        if method not in found and method != name:
            found.append(method)
            todo += get_method(method).requires.methods
    return dependency_order(found)

