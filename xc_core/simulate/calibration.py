"""Calibration report: does a simulated log look like sponsored-search traffic?

Reads the day files (lazily, so a ``large`` run fits in memory) and the saved world, and reports
the shapes the simulator promises: Zipf-like query and keyword frequencies, CTR falling with
position, the brand / location / alias / typo mix, session lengths and the tail-keyword share.
Outputs ``calibration.json`` (the numbers), ``calibration.md`` and PNG figures.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import SupportsFloat, TypedDict, cast

import numpy as np
import polars as pl

from xc_core.simulate.run import TAIL_CLICKS
from xc_core.simulate.world import World

log = logging.getLogger(__name__)

SESSION_GAP = timedelta(minutes=30)


class CalibrationReport(TypedDict):
    figures: dict[str, object]  # name: number, list or dict
    markdown: str
    files: list[str]  # written paths


def calibration_report(world: World | str | Path, events_paths: Sequence[str | Path],
                       out_dir: str | Path) -> CalibrationReport:
    """Compute the calibration numbers, write JSON, markdown and PNGs; return them all.

    Returns ``{"figures": {name: number or list}, "markdown": str, "files": [written paths]}``.
    """
    w = world if isinstance(world, World) else World.load(world)
    paths = [str(p) for p in events_paths]
    if not paths:
        raise ValueError("calibration_report needs at least one events file")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    events = pl.scan_parquet(paths)
    query_events = _query_events(events, w)
    figures: dict[str, object] = {}
    series: dict[str, np.ndarray] = {}
    figures.update(_volume(events, query_events))
    figures.update(_query_frequency(query_events, series))
    figures.update(_keyword_frequency(events, w, series))
    figures.update(_positions(events))
    figures.update(_query_mix(query_events))
    figures.update(_sessions(query_events))
    images = _plots(figures, series, out)
    markdown = _markdown(figures, w, images)
    (out / "calibration.json").write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", "utf-8")
    (out / "calibration.md").write_text(markdown, "utf-8")
    files = [str(out / "calibration.json"), str(out / "calibration.md"), *map(str, images)]
    log.info("calibration report written to %s", out)
    return {"figures": figures, "markdown": markdown, "files": files}


def _query_events(events: pl.LazyFrame, world: World) -> pl.DataFrame:
    """One row per query event, joined with the world's description of its query."""
    per_event = (events.group_by("ts", "user_id", "market", "query_text")
                 .agg(ads=pl.col("impressed").sum(), clicks=pl.col("clicked").sum()).collect())
    described = world.queries.select(pl.col("text").alias("query_text"), "market", "kind", "brand", "location",
                                     "decile", "segment")
    return per_event.join(described, on=["query_text", "market"], how="left")


def _volume(events: pl.LazyFrame, qe: pl.DataFrame) -> dict[str, object]:
    totals = events.select(rows=pl.len(), impressions=pl.col("impressed").sum(),
                           clicks=pl.col("clicked").sum(), users=pl.col("user_id").n_unique(),
                           days=pl.col("ts").dt.date().n_unique()).collect().row(0, named=True)
    market = qe.group_by("market").len().sort("market")
    return {
        "rows": int(totals["rows"]), "query_events": len(qe), "impressions": int(totals["impressions"]),
        "clicks": int(totals["clicks"]), "users": int(totals["users"]), "days": int(totals["days"]),
        "ctr": _ratio(totals["clicks"], totals["impressions"]),
        "query_events_without_ads": _ratio((qe["ads"] == 0).sum(), len(qe)),
        "market_share": {m: _ratio(n, len(qe)) for m, n in market.iter_rows()},
        "unmatched_query_texts": int(qe["kind"].null_count()),
    }


