"""Options several commands share: the data set, the method, the profile."""

from __future__ import annotations

import argparse

from xc_core.profiles import PROFILE_NAMES


def add_dataset(command: argparse.ArgumentParser, events_only: bool = False) -> None:
    """``--dataset`` on every command (``--name``, the old spelling of graphs/dataset/anchors, still works): a
    built-in name, one defined in the home (checked when the command runs: the home is an option too), or a
    folder."""
    kinds = "an event-log data set (built in or defined in the home)" if events_only else (
        "a data set: built in (synthetic, aol-1000, wikispeedia), defined in the home (`xc dataset --name NAME "
        "--from-events`), or PATH (an XC-repository folder)")
    command.add_argument("--dataset", "--name", dest="dataset", default="synthetic", help=f"{kinds} (default: "
                                                                                            "synthetic)")


def add_method(command: argparse.ArgumentParser) -> None:
    """``--method``: any registered method (``xc_core.methods``), or a graph method on some anchor sets."""
    from xc_core.methods import default_method, method_names

    names = " | ".join(method_names())
    default = default_method()
    command.add_argument("--method", default=default,
                         help=f"{names} | <graph method>@<set>[+<set>] (default: {default})")


def add_profile(command: argparse.ArgumentParser, help: str | None = None) -> None:
    command.add_argument("--profile", default="demo", choices=PROFILE_NAMES, help=help)
