"""The simulator as a pipeline stage: world → day files → the same ingestion path as real logs.

One simulated world per xc home: ``<home>/simulate/current.json`` names it (scale, seed, calendar),
and later stages (the ``synthetic`` data set, evaluation, A/B tests) read that world instead of
regenerating it. Simulating a different world into a home that already holds simulated events is
refused: the event store would mix two worlds.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from xc_core.logs.config import IngestConfig
from xc_core.logs.ingest import IngestSummary, Source, ingest
from xc_core.logs.store import EventStore
from xc_core.simulate.config import SimConfig, scale_config
from xc_core.simulate.events import day_file, write_days
from xc_core.simulate.run import summarize
from xc_core.simulate.world import World


def simulation_dir(home: Path, scale: str, seed: int) -> Path:
    return home / "simulate" / f"{scale}-seed{seed}"


def current_simulation(home: Path) -> dict[str, Any] | None:
    path = home / "simulate" / "current.json"
    return json.loads(path.read_text()) if path.exists() else None


def _claim(home: Path, cfg: SimConfig) -> None:
    """Record this world as the home's simulation, refusing to mix two worlds in one event store."""
    record = {"scale": cfg.scale, "seed": cfg.seed, "start": cfg.start.isoformat(), "days": cfg.days,
              "novel_days": cfg.novel_days, "markets": [m.name for m in cfg.markets],
              "dir": str(simulation_dir(home, cfg.scale, cfg.seed))}
    current = current_simulation(home)
    if current and (current["scale"], current["seed"]) != (cfg.scale, cfg.seed) and EventStore(home).days():
        raise ValueError(f"{home} already holds events of the simulated world "
                         f"{current['scale']}-seed{current['seed']}; "
                         f"use another --home for {cfg.scale}-seed{cfg.seed} (or `make clean`)")
    path = home / "simulate" / "current.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def build_world(scale: str, seed: int, home: Path) -> World:
    """Build (or load, when already saved) the world of (scale, seed) and make it the home's world."""
    cfg = scale_config(scale, seed=seed)
    _claim(home, cfg)
    folder = simulation_dir(home, scale, seed) / "world"
    if (folder / "world.json").exists():
        world = World.load(folder)
        if world.config == cfg:
            return world
    world = World.build(cfg)
    world.save(folder)
    return world


def load_current_world(home: Path) -> World:
    current = current_simulation(home)
    if current is None:
        raise FileNotFoundError(f"{home}: no simulated world — run `xc simulate --home {home}` first")
    return World.load(Path(current["dir"]) / "world")


def days_in_window(cfg: SimConfig, start: datetime | None, end: datetime | None) -> list[int]:
    """Simulated day indices whose date lies in [start, end) (all days when no window is given)."""
    days = []
    for d in range(cfg.days):
        day = cfg.day_date(d)
        if (start is None or day >= start.date()) and (end is None or day < end.date()):
            days.append(d)
    return days if days or start is None else []


def simulated_day_files(world: World, home: Path, days: list[int]) -> list[Path]:
    """Write (idempotently: same seed, same bytes) the day files of ``days``; return their paths."""
    out = simulation_dir(home, world.config.scale, world.config.seed) / "events"
    missing = [d for d in days if not day_file(out, world.config, d).exists()]
    if missing:
        write_days(world, out, missing)
    return [day_file(out, world.config, d) for d in days]


def simulate_into_store(scale: str, seed: int, home: Path, progress: bool = False,
                        cfg: IngestConfig | None = None) -> dict[str, Any]:
    """``xc simulate``: build the world, write every day, ingest them; one summary dict."""
    started = time.perf_counter()
    world = build_world(scale, seed, home)
    out = simulation_dir(home, scale, seed) / "events"
    files, stats = write_days(world, out)
    summary = summarize(world, stats, time.perf_counter() - started, files, simulation_dir(home, scale, seed) / "world")
    ingested: IngestSummary = ingest([Source("events", f) for f in files], home, cfg, progress=progress)
    record = summary.to_json()
    record.pop("files")
    return {**record, "ingest": {k: v for k, v in ingested.to_dict().items()
                                 if k in ("read", "accepted", "rejected", "reasons", "stored", "already_stored")},
            "seconds": round(time.perf_counter() - started, 3)}
