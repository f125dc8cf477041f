"""``xc add-keywords`` and the ``streamed_keywords`` asset: novel keywords from a file into the serving index of the
method that takes them (the registry's ``keyword_method()``), without retraining or rebuilding it."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from xc_core.paths import resolve_home
from xc_core.stages import Command, Markdown, Payload, StageAsset, register
from xc_core.stages.options import add_dataset, add_profile

log = logging.getLogger(__name__)
#: the keyword method's steps, each timed per keyword
STEPS = ("encode", "shortlist", "refine", "combine", "add")


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


class KeywordsOptions(BaseModel):
    paths: list[str] = Field(description="CSV or Parquet keyword files (keyword_text, optional keyword_id)")
    profile: str = Field(default="demo", description="profile the keyword method was trained and indexed at")


def keywords_markdown(results: list[dict[str, Any]]) -> str:
    """One row per file: keywords added and skipped, then milliseconds per keyword, in total and by step."""
    rows = ["| file | added | skipped | ms/keyword | " + " | ".join(STEPS) + " |", "|---" * (4 + len(STEPS)) + "|"]
    for r in results:
        rows.append(f"| {Path(r['file']).name} | {r['added']} | {r['skipped']} | {r['ms_per_item']:.3f} | "
                    + " | ".join(f"{r['steps_ms_per_item'][s]:.3f}" for s in STEPS) + " |")
    return "\n".join(rows)


def materialize_keywords(home: Path, dataset: str, method: str | None, options: KeywordsOptions) -> dict[str, Any]:
    """The ``streamed_keywords`` asset: every file of ``options.paths`` streamed in, one table row each."""
    results = []
    for path in options.paths:
        result = stream_keywords(home, dataset, options.profile, Path(path))
        log.info("%s: %d added, %d skipped, %.3f ms per keyword", path, result["added"], result["skipped"],
                 result["ms_per_item"])
        results.append(result)
    added = sum(r["added"] for r in results)
    ms = sum(r["ms_per_item"] * r["added"] for r in results) / added if added else 0.0
    index = {"index_count": results[-1]["index_count"], "index_dir": Path(results[-1]["index_dir"])} if results else {}
    return {"summary": Markdown(keywords_markdown(results)), "added": added,
            "skipped": sum(r["skipped"] for r in results), "ms_per_item": round(ms, 4), **index}


COMMAND = register(Command(
    "add-keywords", "stream novel keywords into the keyword method's serving index (IRENE's; no retraining)",
    _arguments, _run,
    asset=StageAsset("streamed_keywords", "Novel keywords streamed into the keyword method's serving index (IRENE's: "
                                          "encode → shortlist → refine → combine → add), served by the next query; "
                                          "already-served keyword ids are skipped", materialize_keywords,
                     deps=("label_index",), options=KeywordsOptions, kinds=("faiss", "parquet")), docs="docs/irene.md"))
