"""The hybrid channel itself: a linear classifier per label-tree node, searched by beam (XR-Linear)."""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.channel import Channel, ChannelSpec, Proposal
from xc_core.classifier.xrlinear.config import LinearConfig
from xc_core.classifier.xrlinear.features import HybridFeatures
from xc_core.classifier.xrlinear.solver import level_problems, solve_all
from xc_core.classifier.xrlinear.tree import label_tree, level_targets, node_children, pifa

log = logging.getLogger(__name__)

HYBRID_DIR = "hybrid"  # sub-folder of a classifier folder, present only when the served fusion uses the channel


@dataclass
class Layer:
    """One level of the label tree: a linear classifier per node (a cluster of labels, or a label at the bottom).

    ``children_ptr``/``children``: CSR from each node to the next layer's nodes (empty at the bottom)."""

    sparse_weights: sp.csr_matrix  # (n_nodes, n_sparse) pruned
    dense_weights: np.ndarray  # (n_nodes, dim)
    biases: np.ndarray  # (n_nodes,)
    children_ptr: np.ndarray  # (n_nodes + 1,)
    children: np.ndarray

    def __post_init__(self) -> None:
        # the pair kernel walks each node's weights in feature order, the order in which a sparse product over the
        # query's sorted features would add them, so the scores do not depend on how the solver listed them
        self.sparse_weights.sort_indices()

    @property
    def size(self) -> int:
        return len(self.biases)

    @functools.cached_property
    def _sparse_t(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.sparse_weights.T)

    @functools.cached_property
    def _lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(weights per node, weights per feature): what each walk of ``sparse_pairs`` costs."""
        return np.diff(self.sparse_weights.indptr), np.diff(self._sparse_t.indptr)

    def raw(self, x_sparse: sp.csr_matrix, x_dense: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """(rows, c) decision values of each row's ``nodes`` (−1 pads → −inf)."""
        safe = np.maximum(nodes, 0)
        out = self.biases[safe].astype(np.float32)
        if dim := self.dense_weights.shape[1]:
            step = max(1, 2**24 // max(nodes.shape[1] * dim, 1))  # rows per gather: ≤ 64 MB of weights at a time
            for lo in range(0, len(nodes), step):
                out[lo: lo + step] += np.einsum("rcd,rd->rc", self.dense_weights[safe[lo: lo + step]],
                                                x_dense[lo: lo + step])
        if self.sparse_weights.shape[1] and self.sparse_weights.nnz:
            out += sparse_pairs(x_sparse, self.sparse_weights, self._sparse_t, safe, *self._lengths)
        return np.where(nodes >= 0, out, -np.inf).astype(np.float32)

    def arrays(self) -> dict[str, np.ndarray]:
        w = self.sparse_weights
        return {"indptr": w.indptr, "indices": w.indices, "data": w.data, "shape": np.asarray(w.shape),
                "dense": self.dense_weights, "biases": self.biases, "children_ptr": self.children_ptr,
                "children": self.children}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> Layer:
        shape = tuple(int(v) for v in a["shape"])
        weights = sp.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=shape)
        return cls(weights, a["dense"], a["biases"], a["children_ptr"], a["children"])


def l3_hinge(raw: np.ndarray) -> np.ndarray:
    """PECOS's ``l3-hinge`` transform of a decision value into (0, 1]: ``exp(-max(0, 1 - s) ** 3)``."""
    return np.exp(-np.maximum(0.0, 1.0 - raw) ** 3).astype(np.float32)


