"""The label tree: balanced spherical 2-means of the labels' PIFA embeddings, cut into layers (PECOS's chain)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def pifa(y: sp.csr_matrix, vectors: np.ndarray) -> np.ndarray:
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


def level_targets(y: sp.csr_matrix, assign: np.ndarray) -> sp.csr_matrix:
    """(docs, nodes) 1 where a document has a positive label under the node (node ids made dense 0..n-1)."""
    _, dense_ids = np.unique(assign, return_inverse=True)
    nodes = sp.csr_matrix((np.ones(len(assign), np.float32), (np.arange(len(assign)), dense_ids)))
    out = sp.csr_matrix(y @ nodes)
    out.data[:] = 1.0
    return out


def parents(paths: list[np.ndarray], level: int) -> np.ndarray:
    """For each node of ``level`` (dense ids), its parent's dense id in ``level - 1``."""
    _, child = np.unique(paths[level], return_index=True)
    _, parent_ids = np.unique(paths[level - 1], return_inverse=True)
    return parent_ids[child]


def node_children(paths: list[np.ndarray], level: int, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    if level == len(paths) - 1:
        return np.zeros(n_nodes + 1, np.int64), np.zeros(0, np.int64)
    parent = parents(paths, level + 1)
    order = np.argsort(parent, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(parent, minlength=n_nodes))]).astype(np.int64)
    return ptr, order.astype(np.int64)
