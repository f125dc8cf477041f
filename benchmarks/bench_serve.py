"""Latency under load of ``xc serve`` (issue #30, item 4), with an ONNX Runtime check of the query encoder.

    .venv/bin/python benchmarks/bench_serve.py --home ~/.xc --dataset aol-1000 \
        [--methods pretrained,pretrained-clf,champion] [--seconds 10] [--no-onnx]

For each target — a method's newest registry version of ``xc-encoder-<dataset>``, or ``champion`` (the version
the alias names) — the bench starts ``xc serve --version N`` as a subprocess on a free 127.0.0.1 port, waits for
``GET /ready``, drives ``POST /predict`` from client threads (each with its own keep-alive connection) and stops
the server by its PID. Phases, each after a short unrecorded warm-up and bounded by a request count and by
seconds: one query per request at 1, 4 and 16 clients, and 32 queries per request at 1 and 4 clients. Every
request is timed; any non-200 answer, a connection failure or a body that is not the pinned version's answer is
an error, counted and reported (never dropped). Latency percentiles are over the 200 answers.

Goals (issue #30): p99 ≤ 25 ms for one query at 4 clients with a ``-clf`` method; ≥ 300 queries/s batched.
Anchor, measured in the same run: ``xc predict "<query>"`` cold (a fresh process loads the champion and answers
one query), the way a query was answered before the service.

ONNX check: where the encoder's forward pass dominates a request, an ONNX Runtime export of the encoder is worth
adopting only if it is faster *and* ranks the same. The bench measures the forward pass's share of an in-process
search, exports the served model's encoder (mean pooling and L2 norm inside the graph), times torch and ONNX
Runtime (its defaults, and with its workers not spinning after a run) on single queries and 32-query batches —
the encoder alone and the whole in-process search — and compares the top-10 labels of test queries searched
through the same serving path with either engine's vectors. It reports; it changes nothing in xc_core.

One JSON per data set: benchmarks/results/serve_<dataset>.json (overwritten); a markdown table on stdout. The
clients are Python threads on the same cores as the server; each phase records the CPU it used, split into the
server, the clients and everything else (a phase that shared the cores with someone else shows it there).
To measure a commit while the checkout has uncommitted edits, point PYTHONPATH at a clean worktree of it (the
``xc serve`` subprocesses inherit it; the JSON names the commit and the folder xc_core came from).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.measure import machine, wait_for_quiet
from xc_core.provenance import checkout_stamp, write_result
from xc_core.serving.load import Phase, ServeProcess, bodies, registry_targets, run_phase

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
GOAL_P99_MS = 25.0  # one query, 4 clients, a -clf method
GOAL_BATCHED_QPS = 300.0
GOAL_CLIENTS = 4


# -- the anchor: one cold `xc predict` ------------------------------------------------------------------------


def anchor(home: Path, dataset: str, queries: list[str], k: int) -> dict[str, Any]:
    xc = str(Path(sys.executable).with_name("xc"))
    runs: list[dict[str, Any]] = []
    for query in queries:
        started = time.perf_counter()
        done = subprocess.run([xc, "predict", query, "--dataset", dataset, "--home", str(home), "--k", str(k),
                               "--quiet"], cwd=REPO, capture_output=True, text=True)
        runs.append({"query": query, "seconds": round(time.perf_counter() - started, 2), "exit_code": done.returncode,
                     **({"stderr_tail": done.stderr.strip()[-300:]} if done.returncode else {})})
    ok: list[float] = [r["seconds"] for r in runs if r["exit_code"] == 0]
    return {"command": f'xc predict "<query>" --dataset {dataset} --home H --k {k} --quiet', "runs": runs,
            "median_seconds": statistics.median(ok) if ok else None}


# -- ONNX Runtime against torch -------------------------------------------------------------------------------


def _median_ms(fn: Any, inputs: list[Any]) -> float:
    times = []
    for x in inputs:
        started = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - started)
    return round(1000 * statistics.median(times), 3)


def _engine_blocks(fns: dict[str, Any], inputs: list[Any]) -> dict[str, float]:
    """Median ms per call of each function, one function at a time over all inputs, with a pause between.

    Not interleaved: after each run ONNX Runtime's and torch's worker threads spin for a while, waiting for the
    next one, so a torch call right after an ONNX call shares the cores with spinning threads (measured: torch
    looked ~2× slower that way). A server runs one engine; so does each block here."""
    out = {}
    for name, fn in fns.items():
        time.sleep(0.5)  # the previous engine's threads go to sleep
        for x in inputs[:3]:
            fn(x)
        out[name] = _median_ms(fn, inputs)
    return out


def _interleaved(fns: dict[str, Any], inputs: list[Any]) -> dict[str, float]:
    """Median ms per call of each function, called in turn on each input (so drifts in machine load hit all);
    for steps of one engine only (see :func:`_engine_blocks`)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for x in inputs:
        for name, fn in fns.items():
            started = time.perf_counter()
            fn(x)
            times[name].append(time.perf_counter() - started)
    return {name: round(1000 * statistics.median(t), 3) for name, t in times.items()}


