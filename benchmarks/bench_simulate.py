"""Simulator benchmark: generate the ``large`` world and its >= 10M event rows into a temp dir.

Reports events (canonical rows) per second, end to end (world build + save + all day files) and for
the event generation alone, and the peak RSS (ru_maxrss). Goals (issue): >= 500k events/s and
<= 2 GB peak RSS on 2 cores. Results go to stdout and benchmarks/results/bench_simulate.json.

    .venv/bin/python benchmarks/bench_simulate.py [--scale large] [--seed 0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from xc_core.measure import peak_rss_mb
from xc_core.provenance import write_result

RESULTS = Path(__file__).parent / "results" / "bench_simulate.json"
GOAL_EVENTS_PER_S = 500_000
GOAL_PEAK_RSS_MB = 2048




def run(scale: str, seed: int, out: Path) -> dict[str, Any]:
    from xc_core.simulate import World, scale_config
    from xc_core.simulate.events import write_days
    from xc_core.simulate.run import summarize

    started = time.perf_counter()
    world = World.build(scale_config(scale, seed=seed))
    world.save(out / "world")
    built = time.perf_counter()
    files, stats = write_days(world, out / "events")
    done = time.perf_counter()
    summary = summarize(world, stats, done - started, files, out / "world")
    total, generation = done - started, done - built
    return {
        "scale": scale, "seed": seed, "events": summary.events, "query_events": summary.query_events,
        "clicks": summary.clicks, "ctr": summary.ctr, "keywords": summary.keywords, "queries": summary.queries,
        "tail_keyword_share": summary.tail_keyword_share, "days": len(files),
        "bytes_on_disk": sum(p.stat().st_size for p in files),
        "seconds_world": round(built - started, 3), "seconds_events": round(generation, 3),
        "seconds_total": round(total, 3),
        "events_per_s": round(summary.events / total),
        "events_per_s_generation_only": round(summary.events / generation),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "goals": {"events_per_s": GOAL_EVENTS_PER_S, "peak_rss_mb": GOAL_PEAK_RSS_MB},
        "cpus": os.cpu_count(), "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="large")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="write here and keep the files (default: a temp dir)")
    parser.add_argument("--no-save", action="store_true", help="do not update benchmarks/results")
    args = parser.parse_args()
    if args.keep:
        result = run(args.scale, args.seed, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="xc-bench-sim-") as tmp:
            result = run(args.scale, args.seed, Path(tmp))
    result["meets_goals"] = (result["events_per_s"] >= GOAL_EVENTS_PER_S
                             and result["peak_rss_mb"] <= GOAL_PEAK_RSS_MB)
    print(json.dumps(result))
    if not args.no_save and args.scale == "large":
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        write_result(RESULTS, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
