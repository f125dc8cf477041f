"""From a trained encoder to scored predictions: label index, test-query search, sparse score matrix."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.encoders.text import EncoderConfig, TextEncoder
from xc_core.index import IndexConfig, LabelIndex, recall_against_exact


@dataclass
class Predictions:
    scores: sp.csr_matrix  # test documents × labels, top-k similarities per row
    index_recall_at_10: float  # HNSW vs exact search on the real test queries
    index_ms_per_query: float
    exact_ms_per_query: float
    index_dir: Path


def encoder_for(encoder_dir: Path, max_length: int = 32) -> TextEncoder:
    return TextEncoder(EncoderConfig(model_path=str(encoder_dir), max_length=max_length))


def to_csr(scores: np.ndarray, ids: np.ndarray, n_labels: int) -> sp.csr_matrix:
    """(n, k) similarities and ids (−1 = none) as a CSR matrix of the same scores."""
    rows = np.repeat(np.arange(len(ids)), ids.shape[1])
    keep = ids.ravel() >= 0
    return sp.csr_matrix((scores.ravel()[keep].astype(np.float32), (rows[keep], ids.ravel()[keep])),
                         shape=(len(ids), n_labels))


def predict(dataset: XCDataset, encoder: TextEncoder, index_dir: Path, model_uri: str, k: int = 100,
            cfg: IndexConfig | None = None, progress: bool = False) -> Predictions:
    """Index every label with the encoder, search the test documents, and measure the index."""
    labels = encoder.encode(dataset.label_texts, progress=progress, desc="labels")
    queries = encoder.encode(dataset.test_texts, progress=progress, desc="test queries")
    index = LabelIndex.build(labels, None, cfg or IndexConfig(kind="hnsw"), model_uri=model_uri, dataset=dataset.name)
    index.save(index_dir)
    np.save(index_dir / "label_vectors.npy", labels)
    started = time.perf_counter()
    scores, ids = index.search(queries, k)
    ann_ms = 1000 * (time.perf_counter() - started) / max(len(queries), 1)
    exact = LabelIndex.build(labels, None, IndexConfig(kind="flat"))
    started = time.perf_counter()
    exact.search(queries, k)
    exact_ms = 1000 * (time.perf_counter() - started) / max(len(queries), 1)
    sample = queries[: min(len(queries), 2000)]
    recall = recall_against_exact(index, labels, np.arange(len(labels)), sample, k=10)
    (index_dir / "index_report.json").write_text(json.dumps(
        {"hnsw_recall@10": recall, "ms_per_query": ann_ms, "exact_ms_per_query": exact_ms, "queries": len(queries)}))
    return Predictions(to_csr(scores, ids, dataset.n_labels), recall, ann_ms, exact_ms, index_dir)
