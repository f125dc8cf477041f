"""Print the README's map (command → stage module → Dagster assets → docs page) and its method table from the
command and method registries:

    .venv/bin/python -m xc_assets.floor_plan

Paste each between the README's markers (map, methods); ``tests/test_readme_map.py`` fails until they agree. It
lives here, not in ``xc_core.stages``, because the commands that go through Dagster register in ``xc_assets.cli``."""

from __future__ import annotations

METHODS_START, METHODS_END = "<!-- methods:start -->", "<!-- methods:end -->"


def method_table() -> str:
    """The README's method table: every registered method, what it is and its docs page (a method's optional
    ``docs`` attribute; the training page where it has none), in the registry's order. It lives here, not in
    ``xc_core.stages``: every stage imports that package, and the method registry there would pull the classifier
    and the trainer into the data lineage's code version (tests/test_provenance.py)."""
    from xc_core.methods import method_names
    from xc_core.methods.base import get_method

    rows = ["| method | what it is | docs |", "|---|---|---|"]
    for name in method_names():
        method = get_method(name)
        page = getattr(method, "docs", "docs/training.md")
        title = page.removeprefix("docs/").removesuffix(".md")
        rows.append(f"| `{name}` | {method.description} | [{title}]({page}) |")
    return "\n".join(rows)


def main() -> None:
    import xc_assets.cli  # noqa: F401  # registers run, promote and results beside the stages' own commands
    from xc_core.stages import commands, floor_plan

    print(floor_plan(commands()), method_table(), sep="\n\n")


if __name__ == "__main__":
    main()
