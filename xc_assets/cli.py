"""The ``xc`` script: xc_core's commands plus ``run`` and ``promote``, which go through Dagster.

They live here, in the Dagster layer, so that ``xc_core`` never imports Dagster (``python -m xc_core.cli``
runs the library's commands alone). Both print a table for people (``xc_assets.summary``), or their JSON summary
with ``--json``; ``run`` also saves that JSON as ``<home>/last-run.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from xc_core import cli as core
from xc_core.datasets.registry import resolve_dataset
from xc_core.paths import resolve_home
from xc_core.profiles import PROFILE_NAMES


def _methods(args: argparse.Namespace) -> tuple[str, ...]:
    from xc_core.methods import method_names

    known = method_names()
    methods = tuple(known) if args.methods == "all" else tuple(m for m in args.methods.split(",") if m)
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise SystemExit(f"xc {args.command}: unknown method(s) {', '.join(unknown)}: choose from "
                         f"{', '.join(known)} or 'all'")
    return methods


def _min_lead(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text}: a lead in the metric's own units, a fraction in [0, 1) "
                                         "(0.005 = half a P@1 point)")
    return value


def cmd_promote(args: argparse.Namespace) -> dict[str, object]:
    from xc_assets.run import promote_methods

    home = resolve_home(args.home)
    return promote_methods(resolve_dataset(args.dataset, home), args.profile, home, _methods(args),
                           min_lead=args.min_lead)


def cmd_run(args: argparse.Namespace) -> dict[str, object]:
    from xc_assets.run import run_pipeline

    home = resolve_home(args.home)
    summary = run_pipeline(dataset=resolve_dataset(args.dataset, home), profile=args.profile, home=home,
                           methods=_methods(args),
                           reuse_data=args.reuse_data, min_lead=args.min_lead)
    # for machines and for `python -m xc_assets.summary`, whichever output was asked for
    (home / "last-run.json").write_text(json.dumps(summary, default=str) + "\n")
    return summary


def add_dagster_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    from xc_assets.summary import table
    from xc_core.methods import RUN_METHODS

    run = sub.add_parser("run", parents=[common], help="materialize the asset graph in-process through Dagster")
    promote = sub.add_parser("promote", parents=[common],
                             help="register evaluated methods in turn and run the promotion gate (Dagster)")
    for command in (run, promote):
        command.add_argument("--dataset", default="synthetic",
                             help="a built-in data set, one defined in the home (`xc dataset --name NAME "
                                  "--from-events`), or PATH (an XC-repository folder, defined in the home by its "
                                  "folder name on first use) (default: synthetic)")
        command.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
        command.add_argument("--methods", default=",".join(RUN_METHODS),
                             help="comma-separated methods to train and evaluate, or 'all'"
                                  + (" (empty: data stages only)" if command is run else ""))
        command.add_argument("--min-lead", type=_min_lead, default=0.0, metavar="LEAD",
                             help="promote only if the primary metric's lead over the champion (point estimate, "
                                  "a fraction: 0.005 = half a P@1 point) is at least LEAD, besides being "
                                  "significant (default 0: any significant lead)")
        command.add_argument("--json", action="store_true", help="print the summary as one JSON line, not a table")
        command.set_defaults(render=table)
    run.add_argument("--reuse-data", action="store_true",
                     help="skip the data lineage run and train on the anchor sets already materialized in --home")
    run.set_defaults(func=cmd_run)
    promote.set_defaults(func=cmd_promote)


def build_parser() -> argparse.ArgumentParser:
    return core.build_parser(extend=add_dagster_commands)


def main(argv: Sequence[str] | None = None) -> int:
    return core.main(argv, parser=build_parser())


if __name__ == "__main__":
    sys.exit(main())
