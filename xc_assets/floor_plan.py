"""Print the README's map (command → stage module → Dagster assets → docs page) and its method table from the
command and method registries:

    .venv/bin/python -m xc_assets.floor_plan

Paste each between the README's markers (map, methods); ``tests/test_readme_map.py`` fails until they agree. It
lives here, not in ``xc_core.stages``, because the commands that go through Dagster register in ``xc_assets.cli``."""

from __future__ import annotations


def main() -> None:
    import xc_assets.cli  # noqa: F401  # registers run, promote and results beside the stages' own commands
    from xc_core.stages import commands, floor_plan, method_table

    print(floor_plan(commands()), method_table(), sep="\n\n")


if __name__ == "__main__":
    main()