def _query_frequency(qe: pl.DataFrame, series: dict[str, np.ndarray]) -> dict[str, object]:
    counts = qe.group_by("market", "query_text").len().sort("len", descending=True)["len"].to_numpy()
    series["query_counts"] = counts
    deciles = qe.group_by("decile").agg(events=pl.len(), queries=pl.struct("market", "query_text").n_unique())
    deciles = deciles.drop_nulls("decile").sort("decile")
    return {
        "distinct_queries": len(counts), "queries_seen_once": _ratio((counts == 1).sum(), len(counts)),
        "query_zipf_slope": _zipf_slope(counts),
        "top_1pct_query_traffic": _ratio(counts[: max(1, len(counts) // 100)].sum(), counts.sum()),
        "decile_traffic_share": {int(d): _ratio(e, len(qe)) for d, e, _ in deciles.iter_rows()},
        "decile_distinct_queries": {int(d): int(q) for d, _, q in deciles.iter_rows()},
    }


def _keyword_frequency(events: pl.LazyFrame, world: World, series: dict[str, np.ndarray]) -> dict[str, object]:
    cfg = world.config
    train_end = cfg.start + timedelta(days=cfg.train_days)
    per_kw = (events.filter(pl.col("impressed"))
              .group_by("item_id")
              .agg(impressions=pl.len(), clicks=pl.col("clicked").sum(),
                   train_clicks=(pl.col("clicked") & (pl.col("ts") < train_end)).sum())
              .collect())
    full = world.keywords.select(pl.col("keyword_id").alias("item_id")).join(per_kw, on="item_id", how="left")
    full = full.fill_null(0)
    clicks = np.sort(full["clicks"].to_numpy())[::-1]
    impressions = np.sort(full["impressions"].to_numpy())[::-1]
    series["keyword_clicks"], series["keyword_impressions"] = clicks, impressions
    return {
        "keywords": len(full), "keywords_never_shown": _ratio((impressions == 0).sum(), len(full)),
        "keywords_never_clicked": _ratio((clicks == 0).sum(), len(full)),
        "tail_keyword_share": _ratio((full["train_clicks"] < TAIL_CLICKS).sum(), len(full)),
        "keyword_click_zipf_slope": _zipf_slope(clicks[clicks > 0]),
        "top_1pct_keyword_clicks": _ratio(clicks[: max(1, len(clicks) // 100)].sum(), max(1, clicks.sum())),
    }


def _positions(events: pl.LazyFrame) -> dict[str, object]:
    by_pos = (events.filter(pl.col("impressed")).group_by("position")
              .agg(impressions=pl.len(), clicks=pl.col("clicked").sum()).sort("position").collect())
    return {
        "ctr_by_position": {int(p): _ratio(c, i) for p, i, c in by_pos.iter_rows()},
        "impressions_by_position": {int(p): int(i) for p, i, _ in by_pos.iter_rows()},
    }


def _query_mix(qe: pl.DataFrame) -> dict[str, object]:
    kinds = qe.group_by("kind").len().drop_nulls("kind").sort("kind")
    n = len(qe)
    return {
        "query_kind_share": {k: _ratio(c, n) for k, c in kinds.iter_rows()},
        "queries_with_brand": _ratio(qe["brand"].is_not_null().sum(), n),
        "queries_with_location": _ratio(qe["location"].is_not_null().sum(), n),
        "alias_vs_canonical": _ratio((qe["kind"] == "alias").sum(), max(1, (qe["kind"] == "canonical").sum())),
    }


def _sessions(qe: pl.DataFrame) -> dict[str, object]:
    """Sessions as ingestion derives them: per user, a new one after more than 30 minutes."""
    s = (qe.select("user_id", "ts", "query_text").sort("user_id", "ts")
         .with_columns(new=(pl.col("user_id") != pl.col("user_id").shift(1)).fill_null(True)
                       | ((pl.col("ts") - pl.col("ts").shift(1)) > SESSION_GAP).fill_null(True))
         .with_columns(session=pl.col("new").cum_sum()))
    lengths = s.group_by("session").agg(n=pl.len(), distinct=pl.col("query_text").n_unique())
    hist = lengths.group_by("n").len().sort("n")
    return {
        # the mean of an integer column: a float, or None when there are no rows
        "sessions": len(lengths), "mean_session_length": round(float(cast(float | None, lengths["n"].mean()) or 0.0),
                                                               4),
        "session_length_histogram": {int(k): int(v) for k, v in hist.iter_rows()},
        "multi_query_sessions": _ratio((lengths["n"] > 1).sum(), len(lengths)),
        "reformulating_sessions": _ratio((lengths["distinct"] > 1).sum(), len(lengths)),
    }


def _zipf_slope(counts: np.ndarray) -> float:
    """Slope of log(frequency) on log(rank) over the ranks with frequency >= 3 (the discrete floor bends it)."""
    c = np.sort(np.asarray(counts, dtype=np.float64))[::-1]
    c = c[c >= 3]
    if len(c) < 3:
        return float("nan")
    rank = np.arange(1, len(c) + 1)
    slope = np.polyfit(np.log(rank), np.log(c), 1)[0]
    return round(float(slope), 4)


def _ratio(a: SupportsFloat, b: SupportsFloat) -> float:
    return round(float(a) / float(b), 6) if b else 0.0


def _plots(figures: dict[str, object], series: dict[str, np.ndarray], out: Path) -> list[Path]:
    """Four PNGs; matplotlib's object API with the Agg canvas (no global backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    def save(fig: Figure, name: str) -> Path:
        FigureCanvasAgg(fig)
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=100, metadata={"Software": None})
        return path

    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for key, label in (("query_counts", "queries (events)"), ("keyword_impressions", "keywords (impressions)"),
                       ("keyword_clicks", "keywords (clicks)")):
        y = series[key][series[key] > 0]
        ax.loglog(np.arange(1, len(y) + 1), y, label=label)
    ax.set(xlabel="rank", ylabel="frequency", title="Frequency by rank (log-log)")
    ax.legend()
    images = [save(fig, "frequency.png")]

    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    ctr = figures["ctr_by_position"]
    assert isinstance(ctr, dict)
    ax.bar([str(p) for p in ctr], list(ctr.values()))
    ax.set(xlabel="position", ylabel="CTR", title="CTR by position")
    images.append(save(fig, "ctr_by_position.png"))

    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    hist = figures["session_length_histogram"]
    assert isinstance(hist, dict)
    ax.bar([str(k) for k in hist], list(hist.values()))
    ax.set(xlabel="queries per session", ylabel="sessions", title="Session length")
    images.append(save(fig, "session_length.png"))

    fig = Figure(figsize=(6, 3.5))
    ax = fig.add_subplot()
    kinds = figures["query_kind_share"]
    assert isinstance(kinds, dict)
    mix = dict(kinds)
    mix.update({"with brand": figures["queries_with_brand"], "with location": figures["queries_with_location"]})
    ax.barh(list(mix), list(mix.values()))
    ax.set(xlabel="share of query events", title="Query mix")
    images.append(save(fig, "query_mix.png"))
    return images


def _markdown(f: dict[str, object], world: World, images: list[Path]) -> str:
    cfg = world.config
    ctr = f["ctr_by_position"]
    assert isinstance(ctr, dict)
    lines = [
        f"# Simulator calibration ({cfg.scale}, seed {cfg.seed})", "",
        f"{f['rows']:,} event rows, {f['query_events']:,} query events, {f['clicks']:,} clicks over "
        f"{f['days']} days; CTR {f['ctr']:.3f}; {f['query_events_without_ads']:.1%} of query events showed no ad.",
        "", "| measure | value |", "|---|---|",
        f"| query rank-frequency slope (log-log) | {f['query_zipf_slope']} |",
        f"| distinct queries seen once | {f['queries_seen_once']:.1%} |",
        f"| keyword click rank-frequency slope | {f['keyword_click_zipf_slope']} |",
        f"| tail keywords (< {TAIL_CLICKS} training clicks) | {f['tail_keyword_share']:.1%} |",
        f"| keywords never shown | {f['keywords_never_shown']:.1%} |",
        f"| queries with a brand / a location | {f['queries_with_brand']:.1%} / {f['queries_with_location']:.1%} |",
        f"| alias : canonical query events | {f['alias_vs_canonical']:.3f} |",
        f"| mean session length (30-min gap) | {f['mean_session_length']} |",
        f"| sessions with a reformulation | {f['reformulating_sessions']:.1%} |",
        "", "CTR by position: " + ", ".join(f"{p}: {v:.3f}" for p, v in ctr.items()), "",
    ]
    lines += [f"![{p.stem}]({p.name})" for p in images]
    return "\n".join(lines) + "\n"
