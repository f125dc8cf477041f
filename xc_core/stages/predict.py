"""``xc predict``: top-k labels for one query from the registry's champion (the served model)."""

from __future__ import annotations

import argparse

from xc_core.paths import resolve_home
from xc_core.stages import Command, Payload, register
from xc_core.stages.options import add_dataset


def _arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("query")
    add_dataset(command)
    command.add_argument("--k", type=int, default=10)


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.datasets.registry import resolve_dataset
    from xc_core.serving import predict_from_champion

    home = resolve_home(args.home)
    return predict_from_champion(resolve_dataset(args.dataset, home, define=False), args.query, home, k=args.k)


COMMAND = register(Command("predict", "top-k labels from the registry's champion", _arguments, _run,
                           docs="docs/serving.md"))
