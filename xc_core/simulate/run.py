"""One call from a scale name to a saved world and its day files, with the numbers that describe them."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from xc_core.paths import resolve_home
from xc_core.simulate.config import SimConfig, scale_config
from xc_core.simulate.events import EventStats, write_days
from xc_core.simulate.world import World

log = logging.getLogger(__name__)

#: A keyword with fewer training-period clicks than this is a tail keyword (the RAMEN/IRENE setting).
TAIL_CLICKS = 10


@dataclass
class SimulationSummary:
    """What a simulation produced; ``events`` counts rows of the canonical schema (one per shown ad)."""

    scale: str
    seed: int
    intents: int
    keywords: int
    queries: int  # distinct (market, query text) rows of the world
    events: int
    query_events: int
    sessions: int
    impressions: int
    clicks: int
    ctr: float  # clicks / impressions
    tail_keyword_share: float  # keywords with < TAIL_CLICKS clicks in the training period
    novel_keywords: int  # keywords starting inside the novel-keyword window (the last novel_days days)
    seconds: float
    world_dir: Path | None = None
    files: list[Path] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["world_dir"] = str(self.world_dir) if self.world_dir else None
        out["files"] = [str(p) for p in self.files]
        return out


def summarize(world: World, stats: EventStats, seconds: float, files: list[Path],
              world_dir: Path | None = None) -> SimulationSummary:
    """The summary of a world and the events written from it."""
    cfg = world.config
    train_clicks = stats.train_keyword_clicks if stats.train_keyword_clicks is not None else np.zeros(1)
    return SimulationSummary(
        scale=cfg.scale, seed=cfg.seed, intents=len(world.intents), keywords=len(world.keywords),
        queries=len(world.queries), events=stats.rows, query_events=stats.query_events, sessions=stats.sessions,
        impressions=stats.impressions, clicks=stats.clicks,
        ctr=round(stats.clicks / stats.impressions, 6) if stats.impressions else 0.0,
        tail_keyword_share=round(float(np.mean(train_clicks < TAIL_CLICKS)), 6),
        novel_keywords=int(np.sum(world.kw_start_day >= cfg.train_days)),
        seconds=round(seconds, 3), world_dir=world_dir, files=files,
    )


def simulate(scale: str | SimConfig = "demo", seed: int = 0, out_dir: str | Path | None = None) -> SimulationSummary:
    """Build the world of ``scale`` (or a full SimConfig), save it to out_dir/world, write out_dir/events.

    ``out_dir`` defaults to ``<xc home>/simulate/<scale>-seed<seed>``. Also writes out_dir/summary.json
    (without timings or paths, so it is as reproducible as the data).
    """
    started = time.perf_counter()
    cfg = scale if isinstance(scale, SimConfig) else scale_config(scale, seed=seed)
    out = Path(out_dir) if out_dir is not None else resolve_home() / "simulate" / f"{cfg.scale}-seed{cfg.seed}"
    world = World.build(cfg)
    world_dir = world.save(out / "world")
    files, stats = write_days(world, out / "events")
    summary = summarize(world, stats, time.perf_counter() - started, files, world_dir)
    record = {k: v for k, v in summary.to_json().items() if k not in ("seconds", "files", "world_dir")}
    (out / "summary.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", "utf-8")
    log.info("simulated %s: %d events, %d clicks in %.1f s", cfg.scale, summary.events, summary.clicks, summary.seconds)
    return summary
