"""RWR anchor expansion against events (issue #42, item 4): how its time and memory grow with the log, on one
machine, since it has no distributed implementation yet.

    .venv/bin/python benchmarks/bench_rwr_scaling.py [--events 1000000,10000000,100000000] [--budget-s 300]

For each size, in a subprocess of its own (so its peak memory is its own):

1. a simulated event store of that many events (``xc_core.simulate.bulk_store.bulk_event_store``: 30 days, Zipf
   users, queries and items, one shown item in three clicked, sessions already cut);
2. the train-window graph tables with duckdb (``build_graph_tables``, the default engine);
3. the XC data set over them (``build_events_dataset``, default settings: the last 7 days are test, 20 native
   co-session anchors per train query), which holds the co-session anchor set
   (``anchor_sets["cosession_queries"]``: train queries → their co-session queries);
4. xc's own RWR expansion of that set (``xc_core.graphs.rwr.expand_anchor_set`` with the default ``RWRConfig``:
   400 hops, restart 0.8, every visited anchor kept, 100,000 starts a chunk), as the anchor stage runs it.

Step 4 is the measurement: wall and CPU seconds (the walk is one numpy thread), the graph's nodes (train
documents + labels + anchors), undirected edges and starts, the edges before and after, and the step's own peak
resident memory (VmHWM reset before it; the data set already in memory counts) besides the whole child's. Steps
1–3 are timed too, as context. The 1-minute load average is recorded around each size: the 2 cores here are
shared with other jobs, so wall seconds are upper bounds and the CPU seconds the better per-core figure.

A size is not run when the previous size's measured end-to-end seconds, times the ratio of the event counts,
exceed ``--budget-s``, or its measured peak memory, scaled the same way, exceeds the memory available now; the
JSON then records the size under ``not_run`` with those measured inputs and the projection, labelled as such
(a projection is not a measurement).

JSON: benchmarks/results/rwr_scaling.json (sizes measured so far are kept: the grid is resumable).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from xc_core.measure import machine, peak_rss_mb, reset_peak_rss, rss_mb
from xc_core.provenance import checkout_stamp, write_result
from xc_core.simulate.bulk_store import DAYS, bulk_event_store

RESULT = Path(__file__).resolve().parent / "results" / "rwr_scaling.json"
ANCHOR_SET = "cosession_queries"


def available_mb() -> float:
    """MemAvailable of the machine now."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_size(home: Path, n_events: int, seed: int) -> dict[str, Any]:
    """In the child process: store → graph tables → data set → RWR expansion of the co-session anchor set."""
    import numpy as np

    from xc_core.datasets.events import EventsDatasetConfig, build_events_dataset, event_window
    from xc_core.datasets.graph_tables import build_graph_tables
    from xc_core.graphs.rwr import RWRConfig, anchor_graph, expand_anchor_set
    from xc_core.logs.store import EventStore

    started = time.perf_counter()
    store_info = bulk_event_store(home, n_events, seed)
    store, cfg = EventStore(home), EventsDatasetConfig(name="rwr-scaling")
    first, split, end = event_window(store, cfg)
    t = time.perf_counter()
    tables = build_graph_tables(store, home / "graphs", first, split, cfg.graph_config(), register=False)
    tables_s = time.perf_counter() - t
    t = time.perf_counter()
    dataset = build_events_dataset(store, home / "graphs", cfg)  # finds the tables above current
    dataset_s = time.perf_counter() - t
    native = dataset.anchor_sets[ANCHOR_SET]
    n_docs, n_labels = len(dataset.train_texts), dataset.n_labels
    graph = anchor_graph(native, n_docs, n_labels)
    rwr_cfg = RWRConfig()
    peak_before = peak_rss_mb()  # steps 1-3 (duckdb's tables, the data set)
    rss_before, peak_reset = rss_mb() or 0.0, reset_peak_rss()
    t, cpu = time.perf_counter(), cpu_seconds()
    expanded = expand_anchor_set(dataset, ANCHOR_SET, rwr_cfg)
    rwr_s, rwr_cpu = time.perf_counter() - t, cpu_seconds() - cpu
    rwr_peak = peak_rss_mb()
    starts = n_docs + n_labels
    return {
        "events": n_events, "window": {"first_event": first.isoformat(), "split": split.isoformat(),
                                       "end": end.isoformat()},
        "store": store_info,
        "graph_tables": {"seconds": round(tables_s, 2), "click_graph": tables.click_graph,
                         "cosession_queries": tables.cosession_queries, "coclick_items": tables.coclick_items},
        "dataset_seconds": round(dataset_s, 2),
        "rwr": {
            "anchor_set": ANCHOR_SET, "config": rwr_cfg.model_dump(),
            "train_documents": n_docs, "labels": n_labels, "anchors": len(native.texts),
            "nodes": int(graph.shape[0]), "edges": int(graph.nnz // 2), "starts": starts,
            "starts_with_edges": int(np.count_nonzero(np.diff(graph.indptr)[:starts])),
            "doc_edges_before": len(native.doc_edges), "doc_edges_after": len(expanded.doc_edges),
            "label_edges_before": len(native.label_edges), "label_edges_after": len(expanded.label_edges),
            "seconds": round(rwr_s, 2), "cpu_seconds": round(rwr_cpu, 2),
            "starts_per_s": round(starts / rwr_s), "starts_per_cpu_s": round(starts / max(rwr_cpu, 1e-9)),
            "rss_before_mb": round(rss_before), "peak_rss_mb": round(rwr_peak), "peak_rss_reset": peak_reset,
        },
        "end_to_end_seconds": round(time.perf_counter() - started, 1),
        "peak_rss_before_rwr_mb": round(peak_before),
        "child_peak_rss_mb": round(max(peak_before, rwr_peak)),
    }


def measure(home: Path, n_events: int, seed: int) -> dict[str, Any]:
    load_before, started = os.getloadavg()[0], time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", str(n_events), "--work", str(home),
                           "--seed", str(seed)], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()
        return {"events": n_events, "error": tail[-1] if tail else f"exit {done.returncode}",
                "wall_seconds": round(wall, 1)}
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out.update({"wall_seconds": round(wall, 1), "load_before": round(load_before, 2),
                "load_after": round(os.getloadavg()[0], 2)})
    return out


