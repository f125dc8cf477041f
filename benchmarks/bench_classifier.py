"""Classifier-stage cost (issue #18): serving latency of the fused search against the encoder alone, measured
in the same run on the same queries, the memory of W, and the stage's training time.

    .venv/bin/python benchmarks/bench_classifier.py --home /tmp/xc-s0 --dataset aol-1000 --method pretrained-clf \
        --profile demo [--queries 500]

Needs a trained and indexed ``-clf`` method (``xc train`` + ``xc index``/``xc eval``). Per query, one at a
time as a search service sees them: encode the text, then either search the label index (encoder only, the
baseline) or run ``fused_search`` (label index ∪ classifier index ∪ the lexical shortlist when the model
kept that channel ∪ the labels the query names when the name channel is served, re-scored; the name channel's own
lookups are also timed alone). Goal: fused ≤ 1.3× the
baseline per query. Also timed in one batch of all sampled queries (offline scoring). Results are merged
into benchmarks/results/bench_classifier.json under the data set's key.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from xc_core.provenance import write_result

RESULTS_DIR = Path(__file__).resolve().parent / "results"

RESULTS = RESULTS_DIR / "bench_classifier.json"
GOAL_RATIO = 1.3


def _timed(step, queries: list[str]) -> float:
    """Mean milliseconds per query, one query at a time (after one warm-up call)."""
    step(queries[:1])
    started = time.perf_counter()
    for text in queries:
        step([text])
    return 1000 * (time.perf_counter() - started) / len(queries)


def measure(home: Path, dataset: str, method: str, profile: str, n_queries: int, seed: int = 0) -> dict:
    from xc_core.classifier import FusedClassifier, fused_search
    from xc_core.classifier.fusion import CLASSIFIER_INDEX, LABEL_VECTORS
    from xc_core.encoders.text import encoder_for
    from xc_core.index import LabelIndex
    from xc_core.methods.encoder import artefacts
    from xc_core.paths import index_dir
    from xc_core.stages.anchor_sets import load_with_anchors
    from xc_core.training.record import TrainedModel

    data = load_with_anchors(home, dataset)
    trained = TrainedModel.of(home, dataset, method, profile)
    encoder_dir, max_length, classifier_dir = artefacts(trained)
    if classifier_dir is None:
        raise SystemExit(f"{method} has no classifier stage: benchmark a '-clf' method")
    fused = FusedClassifier.load(classifier_dir)
    folder = index_dir(home, dataset, method, profile)
    label_index = LabelIndex.load(folder, expect_model_uri=trained.model_uri, expect_dataset=dataset)
    classifier_index = LabelIndex.load(folder / CLASSIFIER_INDEX, expect_dataset=dataset)
    label_vecs = np.load(folder / LABEL_VECTORS)
    encoder = encoder_for(encoder_dir, max_length)
    rng = np.random.default_rng(seed)
    queries = [data.test_texts[i] for i in rng.choice(len(data.test_texts), min(n_queries, len(data.test_texts)),
                                                      replace=False)]
    k = 10

    def encoder_only(texts: list[str]) -> object:
        return label_index.search(encoder.encode(texts), k)

    def with_classifier(texts: list[str]) -> object:
        return fused_search(encoder.encode(texts), label_index, classifier_index, label_vecs, fused, k, texts=texts)

    baseline_ms, fused_ms = _timed(encoder_only, queries), _timed(with_classifier, queries)
    names = fused.active("names")
    # the name channel's own share of the fused time: its substring lookups, one query at a time (0 when not served)
    names_ms = (_timed(lambda texts: names.propose(texts, np.empty((len(texts), 0), np.float32), fused.search_k).ids,
                       queries) if names is not None else 0.0)
    vectors = encoder.encode(queries)
    started = time.perf_counter()
    label_index.search(vectors, k)
    batch_base = 1000 * (time.perf_counter() - started) / len(queries)
    started = time.perf_counter()
    fused_search(vectors, label_index, classifier_index, label_vecs, fused, k, texts=queries)
    batch_fused = 1000 * (time.perf_counter() - started) / len(queries)
    return {
        "dataset": dataset, "method": method, "profile": profile, "labels": int(fused.weights.shape[0]),
        "queries": len(queries), "alpha": fused.alpha, "lexical_weight": fused.weight("lexical"),
        "search_k": fused.search_k,
        "baseline": "encoder only: encode + HNSW search of the label index",
        "encoder_only_ms_per_query": round(baseline_ms, 3), "fused_ms_per_query": round(fused_ms, 3),
        "ratio": round(fused_ms / baseline_ms, 3), "goal_ratio": GOAL_RATIO,
        "meets_goal": fused_ms / baseline_ms <= GOAL_RATIO,
        "search_only_batch_ms_per_query": {"encoder_only": round(batch_base, 4), "fused": round(batch_fused, 4)},
        "weights_mb": round(fused.weights.nbytes / 2**20, 1), "weights_shape": list(fused.weights.shape),
        "lexical_mb": round(lexical.megabytes, 1) if (lexical := fused.active("lexical")) is not None else 0.0,
        "linear_weight": fused.weight("hybrid"),
        "name_weight": fused.weight("names"), "names_mb": round(names.megabytes, 1) if names is not None else 0.0,
        "names_ms_per_query": round(names_ms, 3),
        "hybrid_mb": round(hybrid.megabytes, 1) if (hybrid := fused.active("hybrid")) is not None else 0.0,
        "hybrid_seconds": {k: v for k, v in fused.info.get("stage_seconds", {}).items() if "hybrid" in k},
        "train_seconds": fused.info.get("train_seconds"), "train_pairs": fused.info.get("train_pairs"),
        "epochs": len(fused.info.get("history", [])),
        # other jobs on the cores stretch every figure above alike; the ratio is the comparable one
        "load_average_1min": round(os.getloadavg()[0], 2), "cpu_cores": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--method", default="pretrained-clf")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    result = measure(args.home, args.dataset, args.method, args.profile, args.queries)
    merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    merged[args.dataset] = result
    write_result(RESULTS, json.dumps(merged, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
