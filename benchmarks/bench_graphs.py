"""Graph benchmarks (issue 4).

(a) graph tables from 10M simulated events: seconds and peak RSS (goal ≤ 60 s, ≤ 4 GB);
(b) RWR on a 1M-node / 10M-edge node–anchor graph with the default config (every visited anchor kept;
    goal ≤ 60 s on 2 cores), its speed against the straightforward per-node Python walker on a 10k-start
    sample (goal ≥ 20×), and on a 128-start sample: the top-10 agreement of a ``top_k=10`` walk with exact
    personalised PageRank (goal ≥ 0.9), and the recall of exact PPR's top 10 by the default walk's anchor set,
    alone and joined with the start's own anchors as ``expand_anchor_set`` builds it;
(c) ``--part prune`` (not in ``all``: needs the wikispeedia files and the MiniLM weights): on wikispeedia's
    ``links``, anchors per train document natively, after the old top-10 walk and after RWR as configured
    now, and how the pruning rule (cosine > 0) treats link edges, random (document, anchor) pairs, true
    (document, label) pairs and random (document, label) pairs, raw and mean-centred, with MiniLM-L6 and
    MiniLM cut to 3 layers.

    .venv/bin/python benchmarks/bench_graphs.py [--part rwr|tables|prune|all] [--events 10000000]
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

from xc_core.measure import peak_rss_mb
from xc_core.provenance import write_result

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


def tie_aware_precision(walk, exact_all) -> float:
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


def first_k(top, k: int):
    """The first k entries per start of a TopK (already sorted best first)."""
    from xc_core.graphs.rwr import TopK

    new_group = np.r_[True, top.start[1:] != top.start[:-1]]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(len(top.start)), 0))
    keep = (np.arange(len(top.start)) - group_start) < k
    return TopK(top.start[keep], top.node[keep], top.score[keep])


def recall_of(exact, walk, graph: sp.csr_matrix | None = None) -> float:
    """Mean over starts of the share of ``exact``'s anchors that ``walk`` has (plus the start's own
    neighbours in ``graph`` when given; ``start`` indexes ``check`` positionally in both)."""
    got = walk.as_sets()
    shares = []
    for s, nodes in exact.as_sets().items():
        have = set(got.get(s, []))
        if graph is not None:
            have |= set(graph.indices[graph.indptr[s]: graph.indptr[s + 1]].tolist())
        shares.append(len(set(nodes) & have) / len(nodes))
    return float(np.mean(shares)) if shares else 0.0


def bench_rwr(n_nodes: int, n_edges: int) -> dict[str, float | None]:
    from xc_core.graphs.rwr import (
        RWRConfig,
        personalized_pagerank,
        python_walker,
        random_walk_with_restart,
        top_k_overlap,
    )

    graph, starts, anchors = node_anchor_graph(n_nodes, n_edges)
    cfg = RWRConfig()
    t = time.perf_counter()
    full = random_walk_with_restart(graph, starts, anchors, cfg)
    seconds = time.perf_counter() - t
    sample = np.random.default_rng(1).choice(starts, 10_000, replace=False)
    t = time.perf_counter()
    random_walk_with_restart(graph, sample, anchors, cfg)
    vec_s = time.perf_counter() - t
    t = time.perf_counter()
    python_walker(graph, sample, anchors, cfg)
    py_s = time.perf_counter() - t
    check = sample[:128]
    walk10 = random_walk_with_restart(graph, check, anchors, cfg.model_copy(update={"top_k": 10}))
    walk_all = random_walk_with_restart(graph, check, anchors, cfg)
    exact_all = personalized_pagerank(graph, check, anchors, restart=cfg.restart, top_k=200)
    exact = first_k(exact_all, 10)
    own = graph[check]  # the sample's rows, so row j is start j as in the TopKs
    degree = np.diff(graph.indptr)[starts]
    return {"nodes": n_nodes, "edges": int(graph.nnz // 2), "starts": len(starts), "top_k": cfg.top_k,
            "rwr_seconds": round(seconds, 2), "anchors_kept": int(len(full.node)),
            "anchors_per_start": round(len(full.node) / len(starts), 2),
            "native_anchors_per_start": round(float(degree.mean()), 2),
            "sample_vectorised_seconds": round(vec_s, 3),
            "sample_python_seconds": round(py_s, 2), "speedup_vs_python": round(py_s / vec_s, 1),
            "top10_overlap_vs_exact_ppr": round(top_k_overlap(walk10, exact), 3),
            "top10_tie_aware_precision_vs_exact_ppr": round(tie_aware_precision(walk10, exact_all), 3),
            "exact_ppr_top10_recall_by_walk": round(recall_of(exact, walk_all), 3),
            "exact_ppr_top10_recall_by_walk_and_native": round(recall_of(exact, walk_all, own), 3),
            "peak_rss_mb": round(peak_rss_mb(), 1)}


def bench_prune() -> dict[str, dict[str, float]]:
    from xc_core.datasets.wikispeedia import build_wikispeedia
    from xc_core.encoders import EncoderConfig, TextEncoder
    from xc_core.graphs.pruning import embedding_center, pair_cosine, prune_pass_rates
    from xc_core.graphs.rwr import RWRConfig, anchor_graph, expand_anchor_set, random_walk_with_restart
    from xc_core.paths import shared_data_dir

    data = build_wikispeedia(shared_data_dir() / "wikispeedia", seed=0)
    links, n_docs, n_labels = data.anchor_sets["links"], len(data.train_texts), data.n_labels
    graph = anchor_graph(links, n_docs, n_labels)
    old = random_walk_with_restart(graph, np.arange(n_docs), np.arange(graph.shape[0]) >= n_docs + n_labels,
                                   RWRConfig(top_k=10))  # the walk alone, as expand_anchor_set did before
    native = set(map(tuple, links.doc_edges.tolist()))
    old_edges = set(zip(old.start.tolist(), (old.node - n_docs - n_labels).tolist(), strict=True))
    out: dict[str, dict[str, float]] = {"rwr_links_per_doc": {
        "native": round(len(native) / n_docs, 2), "old_top10_walk": round(len(old_edges) / n_docs, 2),
        "old_top10_walk_native_kept": round(len(native & old_edges) / n_docs, 2),
        "now": round(len(expand_anchor_set(data, "links", RWRConfig()).doc_edges) / n_docs, 2)}}
    rng = np.random.default_rng(0)
    docs, anchors = rng.integers(0, n_docs, 20_000), rng.integers(0, len(links.texts), 20_000)
    edges = links.doc_edges
    for tag, layers in (("minilm_l6", None), ("minilm_l3", 3)):
        encoder = TextEncoder(EncoderConfig(n_layers=layers))
        doc_emb, label_emb = encoder.encode(data.train_texts), encoder.encode(data.label_texts)
        anchor_emb = encoder.encode(links.texts)
        raw_edge = pair_cosine(doc_emb, anchor_emb, edges[:, 0], edges[:, 1])
        raw_random = pair_cosine(doc_emb, anchor_emb, docs, anchors)
        center = embedding_center(doc_emb, label_emb, anchor_emb)
        row = {"raw_link_cosine_p5": round(float(np.percentile(raw_edge, 5)), 3),
               "raw_random_doc_anchor_cosine_median": round(float(np.median(raw_random)), 3)}
        for mode, c in (("raw", None), ("centred", center)):
            row[f"{mode}_link_edges_kept"] = round(float(np.mean(
                pair_cosine(doc_emb, anchor_emb, edges[:, 0], edges[:, 1], c) > 0)), 3)
            row[f"{mode}_random_doc_anchor_kept"] = round(float(np.mean(
                pair_cosine(doc_emb, anchor_emb, docs, anchors, c) > 0)), 3)
            rates = prune_pass_rates(doc_emb, label_emb, data.y_train, 0.0, c, np.random.default_rng(0),
                                     doc_rows=np.arange(n_docs))
            row[f"{mode}_true_doc_label_kept"] = round(rates["positive_kept_share"], 3)
            row[f"{mode}_random_doc_label_kept"] = round(rates["random_kept_share"], 3)
        out[tag] = row
    return out


def bench_tables(events: int, tmp: Path) -> dict[str, object]:
    from datetime import UTC, datetime

    from xc_core.datasets.graph_tables import build_graph_tables
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
    parser.add_argument("--part", choices=["rwr", "tables", "prune", "all"], default="all")
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=10_000_000)
    parser.add_argument("--events", type=int, default=10_000_000, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # each part in its own process so its peak RSS is its own
        with tempfile.TemporaryDirectory() as tmp:
            out = (bench_rwr(args.nodes, args.edges) if args.part == "rwr" else bench_prune() if args.part == "prune"
                   else bench_tables(args.events, Path(tmp)))
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
    write_result(RESULTS, json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
