"""The per-node solver: liblinear's dual coordinate descent for the L2-regularised squared-hinge SVM, numba-compiled."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.xrlinear.tree import parents


def level_problems(y_level: sp.csr_matrix, y_parent: sp.csr_matrix | None, assign: np.ndarray | None,
                    paths: list[np.ndarray], level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each node's training rows (CSR-like) and ±1 signs: the documents under its parent (every document at the
    top), positive where they have a label under the node (PECOS's teacher-forced negatives)."""
    n_docs, n_nodes = y_level.shape
    if y_parent is None:
        members = np.tile(np.arange(n_docs, dtype=np.int64), n_nodes)
        ptr = np.arange(n_nodes + 1, dtype=np.int64) * n_docs
    else:
        parent = parents(paths, level)
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

def jit(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` compiled by numba without the GIL, its machine code cached on disk beside its module."""
    import numba

    return cast(Callable[..., Any], numba.njit(cache=True, nogil=True)(function))


@functools.cache
def _kernels() -> dict[str, Callable[..., Any]]:
    """numba-compiled loops (compiled once per process, cached on disk beside this module)."""
    return {"solve": jit(_solve_all_py)}


def solve_all(*args: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
