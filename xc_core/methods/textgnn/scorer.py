"""TextGNN at inference: the trained encoder and towers with the neighbour tables training chose, as the index
stage, the evaluation and ``xc predict`` use them.

Keyword side (offline, as in the paper): every label's tower output over its graph (or proxy) neighbours is
indexed (faiss HNSW, ``xc_core.index``). Query side (per query): centre encoded → neighbours (a train query's
stored ones, a test query's ``test_edges``, else ANN proxies from the pool of document-side anchor texts) →
neighbours encoded → GAT tower → index search; the three steps are timed separately.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xc_core.datasets.container import XCDataset
from xc_core.encoders.text import TextEncoder, encoder_for
from xc_core.methods.base import Predictions, Scorer, Served, pyfunc_index_scorer
from xc_core.methods.textgnn.config import TextGNNConfig
from xc_core.methods.textgnn.model import TextGNNHeads, Tower
from xc_core.methods.textgnn.neighbours import (
    Neighbours,
    ann_proxies,
    answer_neighbours,
    heldout_doc_neighbours,
    padded,
)
from xc_core.training.record import TrainedModel

FOLDER = "textgnn"  # in the model folder: heads, settings, neighbour tables, the proxy pool
REPORT = "index_report.json"


def apply_tower(tower: Tower, centre: np.ndarray, rows: list[list[str]], vectors: dict[str, np.ndarray], k: int,
                batch: int = 4096) -> np.ndarray:
    """Tower outputs from already encoded texts (``vectors``: text → unit row), float32."""
    flat, present = padded(rows, k)
    dim = centre.shape[1]
    zero = np.zeros(dim, np.float32)
    neighbours = np.stack([vectors.get(t, zero) for t in flat]).reshape(len(rows), k, dim) if flat else \
        np.zeros((len(rows), k, dim), np.float32)
    device = next(tower.parameters()).device
    out = np.zeros_like(centre, dtype=np.float32)
    tower.eval()
    with torch.inference_mode():
        for lo in range(0, len(centre), batch):
            hi = lo + batch
            out[lo:hi] = tower(torch.from_numpy(centre[lo:hi]).to(device),
                               torch.from_numpy(neighbours[lo:hi]).to(device),
                               torch.from_numpy(present[lo:hi]).to(device)).float().cpu().numpy()
    return out


def encode_unique(encoder: TextEncoder, rows: list[list[str]], progress: bool = False) -> dict[str, np.ndarray]:
    texts = sorted({t for row in rows for t in row})
    return dict(zip(texts, encoder.encode(texts, progress=progress, desc="neighbours"), strict=True)) if texts else {}


@dataclass
class TextGNNModel:
    """A trained TextGNN as saved in ``<model folder>/textgnn`` with its encoder folder."""

    encoder: TextEncoder
    heads: TextGNNHeads
    cfg: TextGNNConfig
    train_neighbours: dict[str, list[str]]  # train query text → its neighbours (served for the same text)
    labels: Neighbours
    pool: list[str]
    pool_vecs: np.ndarray  # under the trained encoder

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(self.heads.state_dict(), folder / "heads.pt")
        (folder / "settings.json").write_text(json.dumps({"dim": self.encoder.dim, **self.cfg.model_dump()}))
        (folder / "train_neighbours.json").write_text(json.dumps(self.train_neighbours))
        (folder / "label_neighbours.json").write_text(json.dumps(self.labels.to_json()))
        (folder / "pool.json").write_text(json.dumps(self.pool))
        np.save(folder / "pool.npy", self.pool_vecs)
        return folder

    @classmethod
    def load(cls, folder: Path, encoder_dir: Path, max_length: int) -> TextGNNModel:
        settings = json.loads((folder / "settings.json").read_text())
        dim = int(settings.pop("dim"))
        cfg = TextGNNConfig(**settings)
        encoder = encoder_for(encoder_dir, max_length)
        heads = TextGNNHeads(dim, cfg.skip)
        heads.load_state_dict(torch.load(folder / "heads.pt", map_location="cpu", weights_only=True))
        heads.to(encoder.device).eval()
        return cls(encoder, heads, cfg, json.loads((folder / "train_neighbours.json").read_text()),
                   Neighbours.from_json(json.loads((folder / "label_neighbours.json").read_text())),
                   json.loads((folder / "pool.json").read_text()), np.load(folder / "pool.npy"))

    @property
    def parameters(self) -> int:
        """Trainable and frozen parameters of what inference runs: the encoder (its light tower included) and both
        GAT towers."""
        return self.encoder.parameter_count() + sum(p.numel() for p in self.heads.parameters())

    def label_vectors(self, dataset: XCDataset, progress: bool = False) -> np.ndarray:
        k = self.cfg.neighbours
        rows = [t[:k] for t in self.labels.texts]
        centre = self.encoder.encode(list(dataset.label_texts), progress=progress, desc="labels")
        return apply_tower(self.heads.keyword, centre, rows, encode_unique(self.encoder, rows, progress), k)

    def query_vectors(self, texts: list[str], dataset: XCDataset | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Query tower outputs and what served them: ms per query of each step, graph vs proxy counts.
        ``dataset``: the test split of this data set (its ``test_edges``); None: served texts (``xc predict``)."""
        k, timings = self.cfg.neighbours, {}
        started = time.perf_counter()
        centre = self.encoder.encode(texts)
        timings["encoder"] = time.perf_counter() - started
        started = time.perf_counter()
        if dataset is not None and self.cfg.oracle_neighbours:  # the positive control reads the test answers
            found = answer_neighbours(dataset.y_test, dataset.label_texts, k)
        elif dataset is not None:
            found = heldout_doc_neighbours(dataset, centre, self.pool, self.pool_vecs, k, self.cfg.proxy_candidates)
        else:
            found = self._served_neighbours(texts, centre)
        rows = [t[:k] for t in found.texts]
        timings["graph"] = time.perf_counter() - started
        started = time.perf_counter()
        vectors = encode_unique(self.encoder, rows)
        timings["encoder"] += time.perf_counter() - started
        started = time.perf_counter()
        out = apply_tower(self.heads.query, centre, rows, vectors, k)
        timings["graph"] += time.perf_counter() - started
        per_query = {name: 1000 * s / max(len(texts), 1) for name, s in timings.items()}
        return out, {"ms_per_query_steps": per_query, "neighbours": found.counts()}

    def _served_neighbours(self, texts: list[str], centre: np.ndarray) -> Neighbours:
        known = [self.train_neighbours.get(t, []) for t in texts]
        missing = [i for i, n in enumerate(known) if not n]
        if missing:
            proxies = ann_proxies(centre[missing], self.pool, self.pool_vecs, [{texts[i]} for i in missing],
                                  self.cfg.neighbours, self.cfg.proxy_candidates)
            for i, found in zip(missing, proxies, strict=True):
                known[i] = found
        flags = np.zeros(len(texts), bool)
        flags[missing] = True
        return Neighbours(known, flags)


