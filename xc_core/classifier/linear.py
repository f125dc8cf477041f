"""The hybrid channel of the fused search: XR-Linear on sparse ⊕ dense features, inside xc.

Why: W (``train.py``) is one 384-d vector per label over the frozen sentence vectors and forgets the surface forms
(site names, misspellings, codes) a sparse linear model keeps; on the labels with training positives a one-minute
TF-IDF linear model (PECOS XR-Linear) was level with xc. XR-Transformer (Zhang et al., NeurIPS 2021) ranks with
linear models on the *concatenation* of TF-IDF and neural features and beats both parts. PECOS itself pins
numpy < 2, so xc carries the method (Yu et al., "PECOS", JMLR 2022), with PECOS's defaults:

- **features** (:class:`HybridFeatures`): TF-IDF over word 1..2-grams and character 2..4-grams within words (fitted
  on the training documents), L2-normalised as one block, beside the encoder's unit vector; each block weighted by
  its ``*_weight`` (equal by default) and the row L2-normalised.
- **label tree** (:func:`label_tree`): balanced spherical 2-means of the labels' PIFA embeddings (a label = the
  normalised sum of its positive documents' encoder vectors), to leaves of ≤ ``max_leaf`` labels, cut into layers
  of 16, 256, … nodes as PECOS's cluster chain. Clustered on the dense block only (PECOS clusters on all features).
- **solver**: at every layer one L2-regularised squared-hinge SVM per node (liblinear's dual coordinate descent,
  ``L2R_L2LOSS_SVC_DUAL``, C = 1, bias 1, random order per pass) on the documents under its parent node, positive
  where they have a label under the node (teacher-forced negatives); weights below ``prune`` are dropped.
- **search**: beam search down the tree (``beam`` nodes per layer); a label's score is the product of
  ``exp(-max(0, 1 - s) ** 3)`` (PECOS's ``l3-hinge``) along its path, in (0, 1]. Labels without a training positive
  have no classifier and are never in the beam.

The solver is checked against libpecos on the same features (``experiments/solver_parity/``). Stored as plain
arrays (vocabularies JSON, idf, one ``.npz`` per layer), never a pickle.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

HYBRID_DIR = "hybrid"  # sub-folder of a classifier folder, present only when the served fusion uses the channel
TOKENS = r"(?u)\b\w+\b"


class LinearConfig(BaseModel):
    """The hybrid channel's settings: one for every data set (PECOS's defaults where PECOS has one)."""

    features: Literal["hybrid", "sparse", "dense"] = Field(
        default="hybrid", description="TF-IDF ⊕ the encoder's vector, TF-IDF alone, or the encoder's vector alone")
    sparse_weight: float = Field(default=1.0, ge=0, description="weight of the unit TF-IDF block")
    dense_weight: float = Field(default=1.0, ge=0, description="weight of the unit encoder block")
    word_ngrams: int = Field(default=2, ge=1, le=3, description="word n-grams 1..word_ngrams")
    char_ngrams: tuple[int, int] = Field(default=(2, 4), description="character n-grams (within words)")
    char_min_df: int = Field(default=2, ge=1, description="character n-grams seen in fewer documents are dropped")
    cost: float = Field(default=1.0, gt=0, description="SVM C (PECOS/liblinear default 1)")
    bias: float = Field(default=1.0, ge=0, description="value of the constant feature (PECOS default 1)")
    max_iter: int = Field(default=100, ge=1, description="dual coordinate-descent passes per node at most (PECOS)")
    tolerance: float = Field(default=0.1, gt=0, description="stop a node when its projected gradient is this small")
    prune: float = Field(default=0.1, ge=0, description="weights with |w| below this are dropped (PECOS threshold), "
                         "in both blocks")
    max_leaf: int = Field(default=100, ge=2, description="labels per bottom cluster of the tree at most (PECOS)")
    branching: int = Field(default=16, ge=2, description="children per tree node (PECOS nr_splits)")
    beam: int = Field(default=20, ge=1, description="tree nodes kept per layer in the beam search (PECOS's default "
                      "only_topk of an upper layer)")
    seed: int = 0

    @property
    def uses_sparse(self) -> bool:
        return self.features != "dense" and self.sparse_weight > 0

    @property
    def uses_dense(self) -> bool:
        return self.features != "sparse" and self.dense_weight > 0


def _vectorizers(cfg: LinearConfig, vocabularies: tuple[dict[str, int], dict[str, int]] | None = None
                 ) -> tuple[Any, Any]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    word_vocab, char_vocab = vocabularies if vocabularies is not None else (None, None)
    word = TfidfVectorizer(token_pattern=TOKENS, ngram_range=(1, cfg.word_ngrams), dtype=np.float32,
                           vocabulary=word_vocab)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=tuple(cfg.char_ngrams), dtype=np.float32,
                           min_df=1 if char_vocab else cfg.char_min_df, vocabulary=char_vocab)
    return word, char


@dataclass
class HybridFeatures:
    """text + encoder vector → (unit-scaled TF-IDF block as CSR, weighted encoder block): the rows of the solver."""

    cfg: LinearConfig
    word_vocabulary: dict[str, int] = field(default_factory=dict)
    char_vocabulary: dict[str, int] = field(default_factory=dict)
    word_idf: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    char_idf: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @classmethod
    def fit(cls, texts: list[str], cfg: LinearConfig) -> HybridFeatures:
        if not cfg.uses_sparse:
            return cls(cfg)
        word, char = _vectorizers(cfg)
        word.fit(texts)
        try:
            char.fit(texts)
        except ValueError:  # no character n-gram reaches min_df (a handful of documents): word n-grams alone
            char = None
        return cls(cfg, dict(word.vocabulary_), dict(char.vocabulary_) if char is not None else {},
                   word.idf_.astype(np.float32), char.idf_.astype(np.float32) if char is not None
                   else np.zeros(0, np.float32))

    @property
    def n_sparse(self) -> int:
        return len(self.word_vocabulary) + len(self.char_vocabulary)

    @functools.cached_property
    def _transformers(self) -> tuple[Any, Any]:
        word, char = _vectorizers(self.cfg, (self.word_vocabulary, self.char_vocabulary or {"": 0}))
        word.idf_ = self.word_idf
        if self.char_vocabulary:
            char.idf_ = self.char_idf
        return word, char

    def sparse(self, texts: list[str]) -> sp.csr_matrix:
        """(n, n_sparse) TF-IDF rows, L2-normalised as one block (word ⊕ character n-grams)."""
        from sklearn.preprocessing import normalize

        if not self.cfg.uses_sparse:
            return sp.csr_matrix((len(texts), 0), dtype=np.float32)
        word, char = self._transformers
        blocks = [word.transform(texts)]
        if self.char_vocabulary:
            blocks.append(char.transform(texts))
        return cast(sp.csr_matrix, normalize(sp.hstack(blocks, format="csr", dtype=np.float32)))

    def rows(self, texts: list[str], vectors: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
        """The solver's rows: (sparse block, dense block), each weighted, together unit-norm per row."""
        cfg = self.cfg
        w_sparse = cfg.sparse_weight if cfg.uses_sparse else 0.0
        w_dense = cfg.dense_weight if cfg.uses_dense else 0.0
        norm = float(np.sqrt(w_sparse ** 2 + w_dense ** 2)) or 1.0
        sparse = self.sparse(texts) * np.float32(w_sparse / norm)
        if w_dense == 0:
            return sp.csr_matrix(sparse, dtype=np.float32), np.zeros((len(texts), 0), np.float32)
        unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return sp.csr_matrix(sparse, dtype=np.float32), (unit * (w_dense / norm)).astype(np.float32)

    def save(self, folder: Path) -> None:
        (folder / "features.json").write_text(json.dumps(
            {"word_vocabulary": self.word_vocabulary, "char_vocabulary": self.char_vocabulary}))
        np.save(folder / "word_idf.npy", self.word_idf)
        np.save(folder / "char_idf.npy", self.char_idf)

    @classmethod
    def load(cls, folder: Path, cfg: LinearConfig) -> HybridFeatures:
        vocabularies = json.loads((folder / "features.json").read_text())
        return cls(cfg, vocabularies["word_vocabulary"], vocabularies["char_vocabulary"],
                   np.load(folder / "word_idf.npy"), np.load(folder / "char_idf.npy"))


