"""Simulated A/B test throughput: query events per second of ``run_abtest`` with cached candidates.

Builds the world of ``--scale`` (default ``demo``), serves ``--queries`` (100,000) test-period query events with
the simulator's BM25 policy (control) against the ground-truth oracle (treatment) — no trained model needed —
once to fill both arms' candidate caches (the cached query embeddings of a test), then times ``--repeats`` more
runs of the same test in paired and in split-user mode and reports the median query events per second (goal:
≥ 10,000/s on 2 cores). Baseline in the same run: the simulator's own logging of as many query events
(``simulate_day`` over the days in turn, its serving cache warmed by one pass first), and the ratio of the two.
Results are merged into benchmarks/results/bench_abtest.json under the scale's key.

    .venv/bin/python benchmarks/bench_abtest.py [--scale demo] [--seed 0] [--queries 100000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from xc_core.measure import peak_rss_mb
from xc_core.provenance import write_result
from xc_core.simulate import World

RESULTS_DIR = Path(__file__).resolve().parent / "results"

RESULTS = RESULTS_DIR / "bench_abtest.json"
GOAL_QUERIES_PER_S = 10_000


def _median_seconds(step: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    """Median wall seconds of ``repeats`` calls, each call's seconds, and the last call's value."""
    times, value = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        value = step()
        times.append(time.perf_counter() - started)
    return statistics.median(times), [round(t, 4) for t in times], value


def logging_baseline(world: World, queries: int, repeats: int) -> dict[str, Any]:
    """The simulator writing its logs (without the Parquet encoding): ``simulate_day`` day after day (wrapping
    round the period) until ``queries`` query events, after one warm-up pass over every day."""
    from xc_core.simulate.events import Sampler, simulate_day

    sampler = Sampler(world)
    days = world.config.days
    for day in range(days):  # fills the sampler's per-query candidate lists, as the A/B caches are filled
        simulate_day(sampler, day)

    def step() -> int:
        events, day = 0, 0
        while events < queries:
            _, stats = simulate_day(sampler, day % days)
            events += stats.query_events
            day += 1
        return events

    seconds, times, events = _median_seconds(step, repeats)
    return {"what": "simulate_day (sessions, serving, clicks, the day's DataFrame) over the days in turn",
            "query_events": events, "seconds_median": round(seconds, 4), "seconds": times,
            "queries_per_s": round(events / seconds)}


def measure(scale: str, seed: int, queries: int, repeats: int) -> dict[str, Any]:
    from xc_core.abtest import ABConfig, Bm25Arm, OracleArm, Simulation, run_abtest

    started = time.perf_counter()
    world = World.build(scale, seed=seed)
    built = time.perf_counter() - started
    sim = Simulation(world)
    control, treatment = Bm25Arm(), OracleArm()
    configs = {"paired": ABConfig(queries=queries, seed=seed, paired=True),
               "split": ABConfig(queries=queries, seed=seed, paired=False)}
    started = time.perf_counter()
    first = run_abtest(sim, control, treatment, configs["paired"])  # fills both arms' candidate caches
    first_seconds = time.perf_counter() - started
    k = configs["paired"].selection.candidates
    caches = {arm.name: sim.cache(arm, k) for arm in (control, treatment)}
    modes: dict[str, Any] = {}
    for mode, cfg in configs.items():
        seconds, times, last = _median_seconds(partial(run_abtest, sim, control, treatment, cfg), repeats)
        modes[mode] = {"queries": queries, "seconds_median": round(seconds, 4), "seconds": times,
                       "queries_per_s": round(queries / seconds),
                       "arm_queries": {arm: last["arms"][arm]["queries"] for arm in ("control", "treatment")},
                       "delta_pct": {m: last["delta_pct"][m] for m in ("ctr", "iy", "revenue", "brand_bmr")}}
    rows_cached = {name: int(cache.ready.sum()) for name, cache in caches.items()}
    assert all(cache.seconds > 0 for cache in caches.values()), "the first run filled the caches"
    baseline = logging_baseline(world, queries, repeats)
    slowest = min(m["queries_per_s"] for m in modes.values())
    return {
        "scale": scale, "seed": seed, "queries": queries, "repeats": repeats,
        "control": control.describe(), "treatment": treatment.describe(),
        "world": {"keywords": len(world.keywords), "queries": len(world.queries), "users": len(sim.user_ids),
                  "seconds_build": round(built, 3)},
        "first_run_seconds": round(first_seconds, 3),
        "cache_fill_seconds": {name: round(cache.seconds, 3) for name, cache in caches.items()},
        "cached_query_rows": rows_cached, "candidates_per_query": k,
        "first_run_delta_pct_ctr": first["delta_pct"]["ctr"],
        "paired": modes["paired"], "split": modes["split"],
        "baseline": baseline,
        "ratio_vs_logging": {mode: round(m["queries_per_s"] / baseline["queries_per_s"], 3)
                             for mode, m in modes.items()},
        "goal": {"queries_per_s": GOAL_QUERIES_PER_S, "on": "both modes, cached candidates"},
        "meets_goal": slowest >= GOAL_QUERIES_PER_S,
        "peak_rss_mb": round(peak_rss_mb(), 1), "cpus": os.cpu_count(), "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="demo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-save", action="store_true", help="do not update benchmarks/results")
    args = parser.parse_args()
    result = measure(args.scale, args.seed, args.queries, args.repeats)
    print(json.dumps(result, indent=2))
    if not args.no_save:
        merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        merged[args.scale] = result
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        write_result(RESULTS, json.dumps(merged, indent=2) + "\n")


if __name__ == "__main__":
    main()
