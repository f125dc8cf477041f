"""Methods declare what they need (``requires``) and what they are (``roles``); the default run, the results job,
the references, the A/B control, the cost reference and the training order are the registry's answers — a method
registered later joins them by declaring, with no list edited anywhere."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from xc_core.methods import (
    DEFAULT_METHOD,
    HEADLINE,
    METHODS,
    RUN_METHODS,
    Requires,
    Roles,
    control_method,
    cost_reference,
    default_method,
    dependency_order,
    get_method,
    headline_methods,
    keyword_method,
    method_names,
    references,
    register,
    requirements,
    result_methods,
    run_methods,
)
from xc_core.methods.base import REGISTERED_IN
from xc_core.methods.encoder import EncoderMethod

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def registry() -> Iterator[None]:
    """The real registry; what a test registers is gone afterwards."""
    saved, modules = dict(METHODS), dict(REGISTERED_IN)
    yield
    METHODS.clear()
    METHODS.update(saved)
    REGISTERED_IN.clear()
    REGISTERED_IN.update(modules)


def toy(name: str, *, roles: Roles | None = None, needs: tuple[str, ...] = ()) -> EncoderMethod:
    """A method a user adds: any object that satisfies the protocol (a dual-encoder one is the shortest)."""
    return EncoderMethod(name, f"toy {name}", roles=roles or Roles(), requires=Requires(methods=needs))


# -- the built-in declarations give the lists the project ran with before they were declared -------------------

def test_the_built_in_roles_give_the_default_lists() -> None:
    assert run_methods() == ["pretrained", "dual_encoder", "ramen", "dual_encoder-clf", "ramen-clf"]
    assert result_methods() == ["pretrained", "dual_encoder", "ramen", "pretrained-clf", "dual_encoder-clf",
                                "ramen-clf", "irene", "textgnn", "oak", "oak-oracle", "ramen_no_bandit",
                                "ramen_no_pruning"]
    assert headline_methods() == ["pretrained", "dual_encoder", "ramen", "pretrained-clf", "dual_encoder-clf",
                                  "ramen-clf"]
    assert references() == ["ramen", "dual_encoder", "pretrained"]  # of two references the first is the method
    assert (default_method(), control_method(), cost_reference(), keyword_method()) == (
        "ramen", "pretrained", "ramen", "irene")
    # the compatibility names are the same answers
    assert (list(HEADLINE), list(RUN_METHODS), DEFAULT_METHOD) == (headline_methods(), run_methods(),
                                                                   default_method())


def test_every_method_is_listed_once_headline_first() -> None:
    names = method_names()
    assert sorted(names) == sorted(METHODS)
    assert names[:len(headline_methods())] == headline_methods()


@pytest.mark.parametrize(("name", "needs"), [
    ("pretrained-clf", ("pretrained",)), ("dual_encoder-clf", ("dual_encoder",)), ("ramen-clf", ("ramen",)),
    ("irene", ("ramen",)), ("oak-oracle", ("oak",)), ("ramen", ("dual_encoder",)), ("oak", ()), ("textgnn", ()),
])
def test_what_each_method_builds_on_is_declared(name: str, needs: tuple[str, ...]) -> None:
    assert get_method(name).requires.methods == needs


def test_the_graph_at_inference_is_declared_by_the_methods_that_need_it() -> None:
    assert {n for n, m in METHODS.items() if m.requires.graph_at_inference} == {"textgnn", "oak", "oak-oracle"}


@pytest.mark.parametrize("listing", [run_methods, result_methods, method_names])
def test_every_list_puts_a_method_after_what_it_builds_on(listing: Callable[[], list[str]]) -> None:
    names = listing()
    for i, name in enumerate(names):
        assert not set(get_method(name).requires.methods) & set(names[i + 1:]), name


# -- dependency order ----------------------------------------------------------------------------------------

def test_dependency_order_puts_requirements_first_and_keeps_the_given_order_otherwise() -> None:
    assert dependency_order(["ramen-clf", "irene", "dual_encoder", "ramen"]) == [
        "dual_encoder", "ramen", "ramen-clf", "irene"]
    assert dependency_order(["oak-oracle", "textgnn", "oak"]) == ["textgnn", "oak", "oak-oracle"]
    # a requirement that is not asked for is not added, and does not hold anything back
    assert dependency_order(["irene", "pretrained"]) == ["irene", "pretrained"]
    # ramen builds on dual_encoder: its encoder is served only when it beats dual_encoder's (issue #43)
    assert requirements("ramen-clf") == ["dual_encoder", "ramen"]


def test_a_cycle_of_requirements_is_an_error_naming_it(registry: None) -> None:
    register(toy("toy_a", needs=("toy_b",)))
    register(toy("toy_b", needs=("toy_a",)))
    with pytest.raises(ValueError, match="toy_a, toy_b"):
        dependency_order(["toy_a", "toy_b", "ramen"])


# -- a method registered later joins the lists by declaring its roles ------------------------------------------

def test_a_new_method_joins_the_run_and_results_lists_after_what_it_requires(registry: None) -> None:
    # registered before what it builds on: the order still comes from `requires`
    register(toy("toy_head", roles=Roles(run=True, results=True), needs=("toy_base",)))
    register(toy("toy_base", roles=Roles(run=True)))
    register(toy("toy_quiet"))  # no role: in no default list
    assert run_methods()[-2:] == ["toy_base", "toy_head"]
    assert result_methods()[-1] == "toy_head" and "toy_base" not in result_methods()
    assert "toy_quiet" not in run_methods() + result_methods() and "toy_quiet" in method_names()
    assert dependency_order(method_names()) == method_names()


def test_a_new_headline_method_is_listed_with_the_headline_and_a_new_reference_by_its_rank(registry: None) -> None:
    register(toy("toy_star", roles=Roles(headline=True, reference=1)))
    assert headline_methods()[-1] == "toy_star" and method_names().index("toy_star") < method_names().index("irene")
    assert references() == ["ramen", "dual_encoder", "toy_star", "pretrained"]  # a tie: registration order


def test_a_role_held_by_one_method_moves_when_a_new_method_takes_it(registry: None) -> None:
    ramen = get_method("ramen")
    assert isinstance(ramen, EncoderMethod)
    METHODS["ramen"] = replace(ramen, roles=replace(ramen.roles, cost_reference=False, default=False))
    register(toy("toy_unit", roles=Roles(cost_reference=True, default=True)))
    assert (cost_reference(), default_method()) == ("toy_unit", "toy_unit")


def test_two_methods_claiming_a_single_role_is_an_error_naming_both(registry: None) -> None:
    register(toy("toy_control", roles=Roles(control=True)))
    with pytest.raises(LookupError, match="'control'.*pretrained, toy_control"):
        control_method()


def test_any_object_declaring_requires_and_roles_joins_the_lists(registry: None) -> None:
    """Any object with the protocol's attributes: a frozen dataclass of its own, not an EncoderMethod."""

    @dataclass(frozen=True)
    class Declared:
        name: str = "toy_own"
        requires: Requires = Requires(methods=("ramen",))
        roles: Roles = Roles(results=True)

    METHODS["toy_own"] = Declared()  # type: ignore[assignment]  # only what the queries read
    assert result_methods()[-1] == "toy_own" and requirements("toy_own") == ["dual_encoder", "ramen"]


# -- the Makefile's default ----------------------------------------------------------------------------------

def test_python_m_xc_core_methods_prints_the_registry_lists() -> None:
    out = subprocess.run([sys.executable, "-m", "xc_core.methods", "run"], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == ",".join(run_methods())
    bad = subprocess.run([sys.executable, "-m", "xc_core.methods", "nothing"], capture_output=True, text=True,
                         cwd=ROOT)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_make_run_trains_the_registry_run_list_by_default() -> None:
    dry = subprocess.run(["make", "-n", "run", f"BIN={Path(sys.executable).parent}"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert f"--methods {','.join(run_methods())} " in dry.stdout, dry.stdout + dry.stderr
