"""The README is a map (issue #44): short, and its table of command → stage module → Dagster assets → docs page is
the one the command registry generates, and so is its method table (the method registry), so a new stage, asset,
method or page cannot be left off it."""

from __future__ import annotations

import re
from pathlib import Path

import xc_assets.cli  # noqa: F401  # registers run, promote and results beside the stages' own commands
from xc_assets.floor_plan import METHODS_END, METHODS_START, method_table
from xc_core.stages import MAP_END, MAP_START, commands, floor_plan

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_a_short_map_generated_from_the_registry() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200, "the README is the front door: move prose to a page under docs/"
    table = text[text.index(MAP_START) + len(MAP_START):text.index(MAP_END)].strip()
    assert table == floor_plan(commands()), "regenerate the map: python -m xc_assets.floor_plan"
    methods = text[text.index(METHODS_START) + len(METHODS_START):text.index(METHODS_END)].strip()
    assert methods == method_table(), "regenerate the method table: python -m xc_assets.floor_plan"


def test_every_family_asset_belongs_to_one_command_and_every_stage_has_its_page() -> None:
    from xc_assets.definitions import defs

    family = {key.path[-1] for key in defs.resolve_asset_graph().get_all_asset_keys()}
    claimed = [name for command in commands() for name in command.asset_names]
    assert len(claimed) == len(set(claimed)), "an asset is claimed by two commands"
    assert set(claimed) == family, f"unmapped assets: {sorted(family - set(claimed))}; " \
                                   f"claimed but missing: {sorted(set(claimed) - family)}"
    for command in commands():
        assert command.docs and (ROOT / command.docs).is_file(), f"xc {command.name}: no docs page {command.docs!r}"
    for page in re.findall(r"\]\((docs/[^)]+)\)", method_table()):
        assert (ROOT / page).is_file(), page
        assert (ROOT / (command.module.replace(".", "/") + ".py")).is_file(), command.module


def test_every_relative_link_of_the_readme_and_the_docs_pages_resolves() -> None:
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    broken = [f"{page.relative_to(ROOT)} → {target}" for page in pages for target in LINK.findall(page.read_text())
              if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists()]
    assert not broken, broken
