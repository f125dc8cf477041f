"""ANN proxy neighbours (TextGNN §4.2.2): nodes without native graph neighbours borrow the neighbours of
their nearest text neighbour that has some, found with a faiss inner-product index over unit vectors."""

from __future__ import annotations

import numpy as np
import polars as pl


def nearest(queries: np.ndarray, pool: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k cosine neighbours of each query row among ``pool`` rows: (scores, ids), best first."""
    import faiss

    index = faiss.IndexFlatIP(pool.shape[1])
    index.add(np.ascontiguousarray(pool, dtype=np.float32))
    return index.search(np.ascontiguousarray(queries, dtype=np.float32), min(k, len(pool)))


def similar_text(texts: list[str], has_native: np.ndarray, embeddings: np.ndarray, k: int = 1,
                 node_type: str = "query") -> pl.DataFrame:
    """``similar_text(node, neighbour, cosine, node_type, proxy)``: for each node without native
    neighbours, its k most similar nodes that have some (a node is never its own neighbour)."""
    lacking = np.flatnonzero(~has_native)
    donors = np.flatnonzero(has_native)
    schema = {"node": pl.String, "neighbour": pl.String, "cosine": pl.Float32, "node_type": pl.String,
              "proxy": pl.Boolean, "node_idx": pl.Int64, "neighbour_idx": pl.Int64}
    if not len(lacking) or not len(donors):
        return pl.DataFrame(schema=schema)
    scores, ids = nearest(embeddings[lacking], embeddings[donors], k)
    rows = np.repeat(lacking, scores.shape[1])
    cols = donors[ids.ravel()]
    valid = ids.ravel() >= 0
    return pl.DataFrame({
        "node": [texts[i] for i in rows[valid]], "neighbour": [texts[i] for i in cols[valid]],
        "cosine": scores.ravel()[valid], "node_type": node_type, "proxy": True,
        "node_idx": rows[valid], "neighbour_idx": cols[valid],
    }, schema=schema)


def proxy_edges(edges: np.ndarray, n_nodes: int, neighbour_of: dict[int, int]) -> np.ndarray:
    """Edges a node inherits from its proxy neighbour: for node→donor, every (donor, anchor) becomes
    (node, anchor)."""
    if not neighbour_of or not len(edges):
        return np.empty((0, 2), dtype=np.int64)
    order = np.argsort(edges[:, 0], kind="stable")
    sorted_edges = edges[order]
    bounds = np.searchsorted(sorted_edges[:, 0], np.arange(n_nodes + 1))
    nodes = np.fromiter(neighbour_of.keys(), dtype=np.int64)
    donors = np.fromiter(neighbour_of.values(), dtype=np.int64)
    counts = bounds[donors + 1] - bounds[donors]
    starts = (np.repeat(bounds[donors], counts)
              + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)))
    return np.stack([np.repeat(nodes, counts), sorted_edges[starts, 1]], axis=1)
