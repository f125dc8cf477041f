"""The floor plan: one module per ``xc`` command and Dagster asset group, named after what it does.

    ingest → simulate → graph_tables → dataset → anchor_sets → train → index → evaluate → peer → report → abtest →
    keywords → predict → serve → results

Each module holds its stage's run function(s), which the CLI and the Dagster assets both call, and registers its
``xc`` command (:class:`Command`: its options and how it runs) with :func:`register`; ``xc_core.cli`` builds its
parser from :data:`COMMANDS` in this order, and the Dagster layer adds the commands that go through Dagster
(``run``, ``promote``, ``results``) to the same registry. A command may also declare its asset
(:class:`StageAsset`, no Dagster here): every data set's asset family (``xc_assets.defs.family``) then has it. A
new stage is one module that calls :func:`register`; the stages whose assets need Dagster's own shapes (multi-assets,
blocking checks, the registry's gate) keep a factory in ``xc_assets``.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

Payload = dict[str, object]


class Markdown(str):
    """A metadata value shown as markdown (the Dagster layer turns it into Dagster's markdown value)."""


@dataclass(frozen=True)
class StageAsset:
    """A stage's asset in each data set's Dagster family, declared without Dagster: ``materialize(home, data set,
    method or None, options)`` returns its metadata (a :class:`Markdown` or ``Path`` value is shown as such)."""

    name: str  # the asset key under the data set's prefix
    description: str
    materialize: Callable[[Path, str, str | None, Any], dict[str, Any]]
    deps: tuple[str, ...] = ()  # the assets of the same family it reads
    per_method: bool = False  # one partition per registered method
    options: type[BaseModel] | None = None  # its run config, as Dagster's launchpad shows it
    kinds: tuple[str, ...] = ()  # the tools the UI shows on it (faiss, scipy, …)
    code_stage: str | None = None  # the per-method code version it follows (methods.versions), shown stale by the UI


@dataclass(frozen=True)
class Command:
    """One ``xc`` subcommand: its options and what it runs (each prints a JSON line, or ``render``'s text), and the
    asset the stage adds to every data set's Dagster family, if any."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Payload]
    render: Callable[[Payload], str] | None = None
    asset: StageAsset | None = None
    docs: str = ""  # the docs page that explains the stage (README's map links it)
    assets: tuple[str, ...] = ()  # the Dagster assets of each data set's family the stage materializes (the map)
    stage: str = ""  # the module the stage's logic lives in, where not the run function's (a Dagster-side command)

    @property
    def module(self) -> str:
        return self.stage or self.run.__module__

    @property
    def asset_names(self) -> tuple[str, ...]:
        """The family assets this stage materializes: its declared ``asset`` and the ``assets`` named beside it."""
        return tuple(dict.fromkeys(((self.asset.name,) if self.asset else ()) + self.assets))


COMMANDS: dict[str, Command] = {}

#: the built-in stage modules, in pipeline order (the order of ``xc --help``)
STAGES = ("ingest", "simulate", "graph_tables", "dataset", "anchor_sets", "train", "index", "evaluate", "peer",
          "report", "abtest", "keywords", "predict", "serve", "results")


def register(command: Command) -> Command:
    if command.name in COMMANDS:
        raise ValueError(f"command '{command.name}' registered twice")
    COMMANDS[command.name] = command
    return command


def commands() -> list[Command]:
    """Every registered command: the built-in stages' in pipeline order (importing a stage module registers its
    command), then the others in the order they were registered."""
    for stage in STAGES:
        importlib.import_module(f"xc_core.stages.{stage}")
    order = {f"xc_core.stages.{stage}": i for i, stage in enumerate(STAGES)}
    return sorted(COMMANDS.values(), key=lambda command: order.get(command.run.__module__, len(order)))


MAP_START, MAP_END = "<!-- map:start -->", "<!-- map:end -->"


def floor_plan(registered: list[Command]) -> str:
    """The README's map: command → stage module → Dagster assets → docs page, one row per registered command."""
    rows = ["| command | stage module | Dagster assets (per data set) | docs |", "|---|---|---|---|"]
    for command in registered:
        assets = ", ".join(f"`{name}`" for name in command.asset_names) or "—"
        page = command.docs.removeprefix("docs/").removesuffix(".md").removesuffix("/index")
        rows.append(f"| `xc {command.name}` | `{command.module.replace('.', '/')}.py` | {assets} | "
                    f"[{page}]({command.docs}) |")
    return "\n".join(rows)

