"""The graph OAK convolves over: every anchor of every anchor set is a node (equal texts across sets are one
node), train documents link to nodes through ``doc_edges`` and test documents — for the oracle linker only —
through ``test_edges``. Neighbour lists are (rows, N) node ids with −1 padding."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset


@dataclass(frozen=True)
class NodeTable:
    texts: list[str]  # node id → text
    node_of: dict[str, np.ndarray]  # anchor set → (its anchor index → node id)

    @classmethod
    def of(cls, dataset: XCDataset) -> NodeTable:
        ids: dict[str, int] = {}
        node_of = {}
        for name, aset in dataset.anchor_sets.items():
            node_of[name] = np.array([ids.setdefault(t, len(ids)) for t in aset.texts], dtype=np.int64)
        return cls(list(ids), node_of)


def _incidence(rows: list[np.ndarray], cols: list[np.ndarray], n_rows: int, n_cols: int) -> sp.csr_matrix:
    r = np.concatenate(rows) if rows else np.empty(0, np.int64)
    c = np.concatenate(cols) if cols else np.empty(0, np.int64)
    matrix = sp.csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=(n_rows, n_cols))
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


def train_neighbours(dataset: XCDataset, nodes: NodeTable) -> sp.csr_matrix:
    """Train documents × nodes: the union of every anchor set's ``doc_edges``."""
    edges = [(a.doc_edges, nodes.node_of[name]) for name, a in dataset.anchor_sets.items() if len(a.doc_edges)]
    return _incidence([e[:, 0] for e, _ in edges], [m[e[:, 1]] for e, m in edges], len(dataset.train_texts),
                      len(nodes.texts))


def oracle_neighbours(dataset: XCDataset, node_texts: list[str]) -> sp.csr_matrix:
    """Test documents × the model's nodes: the true graph neighbours (``AnchorSet.test_edges``, where a data set
    has them), matched to the trained node table by text; an anchor the table lacks is left out."""
    position = {t: i for i, t in enumerate(node_texts)}
    rows, cols = [], []
    for aset in dataset.anchor_sets.values():
        edges = getattr(aset, "test_edges", None)
        if edges is None or len(edges) == 0:
            continue
        edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        found = np.array([position.get(aset.texts[j], -1) for j in edges[:, 1]], dtype=np.int64)
        rows.append(edges[found >= 0, 0])
        cols.append(found[found >= 0])
    return _incidence(rows, cols, len(dataset.test_texts), len(node_texts))


def sample_neighbours(matrix: sp.csr_matrix, rows: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """(len(rows), k) up to k of each row's nodes drawn without replacement, −1 padding."""
    out = np.full((len(rows), k), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        found = matrix.indices[matrix.indptr[row]:matrix.indptr[row + 1]]
        if len(found):
            take = rng.choice(found, min(k, len(found)), replace=False) if len(found) > k else found
            out[i, :len(take)] = take
    return out


def first_neighbours(matrix: sp.csr_matrix, rows: np.ndarray, k: int) -> np.ndarray:
    """(len(rows), width) each row's first nodes (at most k), −1 padding; width: the longest row (≤ k)."""
    counts = np.minimum(np.diff(matrix.indptr)[rows], k) if len(rows) else np.zeros(0, np.int64)
    out = np.full((len(rows), int(counts.max(initial=0))), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, :counts[i]] = matrix.indices[matrix.indptr[row]:matrix.indptr[row] + counts[i]]
    return out