def export_onnx(encoder: Any, path: Path) -> str:
    """The encoder plus xc's own pooling as one ONNX graph — the export registration uses
    (``xc_core.encoders.onnx_runtime.export``); returns which exporter wrote it."""
    from xc_core.encoders.onnx_runtime import export

    return export(encoder, path)


class OnnxEmbedder:
    """Stands in for the served model's pyfunc (``predict(texts) -> vectors``): the same tokenizer, the ONNX
    graph instead of torch — so ``ServedModel.search`` runs its own serving path on ONNX vectors."""

    def __init__(self, encoder: Any, path: Path, threads: int, spinning: bool = True) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        if not spinning:  # ORT's workers busy-wait after a run by default, on the cores the index search needs next
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.encoder = encoder
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def predict(self, texts: list[str]) -> np.ndarray:
        batch = self.encoder.tokenize(list(texts))
        feeds = {name: tensor.cpu().numpy() for name, tensor in batch.items()}
        return self.session.run(None, feeds)[0]


def onnx_check(home: Path, dataset: str, target: dict[str, str], pool: list[str], args: argparse.Namespace
               ) -> dict[str, Any]:
    # torch before faiss (xc_core.index), the order xc serve imports them in: with faiss first, the -clf search
    # measured 14.4 instead of 8.0 ms per single query in-process on aol-1000 (the fused stage, not the encoder)
    import onnxruntime as ort
    import torch

    from xc_core.serving import with_home_index
    from xc_core.tracking.registry import model_name
    from xc_core.tracking.served import load_registered
    from xc_core.tracking.store import activate, tracking_uri

    activate(tracking_uri(home))
    served = load_registered(f"models:/{model_name(dataset)}/{target['version']}")
    if served is None:
        return {"skipped": f"v{target['version']} is not a served model"}
    served = with_home_index(served, home)  # what xc serve answers with
    encoder = served.embedder.unwrap_python_model().encoder
    rng = np.random.default_rng([args.seed, 99])
    singles = [[pool[i]] for i in rng.integers(0, len(pool), args.onnx_time_queries)]
    batches = [[pool[i] for i in row] for row in rng.integers(0, len(pool), (args.onnx_time_batches, args.batch))]
    k = args.k
    for _ in range(3):  # lazy setup (thread pools, faiss) outside the clock, as xc serve's warm-up does
        served.search(singles[0], k)
        served.search(batches[0], k)

    # (a) where a request's in-process time goes. Tokenising is timed on its own, then every text is tokenised
    # once so that the encoder's cache does not favour whichever step runs second.
    def tokenize(texts: list[str]) -> object:
        return encoder.tokenizer(texts, truncation=True, max_length=encoder.cfg.max_length)

    tokenize_ms = {"single": _median_ms(tokenize, singles), "batch": _median_ms(tokenize, batches)}
    encoder.tokenize([t for b in singles + batches for t in b])
    share = {}
    for name, inputs in (("single", singles), ("batch", batches)):
        # TextEncoder.encode is the forward pass (+ padding the cached token ids); ServedModel.embed adds the MLflow
        # pyfunc's input handling; ServedModel.search adds the index (and the fused classifier stage)
        ms = _interleaved({"text_encoder_encode": encoder.encode, "served_embed": served.embed,
                           "served_search": lambda x: served.search(x, k)}, inputs)
        share[name] = {**{f"{key}_ms": value for key, value in ms.items()}, "tokenize_ms": tokenize_ms[name],
                       "forward_share_of_search": round(ms["text_encoder_encode"] / ms["served_search"], 3),
                       "embed_share_of_search": round(ms["served_embed"] / ms["served_search"], 3)}

    # (b) the export, timed against torch on the same inputs, single queries and batches
    with tempfile.TemporaryDirectory(prefix="bench-serve-onnx-") as tmp:
        path = Path(tmp) / "encoder.onnx"
        started = time.perf_counter()
        exporter = export_onnx(encoder, path)
        export_seconds = round(time.perf_counter() - started, 1)
        # two ONNX Runtime set-ups: its defaults, and its workers not spinning after a run. The encoder alone
        # favours spinning; a request also searches the index right after, on the same two cores
        engines = {"onnx": OnnxEmbedder(encoder, path, args.onnx_threads),
                   "onnx_nospin": OnnxEmbedder(encoder, path, args.onnx_threads, spinning=False)}
        searches = {name: replace(served, embedder=engine) for name, engine in engines.items()}
        speed: dict[str, dict[str, Any]] = {}
        for size, inputs in (("single", singles), ("batch", batches)):
            steps: dict[str, Any] = {"torch_encode": encoder.encode, "torch_search": lambda x: served.search(x, k)}
            for name in engines:
                steps[f"{name}_encode"] = engines[name].predict
                steps[f"{name}_search"] = lambda x, name=name: searches[name].search(x, k)
            ms = _engine_blocks(steps, inputs)
            speed[size] = {f"{step}_ms": value for step, value in ms.items()}
            for name in engines:
                for step in ("encode", "search"):
                    speed[size][f"{name}_{step}_over_torch"] = round(ms[f"{name}_{step}"] / ms[f"torch_{step}"], 3)
        # faster: the encoder and the whole in-process search, single queries and batches, by the margin
        faster = {name: all(speed[size][f"{name}_{step}_over_torch"] <= 1 - args.onnx_min_gain
                            for size in speed for step in ("encode", "search")) for name in engines}
        best = min(engines, key=lambda name: speed["single"][f"{name}_search_ms"])
        onnx, onnx_served = engines[best], searches[best]

        # (c) the rankings: the same serving path (index, classifier fusion, lexical channel) on both engines'
        # vectors, in request-sized batches
        texts = [pool[i] for i in rng.choice(len(pool), min(args.onnx_rank_queries, len(pool)), replace=False)]
        same_order = same_set = 0
        overlaps, max_diff = [], 0.0
        for s in range(0, len(texts), args.batch):
            chunk = texts[s: s + args.batch]
            max_diff = max(max_diff, float(np.abs(served.embed(chunk) - onnx.predict(chunk)).max()))
            _, ids_torch = served.search(chunk, k)
            _, ids_onnx = onnx_served.search(chunk, k)
            for a, b in zip(ids_torch.tolist(), ids_onnx.tolist(), strict=True):
                a, b = [i for i in a if i >= 0], [i for i in b if i >= 0]
                same_order += a == b
                same_set += set(a) == set(b)
                overlaps.append(len(set(a) & set(b)) / max(len(a), 1))
    n = len(texts)
    rankings = {"queries": n, "k": k, "identical_top_k_order": round(same_order / n, 4),
                "identical_top_k_set": round(same_set / n, 4), "mean_overlap": round(float(np.mean(overlaps)), 4),
                "max_abs_vector_difference": float(f"{max_diff:.3g}")}
    same = rankings["identical_top_k_set"] >= args.onnx_min_same
    dominates = share["single"]["forward_share_of_search"] >= 0.5
    return {
        "target": target, "encoder": Path(encoder.path).name, "max_length": encoder.cfg.max_length,
        "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "onnxruntime": ort.__version__,
        "onnx_threads": args.onnx_threads, "exporter": exporter, "export_seconds": export_seconds,
        "timed_queries": len(singles), "timed_batches": len(batches), "batch": args.batch,
        "time_split": share, "speed": speed, "faster": faster, "best_onnx_setup": best, "rankings": rankings,
        "rule": (f"adopt only if the forward pass dominates (≥ 50% of a single-query search), ONNX (its best set-up) "
                 f"is at least {args.onnx_min_gain:.0%} faster than torch in encoding and in the whole in-process "
                 f"search, on single queries and on {args.batch}-query batches, and the top-{k} label set is identical "
                 f"for ≥ {args.onnx_min_same:.0%} of queries (rankings: the best set-up's vectors)"),
        "forward_dominates": dominates, "same_rankings": same, "adopt": dominates and faster[best] and same,
    }


