"""A catalogue grown to any size and served: label vectors encoded once and cached in chunks, an approximate index
swept against exact search, the chosen one registered the way ``xc promote`` registers (a new version that
``xc serve --version N`` serves), and the served answers' recall over HTTP. For ``-clf`` models the classifier is
grown by the labels without clicks (their classifier vectors are their text vectors) and the two HNSW indexes are
swept against the exact fused search.

What sizes serving for catalogues far larger than a data set's (the million-ad serving benchmark); nothing here
runs when a data set's model is trained or served.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.index.ann import top_k_agreement
from xc_core.measure import reset_peak_rss, rss_mb

K = 10
#: texts per cached chunk of vectors: about a minute of encoding on 2 cores, so a stopped run loses little
CHUNK = 20_000


def recall(truth: np.ndarray, found: np.ndarray) -> float:
    """Mean share of each query's exact top-``K`` the approximate search found (label texts are distinct, so an
    exact tie between two labels is not a concern here)."""
    return top_k_agreement(truth, found, K)


# -- the labels ----------------------------------------------------------------------------------------------


# -- the vectors, encoded once -------------------------------------------------------------------------------


def encoder_key(encoder: Any) -> str:
    """A hash of what decides the vectors: the weights (not their files: a re-save keeps the key), the token limit
    and the runtime (ONNX Runtime and torch agree to ~1e-7, but the cache says which one wrote it)."""
    digest = hashlib.sha256()
    for name, tensor in encoder.model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().numpy().tobytes())
    digest.update(f"max_length={encoder.cfg.max_length};onnx={encoder.onnx is not None}".encode())
    return digest.hexdigest()[:16]


def texts_key(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]


def cached_vectors(texts: list[str], encoder: Any, work: Path, log: Any = print) -> tuple[np.ndarray, dict[str, Any]]:
    """The texts' vectors from ``<work>/vectors-<texts>-<encoder>.npy``, encoded first when missing. Encoding
    writes one file per chunk and skips the chunks already on disk, so a stopped run resumes where it was."""
    name = f"vectors-{texts_key(texts)}-{encoder_key(encoder)}"
    final = work / f"{name}.npy"
    if final.exists():
        return np.load(final, mmap_mode="r"), {"cache": str(final), "encoded_now": 0}
    chunks = work / f"{name}.chunks"
    chunks.mkdir(parents=True, exist_ok=True)
    encoded, seconds = 0, 0.0
    for start in range(0, len(texts), CHUNK):
        path = chunks / f"{start:09d}.npy"
        if path.exists():
            continue
        began = time.perf_counter()
        vectors = encoder.encode(texts[start: start + CHUNK])
        np.save(chunks / f".{start:09d}.tmp.npy", vectors)
        os.replace(chunks / f".{start:09d}.tmp.npy", path)  # a chunk on disk is always whole
        encoded, seconds = encoded + len(vectors), seconds + time.perf_counter() - began
        log(f"encoded {start + len(vectors):,}/{len(texts):,} ({encoded / seconds:.0f} texts/s this run)")
    parts = [np.load(chunks / f"{s:09d}.npy") for s in range(0, len(texts), CHUNK)]
    np.save(work / f".{name}.tmp.npy", np.concatenate(parts))
    os.replace(work / f".{name}.tmp.npy", final)
    shutil.rmtree(chunks)
    facts = {"cache": str(final), "encoded_now": encoded,
             "texts_per_s_this_run": round(encoded / seconds, 1) if seconds else None}
    return np.load(final, mmap_mode="r"), facts


# -- the home and the model it serves ------------------------------------------------------------------------

#: whose queries tune and test the index, whose `pretrained` run the versions are logged into, and whose model name
#: (xc-encoder-synthetic) they are registered under in the scratch home
DATASET = "synthetic"
METHOD = "pretrained"  # the shipped encoder, untrained: the label-text index alone
FUSED_METHOD = "pretrained-clf"  # the same encoder with the classifier stage: two indexes and the fused re-score


def served_encoder(trained: Any, work: Path, onnx: bool = True) -> Any:
    """The trained model's text encoder running as ``xc serve`` runs it: on ONNX Runtime over the same export
    registration makes (``encoders/onnx_runtime.py``), so label, query and served vectors come from one graph.
    ``onnx=False`` keeps torch (its vectors differ by ~1e-7; the fast test saves the export's seconds)."""
    import mlflow

    from xc_core.encoders.onnx_runtime import export

    encoder = mlflow.pyfunc.load_model(trained.model_uri).unwrap_python_model().encoder
    if not onnx:
        return encoder
    path = work / f"encoder-{encoder_key(encoder)}.onnx"
    if not path.exists():
        export(encoder, path)
    encoder.use_onnx(path)
    return encoder


def query_sets(data: Any, n: int, seed: int) -> tuple[list[str], list[str]]:
    """(tuning, held-out) query texts: distinct train queries that are not test queries, and distinct test
    queries — the setting is chosen on the first and its recall reported on the second."""
    held_pool = sorted({t for t in data.test_texts if t.strip()})
    tune_pool = sorted({t for t in data.train_texts if t.strip()} - set(held_pool))
    rng = np.random.default_rng([seed, 41, 5])
    pick = lambda pool: [pool[i] for i in sorted(rng.choice(len(pool), min(n, len(pool)), replace=False))]  # noqa: E731
    return pick(tune_pool), pick(held_pool)


# -- exact search, the sweep ---------------------------------------------------------------------------------


def exact_top_k(vectors: np.ndarray, queries: np.ndarray, k: int = K) -> np.ndarray:
    """The exact top-k label ids (faiss flat inner product over every label vector)."""
    from xc_core.index import IndexConfig, LabelIndex

    return LabelIndex.build(vectors, cfg=IndexConfig(kind="flat")).search(queries, k)[1]


def build_index(vectors: np.ndarray, cfg: Any, model_uri: str, dataset: str) -> tuple[Any, dict[str, Any]]:
    """A ``LabelIndex`` as xc builds one, with its build seconds and the process's peak memory while building."""
    import faiss

    from xc_core.index import LabelIndex

    rss_before, reset = rss_mb(), reset_peak_rss()
    started = time.perf_counter()
    index = LabelIndex.build(vectors, cfg=cfg, model_uri=model_uri, dataset=dataset)
    seconds = time.perf_counter() - started
    facts = {"config": cfg.model_dump(), "build_seconds": round(seconds, 1),
             "faiss_threads": faiss.omp_get_max_threads(),
             "rss_before_mb": rss_before, "peak_rss_during_build_mb": rss_mb("self", "VmHWM") if reset else None,
             "rss_after_mb": rss_mb(),
             "peak_rss_note": "the bench process's peak while building (the label vectors, memory-mapped, included)"}
    return index, facts


def single_query_ms(search: Callable[[int], Any], n: int, threads: int) -> tuple[float, float]:
    """(median, p99) ms of ``search(i)`` for i < n, one query per call, as a request with one query searches
    (the index's search, or the whole fused search), with faiss on
    ``threads`` OpenMP threads. Why both 1 and the default (2): one query uses one thread either way, but with two
    it also waits for the second to join faiss's parallel region — a few µs on idle cores, likely a scheduler
    tick when other work holds the other core (the first 1M run, with another process on ~0.9 of the 2 cores,
    measured flat 8.0 ms medians for settings that take 0.1–2 ms). One thread is the index's own cost and
    chooses the setting."""
    import faiss

    default = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    times = []
    try:
        for i in range(n):
            started = time.perf_counter()
            search(i)
            times.append(1000 * (time.perf_counter() - started))
    finally:
        faiss.omp_set_num_threads(default)
    return round(float(np.median(times)), 3), round(float(np.percentile(times, 99)), 3)


def sweep(index: Any, kind: str, values: list[int], tune: tuple[np.ndarray, np.ndarray],
          held: tuple[np.ndarray, np.ndarray]) -> list[dict[str, Any]]:
    """Per knob value: recall@10 against exact on the tuning and held-out queries, and single-query latency
    (on the tuning queries). Each query set is (vectors, exact top-k)."""
    import faiss

    rows = []
    for value in values:
        index.set_search_breadth(value)
        index.search(tune[0][:8], K)  # warm
        def one(i: int) -> Any:
            return index.search(tune[0][i: i + 1], K)

        p50, p99 = single_query_ms(one, len(tune[0]), threads=1)
        p50_default, p99_default = single_query_ms(one, len(tune[0]), threads=faiss.omp_get_max_threads())
        rows.append({"kind": kind, "knob": "efSearch" if kind == "hnsw" else "nprobe", "value": value,
                     "recall_at_10_tuning": round(recall(tune[1], index.search(tune[0], K)[1]), 4),
                     "recall_at_10_held_out": round(recall(held[1], index.search(held[0], K)[1]), 4),
                     "single_query_ms_p50": p50, "single_query_ms_p99": p99,
                     "default_threads": faiss.omp_get_max_threads(), "single_query_ms_p50_default_threads": p50_default,
                     "single_query_ms_p99_default_threads": p99_default})
        print(f"   {kind} {rows[-1]['knob']}={value}: recall@10 tuning {rows[-1]['recall_at_10_tuning']}, "
              f"held-out {rows[-1]['recall_at_10_held_out']}, {p50} ms (p99 {p99}); default threads {p50_default} ms "
              f"(p99 {p99_default})", file=sys.stderr, flush=True)
    return rows


def choose(rows: list[dict[str, Any]], goal: float) -> dict[str, Any]:
    """The fastest (single-query p50, one thread) setting whose *tuning* recall meets the goal; the most accurate
    if none."""
    meeting = [r for r in rows if r["recall_at_10_tuning"] >= goal]
    if meeting:
        return {**min(meeting, key=lambda r: r["single_query_ms_p50"]), "why": f"fastest with tuning recall ≥ {goal}"}
    return {**max(rows, key=lambda r: r["recall_at_10_tuning"]), "why": f"no setting reached {goal}: the best"}


def folder_mb(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20, 1)


# -- registration: the path `xc promote` takes ---------------------------------------------------------------


def register_index(home: Path, trained: Any, folder: Path, texts: list[str], served_as: str,
                   sweep_facts: dict[str, Any], ids: list[str] | None = None,
                   model_uri: str | None = None) -> dict[str, Any]:
    """Log the served model (the trained model + the index in ``folder`` + the labels) into the training run and
    register it as a new version of ``xc-encoder-<served_as>``: ``register_evaluated``'s two calls, with the
    index given instead of the evaluation's (there is no evaluation over a million generated labels).
    ``model_uri``: the method's model to serve instead of the trained one (a -clf grown to the catalogue)."""
    from xc_core.encoders.onnx_runtime import ExportCache
    from xc_core.tracking.registry import model_name, register
    from xc_core.tracking.served import log_served
    from xc_core.tracking.store import activate, git_commit, tracking_uri

    uri = tracking_uri(home)
    activate(uri)
    commit = git_commit()
    method_model = model_uri or trained.model_uri
    info = {"method": trained.method, "dataset": served_as, "profile": trained.profile,
            "trained_model_uri": method_model, "git_commit": commit}
    started = time.perf_counter()
    logged = log_served(method_model, trained.mlflow_run_id, folder, ids or label_ids(len(texts)), texts, info,
                        ExportCache.for_home(home))
    log_seconds = time.perf_counter() - started
    tags = {"method": trained.method, "dataset": served_as, "profile": trained.profile, "git_commit": commit,
            "mlflow_run_id": trained.mlflow_run_id, "trained_model_uri": method_model,
            "bench": "bench_serve_1m", "index": json.dumps(sweep_facts)}
    version = register(logged.model_uri, served_as, tags, uri)
    return {"model": model_name(served_as), "version": version, "model_uri": logged.model_uri,
            "log_served_seconds": round(log_seconds, 1)}


def label_ids(n: int) -> list[str]:
    return [f"A{i:07d}" for i in range(n)]


# -- the fused -clf search over a grown catalogue -------------------------------------------------------------


def catalogue(data: Any, generated: list[str], n: int) -> tuple[list[str], list[str], np.ndarray]:
    """An ``n``-label catalogue for a -clf model: the data set's own labels first (ids 0..L−1, the rows its
    classifier was trained on), then generated ads whose text is none of theirs, as ads added after training.
    (label ids, texts, the position in ``generated`` of each added label)."""
    own = set(data.label_texts)
    added = np.fromiter((i for i, t in enumerate(generated) if t not in own), dtype=np.int64)[: n - data.n_labels]
    if len(added) < n - data.n_labels:
        raise ValueError(f"{len(generated):,} generated texts give {len(added):,} new ones, {n - data.n_labels:,} "
                         "needed: generate more")
    ids = [*data.label_ids, *label_ids(len(added))]
    return ids, [*data.label_texts, *(generated[i] for i in added)], added


def grown_classifier(trained: Any, added_vectors: np.ndarray) -> Any:
    """The trained -clf's classifier with the added labels appended (their text vectors as W, untrained)."""
    from xc_core.classifier.fusion import FusedClassifier
    from xc_core.methods.encoder import artefacts

    classifier_dir = artefacts(trained)[2]
    assert classifier_dir is not None, f"{trained.folder}: {trained.method} has no classifier stage"
    return FusedClassifier.load(classifier_dir).with_new_labels(added_vectors)


def log_grown_model(trained: Any, fused: Any, work: Path) -> str:
    """Log the trained encoder with the grown classifier as a model of the training run (what ``xc train`` logs
    for a -clf method, over the larger catalogue); its URI. The folder written for it is removed after."""
    import mlflow

    from xc_core.methods.encoder import artefacts
    from xc_core.methods.encoder.pyfunc import log_encoder

    encoder_dir, max_length, _ = artefacts(trained)
    folder = work / "grown-classifier"
    shutil.rmtree(folder, ignore_errors=True)
    fused.save(folder / "classifier")
    try:
        with mlflow.start_run(run_id=trained.mlflow_run_id):
            return str(log_encoder(encoder_dir, max_length, folder, folder / "classifier").model_uri)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def fused_top_k(indexes: tuple[Any, Any], label_vectors: np.ndarray, fused: Any, queries: np.ndarray,
                texts: list[str], k: int = K) -> np.ndarray:
    """The fused search's top-k label ids (``classifier/fusion.py``: the one path eval and serving take)."""
    from xc_core.classifier.fusion import fused_search

    return fused_search(queries, indexes[0], indexes[1], label_vectors, fused, k, texts=texts)[1]


def exact_fused(label_vectors: np.ndarray, fused: Any, queries: np.ndarray, texts: list[str]) -> np.ndarray:
    """The fused top-k with both shortlists from exact search (flat indexes): the truth the approximate one is
    measured against."""
    from xc_core.index import IndexConfig, LabelIndex

    flat = IndexConfig(kind="flat")
    indexes = (LabelIndex.build(label_vectors, cfg=flat), LabelIndex.build(fused.weights, cfg=flat))
    return fused_top_k(indexes, label_vectors, fused, queries, texts)


def fused_sweep(indexes: tuple[Any, Any], label_vectors: np.ndarray, fused: Any, values: list[int],
                tune: tuple[np.ndarray, list[str], np.ndarray], held: tuple[np.ndarray, list[str], np.ndarray]
                ) -> list[dict[str, Any]]:
    """Per efSearch (set on both HNSW indexes): the fused answers' recall@10 against the exact fused search on
    the tuning and held-out queries, and one query's fused search time (one faiss thread). Each shortlist is
    ``search_k`` deep, and faiss's HNSW searches at least k deep, so efSearch values under it all act as it."""
    rows = []
    for value in values:
        for index in indexes:
            index.set_ef_search(value)
        fused_top_k(indexes, label_vectors, fused, tune[0][:8], tune[1][:8])  # warm
        p50, p99 = single_query_ms(
            lambda i: fused_top_k(indexes, label_vectors, fused, tune[0][i: i + 1], tune[1][i: i + 1]),
            len(tune[0]), threads=1)
        rows.append({"kind": "hnsw", "knob": "efSearch", "value": value, "search_k": fused.search_k,
                     "recall_at_10_tuning": round(recall(tune[2], fused_top_k(indexes, label_vectors, fused,
                                                                                tune[0], tune[1])), 4),
                     "recall_at_10_held_out": round(recall(held[2], fused_top_k(indexes, label_vectors, fused,
                                                                                  held[0], held[1])), 4),
                     "single_query_ms_p50": p50, "single_query_ms_p99": p99})
        print(f"   fused efSearch={value}: recall@10 tuning {rows[-1]['recall_at_10_tuning']}, held-out "
              f"{rows[-1]['recall_at_10_held_out']}, {rows[-1]['single_query_ms_p50']} ms "
              f"(p99 {rows[-1]['single_query_ms_p99']})", file=sys.stderr, flush=True)
    return rows


# -- the served answers' recall -------------------------------------------------------------------------------


def served_recall(port: int, held: list[str], truth: np.ndarray, batch: int = 32,
                  ids: list[str] | None = None) -> dict[str, Any]:
    """Recall@10 of what ``xc serve`` answers over HTTP for the held-out queries, against exact search. ``ids``:
    the catalogue's label ids in index order (default: the generated ``A0001234`` = index id 1234)."""
    import http.client

    row_of = {label: row for row, label in enumerate(ids)} if ids is not None else None

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    found = np.full((len(held), K), -1, dtype=np.int64)
    for s in range(0, len(held), batch):
        conn.request("POST", "/predict", json.dumps({"queries": held[s: s + batch], "k": K}),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"xc serve answered {response.status}: {answer}")
        for row, result in enumerate(answer["results"]):
            found_ids = [int(label["label_id"][1:]) if row_of is None else row_of[label["label_id"]]
                         for label in result["labels"]]
            found[s + row, : len(found_ids)] = found_ids
    conn.close()
    return {"queries": len(held), "recall_at_10": round(recall(truth, found), 4)}
