"""``xc serve``: the champion over HTTP on 127.0.0.1, following ``@champion`` without a restart
(``xc_core.serving``)."""

from __future__ import annotations

import argparse

from xc_core.paths import resolve_home
from xc_core.serving import DEFAULT_PORT  # not .server: FastAPI loads only when the command runs
from xc_core.stages import Command, Payload, register
from xc_core.stages.options import add_dataset


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    command.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    command.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    command.add_argument("--poll-seconds", type=float, default=5.0,
                         help="how often to look for a new champion or newly streamed keywords (default 5)")
    command.add_argument("--max-batch", type=int, default=64,
                         help="queries one model call answers at most when requests queue up (default 64)")
    command.add_argument("--max-queries", type=int, default=256, help="queries one request may send (default 256)")
    command.add_argument("--max-chars", type=int, default=512, help="characters one query may have (default 512)")
    command.add_argument("--max-queue", type=int, default=128,
                         help="requests that may wait for the model; one more is refused with 503 (default 128)")
    command.add_argument("--deadline-ms", type=_milliseconds, default=2000.0,
                         help="a request not answered within this is refused with 503 and dropped (default 2000)")
    command.add_argument("--body-timeout-ms", type=_milliseconds, default=10000.0,
                         help="a request body not arrived within this is refused with 408 (default 10000)")
    command.add_argument("--version", default=None, help="serve this registry version and follow no alias (a "
                                                         "canary, a benchmark of one version)")


def _milliseconds(text: str) -> float:
    """A time limit given on the command line: a positive number of milliseconds (argparse names the option)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text!r}: a positive number of milliseconds, e.g. 2000")
    return value


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.datasets.registry import resolve_dataset
    from xc_core.serving.app import Limits
    from xc_core.serving.server import serve

    home = resolve_home(args.home)
    limits = Limits(max_queries=args.max_queries, max_chars=args.max_chars, max_queue=args.max_queue,
                    deadline_s=args.deadline_ms / 1000, body_timeout_s=args.body_timeout_ms / 1000)
    return serve(resolve_dataset(args.dataset, home, define=False), home, args.host, args.port, args.poll_seconds,
                 limits, args.max_batch, args.version)


COMMAND = register(Command("serve", "serve the champion over HTTP on 127.0.0.1 (/predict, /health, /ready, "
                                    "/metrics), following @champion without a restart", _arguments, _run,
                                    docs="docs/serving.md"))