def skip_reason(n: int, previous: dict[str, Any] | None, budget_s: float) -> dict[str, Any] | None:
    """Why ``n`` events are not run, from the previous size's measured figures (None: run it)."""
    if previous is None or "wall_seconds" not in previous or "error" in previous:
        return None
    ratio = n / previous["events"]
    seconds, peak = previous["wall_seconds"] * ratio, previous["child_peak_rss_mb"] * ratio
    available = available_mb()
    if seconds <= budget_s and peak <= available:
        return None
    return {"events": n, "measured_from": str(previous["events"]),
            "measured_previous_wall_seconds": previous["wall_seconds"],
            "measured_previous_peak_rss_mb": previous["child_peak_rss_mb"],
            "memory_available_now_mb": round(available), "budget_seconds": budget_s,
            "projection_not_a_measurement": {"linear_in_events_wall_seconds": round(seconds),
                                             "linear_in_events_peak_rss_mb": round(peak)},
            "reason": ("projected end-to-end seconds exceed the budget" if seconds > budget_s else "")
                      + (" and " if seconds > budget_s and peak > available else "")
                      + ("projected peak memory exceeds the memory available" if peak > available else "")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", default="1000000,10000000,100000000", help="comma-separated, growing")
    parser.add_argument("--budget-s", type=float, default=300.0,
                        help="skip a size whose projected end-to-end seconds exceed this")
    parser.add_argument("--work", type=Path, default=Path("/tmp/xc-rwr-scaling"), help="where the stores go")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(run_size(args.work, args.child, args.seed)))
        return
    result = json.loads(RESULT.read_text()) if RESULT.exists() else {"sizes": {}, "not_run": {}}
    result.update({"machine": machine(), "code": checkout_stamp(), "days": DAYS, "cpu_count": os.cpu_count(),
                   "niceness": os.nice(0), "budget_seconds": args.budget_s})
    previous: dict[str, Any] | None = None
    for n in sorted(int(x) for x in args.events.split(",")):
        if (why := skip_reason(n, previous, args.budget_s)) is not None:
            result["not_run"][str(n)] = why
            result["sizes"].pop(str(n), None)
            print(json.dumps({n: why}), flush=True)
            break
        home = args.work / f"events-{n}"
        shutil.rmtree(home, ignore_errors=True)
        previous = measure(home, n, args.seed)
        shutil.rmtree(home, ignore_errors=True)
        result["sizes"][str(n)] = previous
        result["not_run"].pop(str(n), None)
        write_result(RESULT, json.dumps(result, indent=1) + "\n")
        print(json.dumps({n: {k: previous.get(k) for k in ("rwr", "wall_seconds", "child_peak_rss_mb", "error")}}),
              flush=True)
    write_result(RESULT, json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
