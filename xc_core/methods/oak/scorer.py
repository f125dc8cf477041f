"""How OAK scores: stage one links each test query to graph nodes — the predicted linker (top-k nodes by text)
or, for ``oak-oracle``, the query's true neighbours (``test_edges``) where it has any and the predicted linker
where it has none; the GCN layer convolves; stage two searches an HNSW index over the labels' embeddings.

Saved like the other methods' index stage (``index_report.json``, ``test_top_ids.npy``), with the time per query
split into encoder / linker + GCN / label search and the share of queries the oracle served."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.datasets.container import XCDataset
from xc_core.methods.base import Predictions, Scorer, Served, pyfunc_index_scorer
from xc_core.methods.oak.graph import first_neighbours, oracle_neighbours
from xc_core.methods.oak.inference import ARTEFACT, OakModel
from xc_core.training.record import TrainedModel

REPORT = "index_report.json"
TIMINGS = ("ms_per_query_encoder", "ms_per_query_linker_gcn", "ms_per_query_search", "ms_per_query_total")


def linked(model: OakModel, query: np.ndarray, dataset: XCDataset, oracle: bool) -> tuple[np.ndarray, np.ndarray]:
    """(n, N) neighbour node ids of every test query (−1 pads) and which rows the oracle served."""
    served = np.zeros(len(query), dtype=bool)
    if not oracle:
        return model.link(query), served
    truth = oracle_neighbours(dataset, model.node_texts)
    served = np.diff(truth.indptr) > 0
    true_ids = first_neighbours(truth, np.arange(len(query)), model.cfg.oracle_max)
    predicted = model.link(query[~served])
    out = np.full((len(query), max(true_ids.shape[1], predicted.shape[1])), -1, dtype=np.int64)
    out[served, :true_ids.shape[1]] = true_ids[served]
    out[~served, :predicted.shape[1]] = predicted
    return out, served


def predict(dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, oracle: bool, reuse: bool = False,
            progress: bool = False, k: int = 100) -> Predictions:
    from xc_core.encoders.text import encoder_for
    from xc_core.evaluation.metrics import to_csr
    from xc_core.evaluation.record import fingerprint_test_split
    from xc_core.index import RANKING, IndexConfig, LabelIndex, search_exactly

    split = fingerprint_test_split(dataset)
    report_path = index_dir / REPORT
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    if (reuse and report.get("model_uri") == trained.model_uri and report.get("test_split") == split
            and report.get("oracle") == oracle and report.get("ranking") == RANKING
            and (index_dir / "test_top_ids.npy").exists()):
        ids, scores = np.load(index_dir / "test_top_ids.npy"), np.load(index_dir / "test_top_scores.npy")
        return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, split, trained.model_uri,
                           report["hnsw_recall@10"], report["ms_per_query"], report["exact_ms_per_query"],
                           steps_of(report))
    encoder = encoder_for(Path(trained.summary["encoder_dir"]), int(trained.summary.get("max_length", 32)))
    model = OakModel.load(trained.folder / ARTEFACT)
    labels = encoder.encode(dataset.label_texts, progress=progress, desc="labels")
    index = LabelIndex.build(labels, None, IndexConfig(kind="hnsw"), model_uri=trained.model_uri,
                             dataset=dataset.name)
    index_dir.mkdir(parents=True, exist_ok=True)
    index.save(index_dir)
    n = max(len(dataset.test_texts), 1)
    started = time.perf_counter()
    query = encoder.encode(dataset.test_texts, progress=progress, desc="test queries")
    encoded = time.perf_counter()
    neighbours, served = linked(model, query, dataset, oracle)
    reps = model.represent(query, neighbours)
    convolved = time.perf_counter()
    ranking = search_exactly(index, labels, reps, k)  # the metrics read the exact ranking; the ANN serves
    scores, ids, recall, exact_ms = ranking.scores, ranking.ids, ranking.ann_recall_at_10, ranking.exact_ms_per_query
    searched = convolved + ranking.ann_ms_per_query * n / 1000  # the served search's time, as a deployment spends it
    np.save(index_dir / "test_top_ids.npy", ids)
    np.save(index_dir / "test_top_scores.npy", scores)
    timings = [1000 * (b - a) / n for a, b in ((started, encoded), (encoded, convolved), (convolved, searched),
                                               (started, searched))]
    search_ms = timings[2]
    report_path.write_text(json.dumps({
        "hnsw_recall@10": recall, "ranking": RANKING, "ms_per_query": search_ms, "exact_ms_per_query": exact_ms,
        **{name: round(ms, 4) for name, ms in zip(TIMINGS, timings, strict=True)},
        "oracle": oracle, "oracle_share": round(float(served.mean()) if len(served) else 0.0, 4),
        "mean_neighbours": round(float((neighbours >= 0).sum(axis=1).mean()) if len(neighbours) else 0.0, 3),
        "queries": len(dataset.test_texts), "k": k, "model_uri": trained.model_uri, "test_split": split}))
    return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, split, trained.model_uri, recall, search_ms,
                       exact_ms, steps_of(dict(zip(TIMINGS, timings, strict=True))))


def steps_of(report: dict[str, Any]) -> dict[str, float]:
    """The time split under the costs table's step names (encoder, graph = linker + GCN, search)."""
    names = {"encoder": TIMINGS[0], "graph": TIMINGS[1], "search": TIMINGS[2]}
    return {step: float(report[key]) for step, key in names.items() if key in report}


def measurements(index_dir: Path) -> dict[str, float | bool]:
    """The index stage's OAK-specific figures (time split, oracle share) for the evaluation summary."""
    path = index_dir / REPORT
    report = json.loads(path.read_text()) if path.exists() else {}
    keep = (*TIMINGS, "oracle", "oracle_share", "mean_neighbours")
    return {name: report[name] for name in keep if name in report}


def oak_scorer(method: str, served: Served) -> Scorer:
    """The registered model embeds the query through encoder → predicted linker → GCN; the method's label index
    (built at evaluation, manifest-checked) is searched."""
    return pyfunc_index_scorer(method, served)
