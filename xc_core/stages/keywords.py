"""``xc add-keywords`` and the ``streamed_keywords`` asset: novel keywords from a file into the serving index of the
method that takes them (the registry's ``keyword_method()``), without retraining or rebuilding it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from xc_core.paths import resolve_home
from xc_core.stages import Command, Payload, register
from xc_core.stages.options import add_dataset, add_profile


def stream_keywords(home: Path, dataset: str, profile: str, path: Path, batch: int = 4096) -> dict[str, Any]:
    """The keywords of ``path`` into the keyword method's serving index (``Method`` with ``add_keywords``)."""
    from xc_core.methods import get_method, keyword_method
    from xc_core.methods.base import TakesKeywords

    method = get_method(keyword_method())
    if not isinstance(method, TakesKeywords):
        raise LookupError(f"{method.name} has the keywords role but no add_keywords: it cannot take keywords")
    return {"file": str(path), **method.add_keywords(home, dataset, profile, Path(path), batch=batch)}


def _arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("file", help="CSV or Parquet with a keyword_text column and optionally keyword_id")
    add_dataset(command)
    add_profile(command, help="profile the keyword method was trained at")
    command.add_argument("--batch", type=int, default=4096, help="keywords represented at once")


def _run(args: argparse.Namespace) -> Payload:
    return {**stream_keywords(resolve_home(args.home), args.dataset, args.profile, Path(args.file), args.batch),
            "file": args.file}


COMMAND = register(Command("add-keywords", "stream novel keywords into the keyword method's serving index (IRENE's;"
                                           " no retraining)", _arguments, _run))
