"""``xc simulate`` and the ``world`` / ``simulated_events`` assets: the sponsored-search simulator's world → day
files → the home's event store."""

from __future__ import annotations

import argparse

from xc_core.paths import resolve_home
from xc_core.simulate.config import SCALES
from xc_core.stages import Command, Payload, register


def _arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--scale", default="demo", choices=SCALES)
    command.add_argument("--seed", type=int, default=0)


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.simulate.pipeline import simulate_into_store

    return simulate_into_store(args.scale, args.seed, resolve_home(args.home), progress=not args.quiet)


COMMAND = register(Command("simulate", "simulated world → day files → event store", _arguments, _run,
                           docs="docs/data.md", assets=("world", "simulated_events")))
