"""Graph benchmarks (issue 4).

(a) graph tables from 10M simulated events: seconds and peak RSS (goal ≤ 60 s, ≤ 4 GB);
(b) RWR on a 1M-node / 10M-edge node–anchor graph (goal ≤ 60 s on 2 cores), its speed against the
    straightforward per-node Python walker on a 10k-start sample (goal ≥ 20×), and its top-10
    agreement with exact personalised PageRank on a 128-start sample (goal ≥ 0.9).

    .venv/bin/python benchmarks/bench_graphs.py [--part rwr|tables|all] [--events 10000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from _common import peak_rss_mb  # noqa: E402 - benchmarks run as scripts from this folder

RESULTS = Path(__file__).parent / "results" / "bench_graphs.json"




def node_anchor_graph(n_nodes: int, n_edges: int, seed: int = 0) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Half the nodes are starts (documents/labels), half anchors with Zipf-like popularity."""
    rng = np.random.default_rng(seed)
    n_starts = n_nodes // 2
    n_anchors = n_nodes - n_starts
    draw = int(n_edges * 1.15)  # oversample, then keep n_edges distinct pairs
    starts = rng.integers(0, n_starts, draw)
    popularity = 1.0 / np.arange(1, n_anchors + 1) ** 0.6  # long-tailed anchor degrees, few duplicate pairs
    anchors = n_starts + rng.choice(n_anchors, size=draw, p=popularity / popularity.sum())
    pairs = np.unique(starts * n_nodes + anchors)[:n_edges]
    rng.shuffle(pairs)
    starts, anchors = pairs // n_nodes, pairs % n_nodes
    upper = sp.csr_matrix((np.ones(len(pairs), np.float32), (starts, anchors)), shape=(n_nodes, n_nodes))
    graph = (upper + upper.T).tocsr()
    graph.data[:] = 1.0
    return graph, np.arange(n_starts), np.arange(n_nodes) >= n_starts


def tie_aware_precision(walk, exact_all) -> float:  # type: ignore[no-untyped-def]
    """Share of the walk's top-k whose exact PPR is at least the exact k-th value (ties count as hits)."""
    exact: dict[int, dict[int, float]] = {}
    for s, n, v in zip(exact_all.start.tolist(), exact_all.node.tolist(), exact_all.score.tolist(), strict=True):
        exact.setdefault(s, {})[n] = v
    hits = []
    for s, nodes in walk.as_sets().items():
        values = sorted(exact.get(s, {}).values(), reverse=True)
        if not values:
            continue
        kth = values[min(len(nodes), len(values)) - 1]
        hits += [exact[s].get(n, 0.0) >= kth * (1 - 1e-6) for n in nodes]
    return float(np.mean(hits)) if hits else 0.0


def first_k(top, k: int):  # type: ignore[no-untyped-def]
    """The first k entries per start of a TopK (already sorted best first)."""
    from xc_core.graphs.rwr import TopK

    new_group = np.r_[True, top.start[1:] != top.start[:-1]]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(len(top.start)), 0))
    keep = (np.arange(len(top.start)) - group_start) < k
    return TopK(top.start[keep], top.node[keep], top.score[keep])


def bench_rwr(n_nodes: int, n_edges: int) -> dict[str, float]:
    from xc_core.graphs.rwr import RWRConfig, personalized_pagerank, python_walker, random_walk_with_restart, top_k_overlap

    graph, starts, anchors = node_anchor_graph(n_nodes, n_edges)
    cfg = RWRConfig()
    t = time.perf_counter()
    full = random_walk_with_restart(graph, starts, anchors, cfg)
    seconds = time.perf_counter() - t
    sample = np.random.default_rng(1).choice(starts, 10_000, replace=False)
    t = time.perf_counter()
    vec = random_walk_with_restart(graph, sample, anchors, cfg)
    vec_s = time.perf_counter() - t
    t = time.perf_counter()
    python_walker(graph, sample, anchors, cfg)
    py_s = time.perf_counter() - t
    check = sample[:128]
    walk = random_walk_with_restart(graph, check, anchors, cfg)
    exact_all = personalized_pagerank(graph, check, anchors, restart=cfg.restart, top_k=200)
    exact = first_k(exact_all, cfg.top_k)
    return {"nodes": n_nodes, "edges": int(graph.nnz // 2), "starts": len(starts), "rwr_seconds": round(seconds, 2),
            "anchors_kept": int(len(full.node)), "sample_vectorised_seconds": round(vec_s, 3),
            "sample_python_seconds": round(py_s, 2), "speedup_vs_python": round(py_s / vec_s, 1),
            "top10_overlap_vs_exact_ppr": round(top_k_overlap(walk, exact), 3),
            "top10_tie_aware_precision_vs_exact_ppr": round(tie_aware_precision(walk, exact_all), 3),
            "peak_rss_mb": round(peak_rss_mb(), 1)}


def bench_tables(events: int, tmp: Path) -> dict[str, float]:
    from datetime import UTC, datetime

    from xc_core.graphs.tables import build_graph_tables
    from xc_core.logs.store import EventStore
    from xc_core.simulate import simulate

    home = tmp / "home"
    t = time.perf_counter()
    summary = simulate("large", seed=0, out_dir=tmp / "sim")  # ≈ 11M rows over 92 days
    sim_s = time.perf_counter() - t
    from xc_core.logs.ingest import Source, ingest

    ingest([Source("events", p) for p in summary.files], home, progress=False)
    store = EventStore(home)
    days = store.days()
    t = time.perf_counter()
    out = build_graph_tables(store, home / "graphs", datetime.combine(days[0], datetime.min.time(), tzinfo=UTC),
                             datetime.combine(days[-1], datetime.min.time(), tzinfo=UTC))
    seconds = time.perf_counter() - t
    return {"events": summary.events, "simulate_seconds": round(sim_s, 1), "tables_seconds": round(seconds, 2),
            **{k: v for k, v in out.to_dict().items() if k in ("click_graph", "cosession_queries", "coclick_items")},
            "peak_rss_mb": round(peak_rss_mb(), 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=["rwr", "tables", "all"], default="all")
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=10_000_000)
    parser.add_argument("--events", type=int, default=10_000_000, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # each part in its own process so its peak RSS is its own
        with tempfile.TemporaryDirectory() as tmp:
            out = bench_rwr(args.nodes, args.edges) if args.part == "rwr" else bench_tables(args.events, Path(tmp))
        print(json.dumps(out))
        return
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for part in (["rwr", "tables"] if args.part == "all" else [args.part]):
        done = subprocess.run([sys.executable, __file__, "--child", "--part", part, "--nodes", str(args.nodes),
                               "--edges", str(args.edges), "--events", str(args.events)],
                              capture_output=True, text=True, check=True)
        results[part] = json.loads(done.stdout.strip().splitlines()[-1])
        print(part, results[part], flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
