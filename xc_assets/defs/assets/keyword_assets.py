"""Per data set: ``streamed_keywords`` — novel keywords added to IRENE's serving index after training (CSV or
Parquet files with ``keyword_text`` and optionally ``keyword_id``), each represented zero-shot from the
classifiers of similar seen keywords and searchable at once; no retraining, no index rebuild. ``add_keywords_job``
runs it for the operated data set and ``keyword_landing_sensor`` launches that job for each file landed."""

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from xc_assets.defs.constants import prefix
from xc_assets.defs.resources import XcHome


class StreamedKeywordsConfig(dg.Config):
    paths: list[str] = Field(description="CSV or Parquet keyword files (keyword_text, optional keyword_id)")
    profile: str = Field(default="demo", description="profile IRENE was trained and indexed at")


def keywords_markdown(results: list[dict[str, Any]]) -> str:
    """One row per file: keywords added and skipped, then milliseconds per keyword, in total and by step."""
    steps = ("encode", "shortlist", "refine", "combine", "add")
    rows = ["| file | added | skipped | ms/keyword | " + " | ".join(steps) + " |", "|---" * (4 + len(steps)) + "|"]
    for r in results:
        rows.append(f"| {Path(r['file']).name} | {r['added']} | {r['skipped']} | {r['ms_per_item']:.3f} | "
                    + " | ".join(f"{r['steps_ms_per_item'][s]:.3f}" for s in steps) + " |")
    return "\n".join(rows)


def _streamed_keywords(dataset: str) -> dg.AssetsDefinition:
    p = prefix(dataset)

    @dg.asset(key=[p, "streamed_keywords"], deps=[[p, "label_index"]], group_name=p, kinds={"faiss", "parquet"},
              description="Novel keywords streamed into the keyword method's serving index (IRENE's: encode → "
                          "shortlist → refine → combine → add), served by the next query; already-served keyword ids "
                          "are skipped")
    def streamed_keywords(context: dg.AssetExecutionContext, config: StreamedKeywordsConfig,
                          xc_home: XcHome) -> dg.MaterializeResult:
        from xc_core.stages.keywords import stream_keywords

        results = []
        for path in config.paths:
            result = {**stream_keywords(xc_home.path, dataset, config.profile, Path(path)), "file": path}
            context.log.info(f"{path}: {result['added']} added, {result['skipped']} skipped, "
                             f"{result['ms_per_item']:.3f} ms per keyword")
            results.append(result)
        added = sum(r["added"] for r in results)
        ms = sum(r["ms_per_item"] * r["added"] for r in results) / added if added else 0.0
        index = {"index_count": results[-1]["index_count"],
                 "index_dir": dg.MetadataValue.path(results[-1]["index_dir"])} if results else {}
        return dg.MaterializeResult(metadata={
            "summary": dg.MetadataValue.md(keywords_markdown(results)), "added": added,
            "skipped": sum(r["skipped"] for r in results), "ms_per_item": round(ms, 4), **index})

    return streamed_keywords