def load_model(trained: TrainedModel) -> TextGNNModel:
    summary = trained.summary
    return TextGNNModel.load(trained.folder / FOLDER, Path(summary["encoder_dir"]), int(summary["max_length"]))


def predict(dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, reuse: bool = False,
            progress: bool = False, k: int = 100) -> Predictions:
    """Index the labels' tower outputs, search the test queries' (saved like the encoder methods' index stage,
    so the evaluation reuses it for the same model and test split); the report also holds the per-step timings
    and how many test queries had graph vs proxy neighbours."""
    from xc_core.evaluation.metrics import to_csr
    from xc_core.evaluation.record import fingerprint_test_split
    from xc_core.index import RANKING, IndexConfig, LabelIndex, search_exactly

    split = fingerprint_test_split(dataset)
    report_path = index_dir / REPORT
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    if (reuse and report.get("model_uri") == trained.model_uri and report.get("test_split") == split
            and report.get("ranking") == RANKING):
        ids, scores = np.load(index_dir / "test_top_ids.npy"), np.load(index_dir / "test_top_scores.npy")
        return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, split, trained.model_uri,
                           report["hnsw_recall@10"], report["ms_per_query"], report["exact_ms_per_query"],
                           dict(report.get("ms_per_query_steps", {})))
    model = load_model(trained)
    labels = model.label_vectors(dataset, progress)
    queries, served = model.query_vectors(list(dataset.test_texts), dataset)
    index = LabelIndex.build(labels, None, IndexConfig(kind="hnsw"), model_uri=trained.model_uri,
                             dataset=dataset.name)
    index_dir.mkdir(parents=True, exist_ok=True)
    index.save(index_dir)
    ranking = search_exactly(index, labels, queries, k)  # the metrics read the exact ranking; the ANN serves
    scores, ids, recall = ranking.scores, ranking.ids, ranking.ann_recall_at_10
    ann_ms, exact_ms = ranking.ann_ms_per_query, ranking.exact_ms_per_query
    np.save(index_dir / "test_top_ids.npy", ids)
    np.save(index_dir / "test_top_scores.npy", scores)
    steps = {**served["ms_per_query_steps"], "search": ann_ms}
    counts = served["neighbours"]
    n = max(len(queries), 1)
    report_path.write_text(json.dumps({
        "hnsw_recall@10": recall, "ranking": RANKING, "ms_per_query": ann_ms, "exact_ms_per_query": exact_ms,
        "queries": len(queries),
        "k": k, "model_uri": trained.model_uri, "test_split": split,
        "ms_per_query_steps": {name: round(v, 4) for name, v in steps.items()},
        "ms_per_query_total": round(sum(steps.values()), 4),
        "test_neighbours": {**counts, "graph_share": round(counts["graph"] / n, 4),
                            "proxy_share": round(counts["proxy"] / n, 4)}}))
    return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, split, trained.model_uri, recall, ann_ms,
                       exact_ms, steps)


def index_report(index_dir: Path) -> dict[str, Any]:
    path = index_dir / REPORT
    return json.loads(path.read_text()) if path.exists() else {}


def textgnn_scorer(served: Served) -> Scorer:
    """The registered model's query tower embeds the query (its stored or proxy neighbours); the label index
    built at evaluation (manifest-checked) is searched."""
    from xc_core.methods.textgnn import NAME

    return pyfunc_index_scorer(NAME, served)
