"""Which seen labels a label borrows classifiers from (IRENE §4.1, "Associated seen items").

- a **seen** label: up to ``k`` seen labels that share training documents with it, most text-similar first;
- a **novel** label u (zero-shot): the top-K seen labels by text similarity E(z_j)·E(z_u) (the *shortlist*),
  kept when their classifier agrees, w_j·E(z_u) ≥ τ0 (the *refinement*), best k by that score;
- **one-shot** (a revealed query x_u): the refined shortlist is voted on by w_j·E(x_u) ≥ τ1 too — labels passing
  both come first (max-voting), ties by the larger of the two scores.

Row indices here are positions in the seen-label table (``seen_rows``), −1 pads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp


def seen_associations(y_train: sp.csr_matrix, label_vecs: np.ndarray, seen_rows: np.ndarray, k: int) -> np.ndarray:
    """(len(seen_rows), k): for each seen label, co-clicked seen labels ranked by text similarity."""
    y = y_train.tocsc()[:, seen_rows].tocsr().astype(np.float32)
    co = (y.T @ y).tocsr()
    co.setdiag(0)
    co.eliminate_zeros()
    vecs = label_vecs[seen_rows]
    out = np.full((len(seen_rows), k), -1, dtype=np.int64)
    for i in range(len(seen_rows)):
        partners = co.indices[co.indptr[i]:co.indptr[i + 1]]
        if len(partners) and k:
            sims = vecs[partners] @ vecs[i]
            best = partners[np.lexsort((partners, -sims))][:k]
            out[i, :len(best)] = best
    return out


def seen_text_index(seen_vecs: np.ndarray) -> Any:
    """An exact inner-product index over the seen labels' text vectors: built once, it shortlists any number of
    batches (streaming would otherwise copy every seen vector again per batch)."""
    import faiss

    index = faiss.IndexFlatIP(seen_vecs.shape[1])
    index.add(np.ascontiguousarray(seen_vecs, dtype=np.float32))
    return index


def text_neighbours(vecs: np.ndarray, k: int) -> np.ndarray:
    """(n, k) each row's k most text-similar other rows (exact MIPS, itself excluded): the paper's association of a
    seen item by its encoder representation, the same rule a novel label's shortlist follows."""
    if k == 0 or len(vecs) < 2:
        return np.full((len(vecs), k), -1, dtype=np.int64)
    ids = shortlist(vecs, vecs, k + 1)
    ids = np.where(ids == np.arange(len(vecs))[:, None], -1, ids)
    order = np.argsort(ids < 0, axis=1, kind="stable")[:, :k]
    out = np.take_along_axis(ids, order, axis=1)
    return np.pad(out, ((0, 0), (0, k - out.shape[1])), constant_values=-1) if out.shape[1] < k else out


def shortlist(novel_vecs: np.ndarray, seen_vecs: np.ndarray | Any, k: int) -> np.ndarray:
    """(n, K) the K most text-similar seen labels of each novel label (maximum inner product, exact);
    ``seen_vecs``: the seen labels' text vectors or a :func:`seen_text_index` over them."""
    index = seen_text_index(seen_vecs) if isinstance(seen_vecs, np.ndarray) else seen_vecs
    _, ids = index.search(np.ascontiguousarray(novel_vecs, dtype=np.float32), min(k, int(index.ntotal)))
    return ids.astype(np.int64)


_CHUNK = 512  # rows refined at once: (rows, K, D) gathered classifiers stay under ~80 MB


def refine(candidates: np.ndarray, novel_vecs: np.ndarray, weights: np.ndarray, tau0: float, k: int,
           query_vecs: np.ndarray | None = None, tau1: float = 0.0) -> np.ndarray:
    """(n, k) the associations kept from ``candidates`` (seen rows) by the classifiers (``weights``: unit rows of
    W over the seen labels); with ``query_vecs`` (one-shot) the revealed query votes too."""
    if len(candidates) > _CHUNK:
        return np.concatenate([refine(candidates[i:i + _CHUNK], novel_vecs[i:i + _CHUNK], weights, tau0, k,
                                      None if query_vecs is None else query_vecs[i:i + _CHUNK], tau1)
                               for i in range(0, len(candidates), _CHUNK)])
    safe = np.maximum(candidates, 0)
    text_score = np.einsum("nkd,nd->nk", weights[safe], novel_vecs)
    keep = (candidates >= 0) & (text_score >= tau0)
    votes = keep.astype(np.int64)
    best = text_score
    if query_vecs is not None:
        query_score = np.einsum("nkd,nd->nk", weights[safe], query_vecs)
        votes = votes + (keep & (query_score >= tau1))
        best = np.maximum(text_score, query_score)
    rank = np.where(keep, votes * 10.0 + best, -np.inf)  # votes first (scores are cosines in [-1, 1])
    order = np.argsort(-rank, axis=1, kind="stable")[:, :k]
    chosen = np.take_along_axis(candidates, order, axis=1)
    out = np.where(np.isfinite(np.take_along_axis(rank, order, axis=1)), chosen, -1)
    # a shortlist shorter than k (K < k, or fewer seen labels) still fills the (n, k) association table
    return np.pad(out, ((0, 0), (0, k - out.shape[1])), constant_values=-1) if out.shape[1] < k else out


def novel_associations(novel_vecs: np.ndarray, seen_vecs: np.ndarray, weights: np.ndarray, shortlist_k: int,
                       tau0: float, k: int, query_vecs: np.ndarray | None = None, tau1: float = 0.0) -> np.ndarray:
    if len(seen_vecs) == 0 or k == 0:
        return np.full((len(novel_vecs), k), -1, dtype=np.int64)
    return refine(shortlist(novel_vecs, seen_vecs, shortlist_k), novel_vecs, weights, tau0, k, query_vecs, tau1)