def single_x1(phases: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The phase of one client sending one query at a time: the latency a lone request sees."""
    return next((p for p in phases if p["clients"] == 1 and p["queries_per_request"] == 1), None)


# -- the report -----------------------------------------------------------------------------------------------


def goals(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's two goals per target (the p99 one applies to the -clf methods only)."""
    out: dict[str, Any] = {"p99_single_query_4_clients_clf": {"goal_ms": GOAL_P99_MS, "targets": {}},
                           "batched_queries_per_s": {"goal": GOAL_BATCHED_QPS, "targets": {}}}
    for m in measured:
        if "same_as" in m:
            continue
        key = f"{m['target']} (v{m['version']})"
        phases = {p["phase"]: p for p in m["phases"]}
        single = phases.get(f"single x{GOAL_CLIENTS}")
        if m["method"].endswith("-clf") and single:
            ok = single["p99_ms"] <= GOAL_P99_MS and single["errors"] == 0
            out["p99_single_query_4_clients_clf"]["targets"][key] = {"p99_ms": single["p99_ms"],
                                                                      "errors": single["errors"], "pass": ok}
        batched = [p for p in m["phases"] if p["queries_per_request"] > 1]
        if batched:
            best = max(batched, key=lambda p: p["queries_per_s"])
            ok = best["queries_per_s"] >= GOAL_BATCHED_QPS and best["errors"] == 0
            out["batched_queries_per_s"]["targets"][key] = {"queries_per_s": best["queries_per_s"],
                                                            "phase": best["phase"], "errors": best["errors"],
                                                            "pass": ok}
    for goal in out.values():  # None: no phase measured it (other --clients, no -clf target)
        goal["pass"] = all(t["pass"] for t in goal["targets"].values()) if goal["targets"] else None
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [f"**{result['dataset']}** ({result['labels']:,} labels) — {result['machine']['cpu']}, "
             f"{result['machine']['cores']} cores, commit {result['git']['commit']}",
             "",
             "| target | v | phase | requests | errors | p50 ms | p95 ms | p99 ms | req/s | queries/s | q/model call |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in result["targets"]:
        if "same_as" in m:
            continue
        name = m["target"] if m["target"] == m["method"] else f"{m['target']} ({m['method']})"
        name += "".join(f" = {also}" for also in m.get("also", []))
        for p in m["phases"]:
            lines.append(f"| {name} | {m['version']} | {p['phase']} | {p['requests']} | {p['errors']} | "
                         f"{p['p50_ms']} | {p['p95_ms']} | {p['p99_ms']} | {p['requests_per_s']} | "
                         f"{p['queries_per_s']} | {p['queries_per_model_call']} |")
    lines.append("")
    for name, goal in result["goals"].items():
        detail = "; ".join(f"{t}: {v.get('p99_ms', v.get('queries_per_s'))} → {'pass' if v['pass'] else 'FAIL'}"
                           for t, v in goal["targets"].items())
        lines.append(f"- goal {name} ({goal.get('goal_ms', goal.get('goal'))}): "
                     f"{ {True: 'PASS', False: 'FAIL', None: 'not measured'}[goal['pass']]} — {detail}")
    a = result["anchor"]
    lines.append(f"- anchor: cold `xc predict` median {a['median_seconds']} s "
                 f"({', '.join(str(r['seconds']) for r in a['runs'])})"
                 + (f", {a['cold_over_served_p50']:,}× the served p50 at 1 client" if "cold_over_served_p50" in a
                    else ""))
    o = result.get("onnx") or {}
    if "speed" in o:
        r, split = o["rankings"], o["time_split"]
        lines.append(f"- ONNX ({o['target']['target']} v{o['target']['version']}): encoder forward "
                     f"{split['single']['forward_share_of_search']:.0%} of a single-query in-process search, "
                     f"{split['single'].get('forward_share_of_http_p50', float('nan')):.0%} of the HTTP p50; "
                     f"identical top-{r['k']} set {r['identical_top_k_set']:.1%} "
                     f"(order {r['identical_top_k_order']:.1%}) of {r['queries']}, "
                     f"max |Δv| {r['max_abs_vector_difference']} → adopt: {o['adopt']}")
        lines += ["", "| ms (in-process) | torch | ONNX | ONNX, no spinning |", "|---|---:|---:|---:|"]
        for size, label in (("single", "1 query"), ("batch", f"{o['batch']} queries")):
            sp = o["speed"][size]
            for step in ("encode", "search"):
                lines.append(f"| {label}: {step} | {sp[f'torch_{step}_ms']} | {sp[f'onnx_{step}_ms']} | "
                             f"{sp[f'onnx_nospin_{step}_ms']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--methods", default="pretrained,pretrained-clf,champion",
                        help="targets: methods (their newest registry version) and/or 'champion'")
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase stops after this long …")
    parser.add_argument("--requests", type=int, default=5000, help="… or this many single-query requests")
    parser.add_argument("--batch-requests", type=int, default=500, help="… or this many batch requests")
    parser.add_argument("--clients", default="1,4,16", help="concurrent clients sending one query per request")
    parser.add_argument("--batch-clients", default="1,4", help="concurrent clients sending --batch queries")
    parser.add_argument("--batch", type=int, default=32, help="queries per batch request")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5, help="unrecorded requests per client before each phase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-chars", type=int, default=512, help="leave longer test texts out (xc serve's limit)")
    parser.add_argument("--ready-timeout", type=float, default=300.0, help="seconds to wait for GET /ready")
    parser.add_argument("--anchor-runs", type=int, default=3)
    parser.add_argument("--max-load", type=float, default=1.5, help="wait until the 1-minute load average is below")
    parser.add_argument("--wait-minutes", type=float, default=10.0, help="… for at most this long")
    parser.add_argument("--no-onnx", action="store_true", help="skip the ONNX Runtime check")
    parser.add_argument("--onnx-target", default="champion", help="which target's encoder to export")
    parser.add_argument("--onnx-threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    parser.add_argument("--onnx-time-queries", type=int, default=200)
    parser.add_argument("--onnx-time-batches", type=int, default=30)
    parser.add_argument("--onnx-rank-queries", type=int, default=1000)
    parser.add_argument("--onnx-min-gain", type=float, default=0.05, help="'faster' means at least this share less")
    parser.add_argument("--onnx-min-same", type=float, default=0.99,
                        help="'same rankings' means this share of queries with an identical top-k label set")
    parser.add_argument("--out", type=Path, help="default benchmarks/results/serve_<dataset>.json")
    args = parser.parse_args()

    from xc_core.datasets.container import XCDataset
    from xc_core.paths import dataset_dir, dataset_slug

    home = args.home.expanduser().resolve()
    started = time.perf_counter()
    data = XCDataset.load(dataset_dir(home, args.dataset))
    # what a client may send: xc serve refuses empty and over-long texts (413/422), which would be our error
    pool = [t for t in data.test_texts if t.strip() and len(t) <= args.max_chars]
    targets = registry_targets(home, args.dataset, [t.strip() for t in args.methods.split(",") if t.strip()])
    phases = [Phase(f"single x{c}", c, 1, args.requests) for c in map(int, args.clients.split(","))]
    phases += [Phase(f"batch{args.batch} x{c}", c, args.batch, args.batch_requests)
               for c in map(int, args.batch_clients.split(","))]
    load_at_start, quiet = wait_for_quiet(args.max_load, args.wait_minutes * 60)
    result: dict[str, Any] = {
        "bench": "bench_serve", "machine": machine(), "git": checkout_stamp(), "dataset": args.dataset,
        "labels": len(data.label_texts), "test_queries": len(data.test_texts), "query_pool": len(pool),
        "load_average_1m_at_start": load_at_start, "quiet_at_start": quiet,
        "settings": {k: v for k, v in vars(args).items() if k not in ("home", "out")},
        "clients_note": "client threads run in the bench process on the same cores as the server",
        "targets": [],
    }
    by_version: dict[str, dict[str, Any]] = {}
    for target in targets:
        if target["version"] in by_version:  # champion is usually one of the methods: measured once
            first = by_version[target["version"]]
            first.setdefault("also", []).append(target["target"])
            result["targets"].append({**target, "same_as": first["target"]})
            continue
        print(f"== {target['target']} v{target['version']} ({target['method']})", file=sys.stderr, flush=True)
        measured: dict[str, Any] = {**target, "load_average_1m_before": round(os.getloadavg()[0], 2), "phases": []}
        with ServeProcess(home, args.dataset, target["version"], args.ready_timeout) as server:
            for phase in phases:
                n = phase.max_requests + phase.clients * args.warmup
                row = run_phase(server, phase, bodies(pool, phase, args.k, n, args.seed), args.warmup, args.seconds,
                                args.k)
                measured["phases"].append(row)
                print(f"   {phase.name}: p50 {row['p50_ms']} p99 {row['p99_ms']} ms, {row['queries_per_s']} q/s, "
                      f"{row['errors']} errors", file=sys.stderr, flush=True)
        measured["server"] = server.facts
        result["targets"].append(measured)
        by_version[target["version"]] = measured
    result["goals"] = goals(result["targets"])

    # the anchor and the ONNX check run with no server up: each has the cores to itself
    rng = np.random.default_rng([args.seed, 7])
    result["anchor"] = anchor(home, args.dataset, [pool[i] for i in rng.choice(len(pool), args.anchor_runs,
                                                                                 replace=False)], args.k)
    champion = next((m for m in result["targets"] if m["target"] == "champion"), None)
    single = single_x1(by_version[champion["version"]]["phases"]) if champion else None
    if single and result["anchor"]["median_seconds"]:  # xc predict answers with the champion: compare with it
        result["anchor"]["served_p50_ms_single_x1"] = single["p50_ms"]
        result["anchor"]["cold_over_served_p50"] = round(1000 * result["anchor"]["median_seconds"] / single["p50_ms"])
    if not args.no_onnx:
        onnx_target = next((t for t in targets if t["target"] == args.onnx_target), targets[-1])
        print(f"== ONNX check on {onnx_target['target']} v{onnx_target['version']}", file=sys.stderr, flush=True)
        result["onnx"] = onnx = onnx_check(home, args.dataset, onnx_target, pool, args)
        single = single_x1(by_version[onnx_target["version"]]["phases"])
        if "time_split" in onnx and single:  # the same forward pass against what a client waits for, HTTP included
            onnx["time_split"]["single"]["http_p50_ms_single_x1"] = single["p50_ms"]
            onnx["time_split"]["single"]["forward_share_of_http_p50"] = round(
                onnx["time_split"]["single"]["text_encoder_encode_ms"] / single["p50_ms"], 3)
    result["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = args.out or RESULTS_DIR / f"serve_{dataset_slug(args.dataset)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_result(out, json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    print(f"\nwritten: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