@dataclass
class Layer:
    """One level of the label tree: a linear classifier per node (a cluster of labels, or a label at the bottom).

    ``children_ptr``/``children``: CSR from each node to the next layer's nodes (empty at the bottom)."""

    sparse_weights: sp.csr_matrix  # (n_nodes, n_sparse) pruned
    dense_weights: np.ndarray  # (n_nodes, dim)
    biases: np.ndarray  # (n_nodes,)
    children_ptr: np.ndarray  # (n_nodes + 1,)
    children: np.ndarray

    @property
    def size(self) -> int:
        return len(self.biases)

    @functools.cached_property
    def _sparse_t(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.sparse_weights.T)

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
            out += _sparse_pairs(x_sparse, self._sparse_t, safe)
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
class LinearChannel:
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
        paths = label_tree(_pifa(y_trained, vectors), cfg.max_leaf, cfg.branching, cfg.seed)
        featurized = time.perf_counter()
        layers, previous = [], None
        for level, assign in enumerate(paths):
            y_level = _level_targets(y_trained, assign)
            ptr, members, signs = _level_problems(y_level, previous, assign if level else None, paths, level)
            w_ptr, w_idx, w_val, dense, bias = _solve_all(
                ptr, members, signs, x_sparse.indptr.astype(np.int64), x_sparse.indices.astype(np.int64),
                x_sparse.data.astype(np.float32), np.ascontiguousarray(x_dense, np.float32), features.n_sparse,
                float(cfg.cost), float(cfg.bias), int(cfg.max_iter), float(cfg.tolerance), float(cfg.prune),
            int(cfg.seed) + level)
            n_nodes = len(ptr) - 1
            children_ptr, children = _children(paths, level, n_nodes)
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

    def _beam(self, x_sparse: sp.csr_matrix, x_dense: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        n = x_sparse.shape[0]
        nodes = np.tile(np.arange(self.layers[0].size), (n, 1))
        scores = np.ones(nodes.shape, np.float32)
        for level, layer in enumerate(self.layers):
            if level:
                nodes, scores = _expand(self.layers[level - 1], nodes, scores)
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


def _expand(layer: Layer, nodes: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _pifa(y: sp.csr_matrix, vectors: np.ndarray) -> np.ndarray:
    """(labels, dim) unit sums of each label's positive documents' encoder vectors (PECOS's PIFA, dense block)."""
    emb = np.asarray(y.T @ vectors, np.float32)
    return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)


def label_tree(emb: np.ndarray, max_leaf: int, branching: int, seed: int) -> list[np.ndarray]:
    """Balanced hierarchical 2-means of the label embeddings (Parabel's split, log2(branching) times per layer): per
    layer, each label's node id; the last entry is the labels themselves (ids 0..L-1)."""
    from xc_core import seeds
    from xc_core.seeds import Stream

    n = len(emb)
    step = max(1, int(round(np.log2(branching))))
    # PECOS's chain: a balanced binary tree with leaves of ≤ max_leaf labels, cut into layers of 16, 256, ... nodes
    depth = int(np.ceil(np.log2(n / max_leaf))) if n > max_leaf else 0
    rng = seeds.rng(seed, Stream.LABEL_TREE)
    assign = np.zeros(n, np.int64)
    layers: list[np.ndarray] = []
    for d in range(1, depth + 1):
        assign = _split_all(emb, assign, rng)
        if d % step == 0 or d == depth:
            layers.append(assign.copy())
    layers.append(np.arange(n, dtype=np.int64))
    return layers


def _split_all(emb: np.ndarray, assign: np.ndarray, rng: np.random.Generator, iters: int = 20) -> np.ndarray:
    """Every cluster cut in two balanced halves by spherical 2-means: child ids 2c and 2c+1."""
    out = assign * 2
    order = np.argsort(assign, kind="stable")
    bounds = np.flatnonzero(np.diff(np.concatenate([[-1], assign[order], [-1]])))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        members = order[lo:hi]
        if len(members) < 2:
            continue
        x = emb[members]
        centres = x[rng.choice(len(members), 2, replace=False)]
        for _ in range(iters):
            gap = x @ centres[0] - x @ centres[1]
            ranked = np.argsort(-gap, kind="stable")
            left = np.zeros(len(members), bool)
            left[ranked[: len(members) // 2]] = True
            centres = np.stack([x[left].sum(0), x[~left].sum(0)])
            centres /= np.maximum(np.linalg.norm(centres, axis=1, keepdims=True), 1e-12)
        out[members[~left]] += 1
    return out


def _level_targets(y: sp.csr_matrix, assign: np.ndarray) -> sp.csr_matrix:
    """(docs, nodes) 1 where a document has a positive label under the node (node ids made dense 0..n-1)."""
    _, dense_ids = np.unique(assign, return_inverse=True)
    nodes = sp.csr_matrix((np.ones(len(assign), np.float32), (np.arange(len(assign)), dense_ids)))
    out = sp.csr_matrix(y @ nodes)
    out.data[:] = 1.0
    return out


def _parents(paths: list[np.ndarray], level: int) -> np.ndarray:
    """For each node of ``level`` (dense ids), its parent's dense id in ``level - 1``."""
    _, child = np.unique(paths[level], return_index=True)
    _, parent_ids = np.unique(paths[level - 1], return_inverse=True)
    return parent_ids[child]


def _children(paths: list[np.ndarray], level: int, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    if level == len(paths) - 1:
        return np.zeros(n_nodes + 1, np.int64), np.zeros(0, np.int64)
    parent = _parents(paths, level + 1)
    order = np.argsort(parent, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(parent, minlength=n_nodes))]).astype(np.int64)
    return ptr, order.astype(np.int64)


def _level_problems(y_level: sp.csr_matrix, y_parent: sp.csr_matrix | None, assign: np.ndarray | None,
                    paths: list[np.ndarray], level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each node's training rows (CSR-like) and ±1 signs: the documents under its parent (every document at the
    top), positive where they have a label under the node (PECOS's teacher-forced negatives)."""
    n_docs, n_nodes = y_level.shape
    if y_parent is None:
        members = np.tile(np.arange(n_docs, dtype=np.int64), n_nodes)
        ptr = np.arange(n_nodes + 1, dtype=np.int64) * n_docs
    else:
        parent = _parents(paths, level)
        by_parent = sp.csc_matrix(y_parent)
        counts = np.diff(by_parent.indptr)[parent]
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        starts = by_parent.indptr[parent]
        offsets = np.arange(ptr[-1]) - np.repeat(ptr[:-1], counts)
        members = by_parent.indices[np.repeat(starts, counts) + offsets].astype(np.int64)
    nodes = np.repeat(np.arange(n_nodes), np.diff(ptr))
    positives = sp.csc_matrix(y_level)
    keys = np.sort(positives.indices.astype(np.int64) * n_nodes
                   + np.repeat(np.arange(n_nodes), np.diff(positives.indptr)))
    signs = np.where(np.isin(members * n_nodes + nodes, keys, assume_unique=False), 1.0, -1.0).astype(np.float32)
    return ptr, members, signs


def _sparse_pairs(x: sp.csr_matrix, weights_t: sp.csr_matrix, nodes: np.ndarray) -> np.ndarray:
    """(rows, c) ``x[r] · w[nodes[r, c]]`` with ``weights_t`` the (features, nodes) transpose of the weights."""
    product = sp.csr_matrix(x @ weights_t)  # (rows, nodes): only nodes sharing a feature with the row
    product.sort_indices()
    out = np.zeros(nodes.shape, np.float32)
    for r in range(nodes.shape[0]):
        lo, hi = product.indptr[r], product.indptr[r + 1]
        if lo == hi:
            continue
        ids, values = product.indices[lo:hi], product.data[lo:hi]
        at = np.minimum(np.searchsorted(ids, nodes[r]), len(ids) - 1)
        out[r] = np.where(ids[at] == nodes[r], values[at], 0.0)
    return out


def _jit(function: Callable[..., Any]) -> Callable[..., Any]:
    import numba

    return cast(Callable[..., Any], numba.njit(cache=True, nogil=True)(function))


@functools.cache
def _kernels() -> dict[str, Callable[..., Any]]:
    """numba-compiled loops (compiled once per process, cached on disk beside this module)."""
    return {"solve": _jit(_solve_all_py)}


def _solve_all(*args: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return cast(tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], _kernels()["solve"](*args))


def _solve_all_py(label_ptr, members, signs, x_ptr, x_idx, x_val, x_dense, n_sparse, cost, bias_value,
                  max_iter, tolerance, prune, seed=0):
    """liblinear's dual coordinate descent for the L2-regularised squared-hinge SVM (``L2R_L2LOSS_SVC_DUAL``), one
    node after another over its own rows, each pass in a fresh random order as liblinear's (seeded: repeatable);
    the weights accumulate in float64 and are stored in float32."""
    np.random.seed(seed)
    n_labels = len(label_ptr) - 1
    dim = x_dense.shape[1]
    diag = 0.5 / cost
    w_sparse = np.zeros(n_sparse, np.float64)
    w_dense = np.zeros(dim, np.float64)
    touched = np.zeros(n_sparse, np.bool_)
    touched_list = np.empty(n_sparse, np.int64)
    out_ptr = np.zeros(n_labels + 1, np.int64)
    capacity = 1 << 20
    out_idx = np.empty(capacity, np.int64)
    out_val = np.empty(capacity, np.float32)
    dense_w = np.zeros((n_labels, dim), np.float32)
    biases = np.zeros(n_labels, np.float32)
    for label in range(n_labels):
        lo, hi = label_ptr[label], label_ptr[label + 1]
        n_touched = 0
        if hi > lo:
            size = hi - lo
            alpha = np.zeros(size, np.float64)
            q_diag = np.empty(size, np.float64)
            for t in range(size):
                i = members[lo + t]
                sq = bias_value * bias_value + diag
                for j in range(x_ptr[i], x_ptr[i + 1]):
                    sq += x_val[j] * x_val[j]
                    f = x_idx[j]
                    if not touched[f]:
                        touched[f] = True
                        touched_list[n_touched] = f
                        n_touched += 1
                for d in range(dim):
                    sq += x_dense[i, d] * x_dense[i, d]
                q_diag[t] = sq
            w_dense[:] = 0.0
            w_bias = 0.0
            order = np.arange(size)
            for _ in range(max_iter):
                worst = 0.0
                np.random.shuffle(order)
                for t in order:
                    i = members[lo + t]
                    y = signs[lo + t]
                    margin = w_bias * bias_value
                    for j in range(x_ptr[i], x_ptr[i + 1]):
                        margin += w_sparse[x_idx[j]] * x_val[j]
                    for d in range(dim):
                        margin += w_dense[d] * x_dense[i, d]
                    grad = y * margin - 1.0 + diag * alpha[t]
                    projected = grad if alpha[t] > 0 else min(grad, 0.0)
                    if abs(projected) > worst:
                        worst = abs(projected)
                    if projected != 0.0:
                        new = max(alpha[t] - grad / q_diag[t], 0.0)
                        step = (new - alpha[t]) * y
                        alpha[t] = new
                        for j in range(x_ptr[i], x_ptr[i + 1]):
                            w_sparse[x_idx[j]] += step * x_val[j]
                        for d in range(dim):
                            w_dense[d] += step * x_dense[i, d]
                        w_bias += step * bias_value
                if worst < tolerance:
                    break
            biases[label] = w_bias * bias_value
            for d in range(dim):
                if abs(w_dense[d]) >= prune:
                    dense_w[label, d] = w_dense[d]
        start = out_ptr[label]
        kept = 0
        for t in range(n_touched):
            f = touched_list[t]
            value = w_sparse[f]
            w_sparse[f] = 0.0
            touched[f] = False
            if abs(value) >= prune:
                if start + kept >= capacity:
                    capacity *= 2
                    grown_idx = np.empty(capacity, np.int64)
                    grown_val = np.empty(capacity, np.float32)
                    grown_idx[: start + kept] = out_idx[: start + kept]
                    grown_val[: start + kept] = out_val[: start + kept]
                    out_idx, out_val = grown_idx, grown_val
                out_idx[start + kept] = f
                out_val[start + kept] = value
                kept += 1
        order = np.argsort(out_idx[start: start + kept])
        out_idx[start: start + kept] = out_idx[start: start + kept][order]
        out_val[start: start + kept] = out_val[start: start + kept][order]
        out_ptr[label + 1] = start + kept
    total = out_ptr[n_labels]
    return out_ptr, out_idx[:total].copy(), out_val[:total].copy(), dense_w, biases
