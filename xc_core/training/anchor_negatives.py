"""Hard negatives for RAMEN's graph regularizers (``TrainConfig.anchor_negatives``).

RAMEN's regularizer asks a node (a training document, or a label) to pick its own anchor among the batch's other
rows' anchors. Those are random texts, which an untrained encoder already tells apart from the node's anchor: the
regularizer's loss starts small and its gradient separates the anchor from unrelated texts, while the test asks a
query to rank its label above *similar* labels (docs/results/issue-43.md, the oracle anchor set). NGAME mines
hard negatives from the encoder's shortlist for the task loss; this module does the same for each regularized side
of each anchor set: before every epoch, each node's ``per_node`` most similar anchors of the set (by the current
encoder's cosine) that are not its own anchors and do not read as the node itself. A step then adds one of them,
drawn uniformly, to the row's regularizer softmax (``batches.BatchBuilder``, ``losses.SoftmaxGraphRegularizer``).

Candidates are the set's anchors that some node of that side reaches, so a set restricted to a training
subsample is mined over its own neighbourhood, not over every anchor text of the data set.

Off by default: on the oracle anchor set the negatives raise the regularizer's loss but did not move test P@1
(docs/results/issue-43.md, "Hard negatives in the regularizer", has the figures).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet

#: rows scored against the candidates at once (bounds the dense score block to chunk × candidates floats)
CHUNK = 1024


def side_key(kind: str, name: str) -> str:
    """The pool's key for one regularized side of one set, as the trainer's terms name it: ``doc/<set>``."""
    return f"{kind}/{name}"


def mine_anchor_negatives(node_emb: np.ndarray, candidate_emb: np.ndarray, candidates: np.ndarray,
                          own: sp.csr_matrix, excluded: np.ndarray, per_node: int) -> np.ndarray:
    """(n_nodes, per_node) anchor ids, −1 padded: each node's highest-scored ``candidates`` (ids into the set's
    texts; ``candidate_emb`` their unit vectors) that are not in its ``own`` row (nodes × anchors) and not its
    ``excluded`` anchor (an anchor id whose text equals the node's, −1 for none), best first (ties by position)."""
    out = np.full((len(node_emb), per_node), -1, dtype=np.int64)
    if not len(candidates) or not per_node:
        return out
    column = np.full(own.shape[1], -1, dtype=np.int64)
    column[candidates] = np.arange(len(candidates))
    own = sp.csr_matrix(own)
    take = min(per_node, len(candidates))
    for start in range(0, len(node_emb), CHUNK):
        stop = min(start + CHUNK, len(node_emb))
        scores = node_emb[start:stop] @ candidate_emb.T
        block = own[start:stop].tocoo()
        mine = column[block.col]
        scores[block.row[mine >= 0], mine[mine >= 0]] = -np.inf
        same = column[np.maximum(excluded[start:stop], 0)]
        hit = (excluded[start:stop] >= 0) & (same >= 0)
        scores[np.flatnonzero(hit), same[hit]] = -np.inf
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        top_scores = np.take_along_axis(scores, top, axis=1)
        order = np.lexsort((top, -top_scores), axis=1)
        top, top_scores = np.take_along_axis(top, order, axis=1), np.take_along_axis(top_scores, order, axis=1)
        out[start:stop, :take] = np.where(np.isfinite(top_scores), candidates[top], -1)
    return out


def side_pool(anchor_set: AnchorSet, kind: str, node_texts: list[str], per_node: int,
              encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """(len(node_texts), per_node) mined anchor ids for one side of ``anchor_set`` (``kind`` ``doc`` or
    ``label``), −1 padded; nodes without an edge on that side get none."""
    edges = anchor_set.doc_edges if kind == "doc" else anchor_set.label_edges
    pool = np.full((len(node_texts), per_node), -1, dtype=np.int64)
    if not len(edges):
        return pool
    incidence = (anchor_set.doc_matrix(len(node_texts)) if kind == "doc"
                 else anchor_set.label_matrix(len(node_texts)))
    nodes = np.unique(edges[:, 0])
    candidates = np.unique(edges[:, 1])
    position = {t: i for i, t in enumerate(anchor_set.texts)}
    excluded = np.array([position.get(node_texts[n], -1) for n in nodes], dtype=np.int64)
    node_emb = encode([node_texts[n] for n in nodes])
    candidate_emb = encode([anchor_set.texts[a] for a in candidates])
    pool[nodes] = mine_anchor_negatives(node_emb, candidate_emb, candidates, sp.csr_matrix(incidence)[nodes],
                                        excluded, per_node)
    return pool


def draw(pool: np.ndarray, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One anchor id of each row's pool (``pool[nodes]``), uniformly; −1 for a node with an empty pool (or −1)."""
    rows = pool[np.maximum(nodes, 0)]
    counts = np.where(nodes >= 0, (rows >= 0).sum(axis=1), 0)
    offset = (rng.random(len(nodes)) * np.maximum(counts, 1)).astype(np.int64)
    picked = rows[np.arange(len(nodes)), np.minimum(offset, rows.shape[1] - 1)]
    return np.where(counts > 0, picked, -1)


def merge_pools(first: np.ndarray | None, second: np.ndarray | None) -> np.ndarray | None:
    """Two per-row pools (rows × M, −1 padded, valid ids first) as one, each row's valid ids first (first's, then
    second's, duplicates kept once); None when both are None."""
    if first is None or second is None:
        return first if second is None else second
    both = np.concatenate([first, second], axis=1)
    out = np.full_like(both, -1)
    for r in np.flatnonzero((both >= 0).any(axis=1)):
        ids = list(dict.fromkeys(int(i) for i in both[r] if i >= 0))
        out[r, : len(ids)] = ids
    return out