@dataclass
class LinearChannel(Channel):
    """XR-Linear over the hybrid features: a label tree whose every node has a linear classifier; a query walks it
    by beam search and a label's score is the product of the transformed scores along its path."""

    features: HybridFeatures
    layers: list[Layer]
    labels: np.ndarray  # bottom layer's node → label id
    n_labels: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def cfg(self) -> LinearConfig:
        return self.features.cfg

    @classmethod
    def fit(cls, texts: list[str], vectors: np.ndarray, y: sp.csr_matrix, cfg: LinearConfig) -> LinearChannel:
        """Classifiers for every label with a positive in ``y`` (rows = ``texts``/``vectors``, the encoder's)."""
        started = time.perf_counter()
        y = sp.csr_matrix(y, dtype=np.float32)
        y.data[:] = 1.0
        features = HybridFeatures.fit(texts, cfg)
        x_sparse, x_dense = features.rows(texts, vectors)
        labels = np.flatnonzero(np.diff(y.tocsc().indptr) > 0)
        y_trained = sp.csr_matrix(y[:, labels])
        paths = label_tree(pifa(y_trained, vectors), cfg.max_leaf, cfg.branching, cfg.seed)
        featurized = time.perf_counter()
        layers, previous = [], None
        for level, assign in enumerate(paths):
            y_level = level_targets(y_trained, assign)
            ptr, members, signs = level_problems(y_level, previous, assign if level else None, paths, level)
            w_ptr, w_idx, w_val, dense, bias = solve_all(
                ptr, members, signs, x_sparse.indptr.astype(np.int64), x_sparse.indices.astype(np.int64),
                x_sparse.data.astype(np.float32), np.ascontiguousarray(x_dense, np.float32), features.n_sparse,
                float(cfg.cost), float(cfg.bias), int(cfg.max_iter), float(cfg.tolerance), float(cfg.prune),
            int(cfg.seed) + level)
            n_nodes = len(ptr) - 1
            children_ptr, children = node_children(paths, level, n_nodes)
            layers.append(Layer(sp.csr_matrix((w_val, w_idx, w_ptr), shape=(n_nodes, features.n_sparse)),
                                dense, bias, children_ptr, children))
            # minutes on aol-1000's leaf layer: one line per layer says where the fit is
            log.info("hybrid channel: layer %d/%d — %d nodes over %d training rows, %.1f s since start", level + 1,
                     len(paths), n_nodes, len(members), time.perf_counter() - started)
            previous = y_level
        info = {"features": cfg.features, "n_sparse_features": features.n_sparse, "dim": int(x_dense.shape[1]),
                "labels_trained": int(len(labels)), "layers": [layer.size for layer in layers],
                "sparse_weights_kept": int(sum(layer.sparse_weights.nnz for layer in layers)),
                "featurize_seconds": round(featurized - started, 2),
                "solve_seconds": round(time.perf_counter() - featurized, 2)}
        return cls(features, layers, labels, y.shape[1], info)

    def search(self, texts: list[str], vectors: np.ndarray, k: int, chunk: int = 256
               ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (scores in (0, 1], label ids) per query by beam search, best first (−1 pads, score 0)."""
        out_scores = np.zeros((len(texts), k), np.float32)
        out_ids = np.full((len(texts), k), -1, np.int64)
        for start in range(0, len(texts), chunk):
            x_sparse, x_dense = self.features.rows(texts[start: start + chunk], vectors[start: start + chunk])
            scores, nodes = self._beam(x_sparse, x_dense, k)
            width = min(k, nodes.shape[1])
            out_scores[start: start + chunk, :width] = np.where(nodes[:, :width] >= 0, scores[:, :width], 0.0)
            out_ids[start: start + chunk, :width] = np.where(nodes[:, :width] >= 0,
                                                             self.labels[np.maximum(nodes[:, :width], 0)], -1)
        return out_scores, out_ids

    def propose(self, texts: list[str], queries: np.ndarray, depth: int) -> Proposal:
        """Its beam's top ``depth`` labels; it scores only those (0 outside its beam)."""
        return Proposal.listed(*self.search(texts, queries, depth))

    def alone(self, texts: list[str], queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.search(texts, queries, k)

    def store(self, folder: Path) -> None:
        self.save(folder / HYBRID_DIR)

    def record(self) -> dict[str, Any]:
        return self.info

    def _beam(self, x_sparse: sp.csr_matrix, x_dense: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        n = x_sparse.shape[0]
        nodes = np.tile(np.arange(self.layers[0].size), (n, 1))
        scores = np.ones(nodes.shape, np.float32)
        for level, layer in enumerate(self.layers):
            if level:
                nodes, scores = expand(self.layers[level - 1], nodes, scores)
            combined = np.where(nodes >= 0, scores * l3_hinge(layer.raw(x_sparse, x_dense, nodes)), -1.0)
            keep = k if level == len(self.layers) - 1 else self.cfg.beam
            order = np.argsort(-combined, axis=1, kind="stable")[:, :keep]
            scores = np.take_along_axis(combined, order, axis=1)
            nodes = np.where(scores >= 0, np.take_along_axis(nodes, order, axis=1), -1)
        return scores, nodes

    @property
    def megabytes(self) -> float:
        return sum(a.nbytes for layer in self.layers for a in layer.arrays().values()) / 2**20

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "linear.json").write_text(json.dumps({"config": self.cfg.model_dump(), "info": self.info,
                                                       "n_labels": self.n_labels, "layers": len(self.layers)},
                                                      indent=2) + "\n")
        self.features.save(folder)
        np.save(folder / "labels.npy", self.labels)
        for level, layer in enumerate(self.layers):
            np.savez(folder / f"layer{level}.npz", **layer.arrays())  # type: ignore[arg-type]  # numpy stub: **dict
        return folder

    @classmethod
    def load(cls, folder: Path) -> LinearChannel:
        meta = json.loads((folder / "linear.json").read_text())
        cfg = LinearConfig.model_validate(meta["config"])
        layers = []
        for level in range(int(meta["layers"])):
            with np.load(folder / f"layer{level}.npz", allow_pickle=False) as arrays:
                layers.append(Layer.from_arrays(dict(arrays)))
        return cls(HybridFeatures.load(folder, cfg), layers, np.load(folder / "labels.npy"), int(meta["n_labels"]),
                   meta.get("info", {}))


def expand(layer: Layer, nodes: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's kept nodes → their children, each carrying its parent's score (−1 pads)."""
    counts = np.where(nodes >= 0, np.diff(layer.children_ptr)[np.maximum(nodes, 0)], 0)
    width = int(counts.sum(axis=1).max(initial=1))
    out_nodes = np.full((len(nodes), width), -1, np.int64)
    out_scores = np.zeros((len(nodes), width), np.float32)
    for row in range(len(nodes)):
        at = 0
        for node, score, count in zip(nodes[row], scores[row], counts[row], strict=True):
            if count:
                lo = layer.children_ptr[node]
                out_nodes[row, at: at + count] = layer.children[lo: lo + count]
                out_scores[row, at: at + count] = score
                at += count
    return out_nodes, out_scores

def sparse_pairs(x: sp.csr_matrix, weights: sp.csr_matrix, weights_t: sp.csr_matrix, nodes: np.ndarray,
                 node_nnz: np.ndarray | None = None, feature_nnz: np.ndarray | None = None) -> np.ndarray:
    """(rows, c) float32 ``x[r] · weights[nodes[r, c]]``.

    Args:
        x: (rows, features) CSR, indices sorted per row.
        weights: (nodes, features) CSR, indices sorted per row (``Layer`` sorts them).
        weights_t: its transpose, (features, nodes) CSR.
        nodes: (rows, c) node ids, each ≥ 0.
        node_nnz, feature_nnz: the weights' row and column lengths (computed when not given; a layer keeps them).

    Returns:
        The dot products, each summed in float32 in ascending feature order: what the CSR product ``x @ weights.T``
        forms, to the bit. Per row, the cheaper of two walks: the listed nodes' weights (a beam's few nodes of a
        large layer) or the query's features' columns (a small layer whose every node is listed).
    """
    out = np.zeros(nodes.shape, np.float32)
    if not (nodes.size and weights.nnz and x.nnz):
        return out
    node_nnz = np.diff(weights.indptr) if node_nnz is None else node_nnz
    feature_nnz = np.diff(weights_t.indptr) if feature_nnz is None else feature_nnz
    nodes = np.ascontiguousarray(nodes, np.int64)
    x_ptr, x_idx = x.indptr.astype(np.int64), x.indices.astype(np.int64)
    by_nodes = node_nnz[nodes].sum(axis=1)
    by_features = np.array([feature_nnz[x_idx[lo:hi]].sum() for lo, hi in zip(x_ptr[:-1], x_ptr[1:], strict=True)])
    # the weights go in as stored (no copy: a leaf layer holds millions of them)
    _pairs_kernel()(x_ptr, x_idx, x.data.astype(np.float32), weights.indptr, weights.indices, weights.data,
                    weights_t.indptr, weights_t.indices, weights_t.data, nodes, by_nodes <= by_features, out)
    return out


@functools.cache
def _pairs_kernel() -> Any:
    from xc_core.classifier.xrlinear.solver import jit

    return jit(_pairs_py)


def _pairs_py(x_ptr, x_idx, x_val, w_ptr, w_idx, w_val, t_ptr, t_idx, t_val, nodes, walk_nodes, out):
    # numba (see sparse_pairs). Either walk adds each node's products in ascending feature order, as the CSR product
    # does: walking a node's sorted weights, or walking the query's sorted features and each one's column.
    n_features, n_nodes = len(t_ptr) - 1, len(w_ptr) - 1
    row_values = np.zeros(n_features, np.float32)
    totals = np.zeros(n_nodes, np.float32)
    for r in range(nodes.shape[0]):
        lo, hi = x_ptr[r], x_ptr[r + 1]
        if hi == lo:
            continue
        if walk_nodes[r]:
            for j in range(lo, hi):
                row_values[x_idx[j]] = x_val[j]
            for c in range(nodes.shape[1]):
                node = nodes[r, c]
                total = np.float32(0.0)
                for j in range(w_ptr[node], w_ptr[node + 1]):
                    total += row_values[w_idx[j]] * w_val[j]
                out[r, c] = total
            for j in range(lo, hi):
                row_values[x_idx[j]] = 0.0
        else:
            for j in range(lo, hi):
                feature, value = x_idx[j], x_val[j]
                for t in range(t_ptr[feature], t_ptr[feature + 1]):
                    totals[t_idx[t]] += value * t_val[t]
            for c in range(nodes.shape[1]):
                out[r, c] = totals[nodes[r, c]]
            for j in range(lo, hi):
                feature = x_idx[j]
                for t in range(t_ptr[feature], t_ptr[feature + 1]):
                    totals[t_idx[t]] = 0.0

#: the registry entry (``channels.py``): its weight is chosen with α and the lexical channel's
SPEC = ChannelSpec("hybrid", "linear_weight", "joint", grid=lambda cfg: cfg.linear_weights,
                   fit=lambda data, cfg: LinearChannel.fit(data.texts, data.vectors, data.labels,
                                                           cfg.linear.model_copy(update={"seed": cfg.seed})),
                   load=lambda folder: LinearChannel.load(folder / HYBRID_DIR), saved_as=HYBRID_DIR)
