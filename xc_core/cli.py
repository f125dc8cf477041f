"""``xc``: one command per pipeline stage, each printing a one-line JSON summary on stdout.

The commands are the stages' (``xc_core.stages``: one module per command, each registering its options and run
function); this module parses and runs them. The ``xc`` script (``xc_assets.cli``) registers ``run``,
``promote`` and ``results``, which go through Dagster. ``python -m xc_core.cli`` runs the library's commands
without Dagster.

Progress bars and logs go to stderr, so ``xc ... | jq`` always sees exactly one JSON line (``run`` and
``promote`` print a table for people instead, their JSON with ``--json``; ``--quiet`` silences every progress bar,
the libraries' included). A data set is named by its name, never the folder path it was given. Bad input and
missing prerequisites (a rejected file, an unknown data set, nothing trained yet, no champion) print one line
naming the file or name and the fix, and exit 2; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from xc_core.paths import dataset_slug

if TYPE_CHECKING:
    pass


def _emit(payload: dict[str, object], args: argparse.Namespace) -> None:
    """One JSON line, or the command's text for people (its ``render`` default) unless ``--json`` asks for JSON."""
    if isinstance(payload.get("dataset"), str):  # a folder given as PATH is named as XCDataset names it
        payload["dataset"] = dataset_slug(str(payload["dataset"]))
    render: Callable[[dict[str, object]], str] | None = getattr(args, "render", None)
    if render is not None and not getattr(args, "json", False):
        print(render(payload), flush=True)
    else:
        print(json.dumps(payload, default=str), flush=True)


# What the libraries read to hide their progress bars: tqdm (at import), Hugging Face downloads and transformers'
# weight loading (at import), MLflow's artifact transfers (at each transfer); processes a command starts inherit it.
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


@contextmanager
def _progress_bars_off(quiet: bool) -> Iterator[None]:
    """``--quiet``: xc's own bars go through each command's ``progress=``; the libraries' through QUIET_ENV and,
    for those already imported (their flag was read then), their own switch. The variables are put back after
    the command (tests call :func:`main` in-process)."""
    if not quiet:
        yield
        return
    saved = {key: os.environ.get(key) for key in QUIET_ENV}
    os.environ.update(QUIET_ENV)
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per registered command (``xc_core.stages``: the stages in pipeline order, then those other
    modules registered, e.g. the Dagster layer's ``run``, ``promote`` and ``results``)."""
    from xc_core.stages import commands

    parser = argparse.ArgumentParser(prog="xc", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="data root for everything xc writes (default: $XC_HOME or ./.xc)")
    common.add_argument("--quiet", action="store_true", help="no progress bars")
    common.add_argument("-v", "--verbose", action="store_true", help="log at INFO to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in commands():
        found = sub.add_parser(command.name, parents=[common], help=command.help)
        command.arguments(found)
        found.set_defaults(func=command.run, render=command.render)
    return parser


def main(argv: Sequence[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run one command (``parser``: :func:`build_parser`'s by default; the ``xc`` script passes the full one)."""
    args = (parser or build_parser()).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    func: Callable[[argparse.Namespace], dict[str, object]] = args.func
    try:
        with _progress_bars_off(args.quiet):
            payload = func(args)
        _emit(payload, args)
        if payload.get("success") is False:  # e.g. a failed Dagster run or a blocking check
            return 1
    except Exception as exc:  # the CLI boundary turns known errors into one clear line
        from xc_core.index import IndexError_
        from xc_core.logs.errors import IngestError
        from xc_core.tracking.served import ServedModelError

        # bad input or missing prerequisites (no evaluation yet, no champion, a tracking server down), a corrupt or
        # stale index or served model: one line that says what to do, not a traceback; anything else is a bug and
        # keeps its traceback
        if isinstance(exc, (IngestError, FileNotFoundError, LookupError, ConnectionError, IndexError_,
                            ServedModelError)):
            print(f"xc {args.command}: error: {exc}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
