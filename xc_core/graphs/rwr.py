"""Random walk with restart (RWR) anchor expansion, as RAMEN uses it to densify thin graphs.

From every start node (train documents and labels) walk ``walk_length`` hops over the undirected
node–anchor graph; at each hop, with probability ``restart`` jump back to the start, otherwise move to a
uniformly random neighbour (a node without neighbours restarts). RAMEN (App. B): 400 hops, restart 0.8.
The paper keeps the walk's anchors and says nothing about a top-k cut, so by default *every* anchor the
walk visits joins the start node's set (``top_k=None``), and :func:`expand_anchor_set` always keeps the
node's own edges too: the walk adds anchors, it never removes one (with ~80 moves per start a node with
many native anchors would otherwise lose the ones the walk happened not to visit). ``top_k=k`` keeps only
the k most visited anchors (ties: smaller id first), for graphs where the full set is too dense.

With restart 0.8 a walk rarely strays: a move to a node's own anchor has probability 0.2, a move on to an
anchor three hops away 0.2³, so most visits land on native anchors and the walk adds a few anchors of
nodes sharing one. Memory per chunk of ``chunk_size`` starts is one int64 key per move
(≈ chunk_size · walk_length · (1 − restart)), whatever ``top_k``; the result holds at most one row per
distinct (start, visited anchor).

All walks of a chunk of start nodes advance together as numpy arrays over the CSR adjacency (no
per-node Python loop). :func:`personalized_pagerank` is the exact reference (power iteration of the
same chain): the visit frequencies of the walks converge to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.progress import bar


class RWRConfig(BaseModel):
    walk_length: int = Field(default=400, ge=1, description="hops per start node (RAMEN: 400)")
    restart: float = Field(default=0.8, gt=0, lt=1, description="restart probability per hop (RAMEN: 0.8)")
    top_k: int | None = Field(default=None, ge=1, description="keep only the k most visited anchors per node; "
                              "None keeps every visited anchor (RAMEN: no cut)")
    seed: int = Field(default=0, description="random seed: same seed, same anchors")
    chunk_size: int = Field(default=100_000, ge=1, description="start nodes walked at once (bounds memory)")


@dataclass(frozen=True)
class TopK:
    """Top-k (or all, k = None) anchors per start: parallel arrays sorted by (start, -score, node)."""

    start: np.ndarray
    node: np.ndarray
    score: np.ndarray

    def as_sets(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for s, n in zip(self.start.tolist(), self.node.tolist(), strict=True):
            out.setdefault(s, []).append(n)
        return out


def _top_k(rows: np.ndarray, cols: np.ndarray, scores: np.ndarray, k: int | None) -> TopK:
    """Best k (every one when k is None) (row, col) per row by score, ties broken by smaller col."""
    order = np.lexsort((cols, -scores, rows))
    return _first_k(rows[order], cols[order], scores[order], k)


def _first_k(rows: np.ndarray, cols: np.ndarray, scores: np.ndarray, k: int | None) -> TopK:
    if k is None:
        return TopK(rows, cols, scores)
    first = np.r_[True, rows[1:] != rows[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(rows)), 0))
    keep = (np.arange(len(rows)) - group_start) < k
    return TopK(rows[keep], cols[keep], scores[keep])


def _top_k_counts(keys: np.ndarray, n: int, k: int | None) -> TopK:
    """Top-k (all when k is None) visited nodes per walker from visit keys (walker * n + node): one sort for
    counting and one stable int64 sort for ranking, instead of a three-key lexsort. Sorts ``keys`` in place."""
    keys.sort()
    boundary = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    uniq = keys[boundary]
    counts = np.diff(np.r_[boundary, len(keys)])
    rows, cols = uniq // n, uniq % n
    rank_key = rows * (int(counts.max()) + 1) + (counts.max() - counts)  # (row, -count); cols stay ascending
    order = np.argsort(rank_key, kind="stable")
    return _first_k(rows[order], cols[order], counts[order].astype(np.float64), k)


def random_walk_with_restart(adjacency: sp.csr_matrix, starts: np.ndarray, candidates: np.ndarray,
                             cfg: RWRConfig | None = None, progress: bool = False) -> TopK:
    """Visited candidate nodes (never the start itself) for each start, the ``cfg.top_k`` most visited or all
    of them; ``TopK.start`` indexes ``starts`` positionally and ``score`` is the visit count.

    Args:
        adjacency: (n, n) graph; a walker moves to a uniformly drawn stored neighbour (weights are ignored).
        starts: node ids, one walker each; a walker on a node without neighbours restarts.
        candidates: (n,) bool: the nodes whose visits count.
        cfg: walk length, restart probability, chunking, top_k and the seed; :class:`RWRConfig` defaults if None.
        progress: show a bar over the chunks of starts.

    Returns:
        The visits as a :class:`TopK` of flat arrays (start position, node, visit count), grouped by start;
        the same seed and inputs give the same walks.
    """
    cfg = cfg or RWRConfig()
    adjacency = sp.csr_matrix(adjacency)
    indptr, indices = adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int64)
    degree = np.diff(indptr)
    n = adjacency.shape[0]
    rng = np.random.default_rng(cfg.seed)
    results: list[TopK] = []
    chunks = range(0, len(starts), cfg.chunk_size)
    for offset in bar(chunks, desc="rwr", unit="chunk", enabled=progress):
        home = np.asarray(starts[offset: offset + cfg.chunk_size], dtype=np.int64)
        pos = home.copy()
        keys: list[np.ndarray] = []
        for _ in range(cfg.walk_length):
            # One uniform per walker and hop: u < restart restarts; otherwise (u - restart) / (1 - restart)
            # is again uniform and picks the neighbour. Only the ~(1 - restart) movers are gathered.
            u = rng.random(len(home), dtype=np.float32)
            movers = np.flatnonzero(u >= cfg.restart)
            current = pos[movers]
            deg = degree[current]
            live = deg > 0
            movers, current, deg = movers[live], current[live], deg[live]
            pick = ((u[movers] - cfg.restart) / (1 - cfg.restart) * deg).astype(np.int64)
            nxt = indices[indptr[current] + np.minimum(pick, deg - 1)]
            pos = home.copy()
            pos[movers] = nxt
            hit = candidates[nxt] & (nxt != home[movers])
            keys.append(movers[hit] * n + nxt[hit])
        visits = np.concatenate(keys)
        top = _top_k_counts(visits, n, cfg.top_k) if len(visits) else TopK(*(np.empty(0, np.int64),) * 2,
                                                                           np.empty(0))
        results.append(TopK(top.start + offset, top.node, top.score))
    if not results:
        return TopK(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))
    return TopK(*(np.concatenate([getattr(r, f) for r in results]) for f in ("start", "node", "score")))


def personalized_pagerank(adjacency: sp.csr_matrix, starts: np.ndarray, candidates: np.ndarray, restart: float = 0.8,
                          top_k: int = 10, iterations: int = 40, tol: float = 1e-12, batch: int = 64) -> TopK:
    """Exact reference: the stationary distribution of the RWR chain by power iteration, top-k candidates.

    π = restart·e_s + (1 − restart)·π·P, with a dead end's mass returned to the start (as the walker does).
    Starts are solved ``batch`` at a time as dense columns, so memory is n × batch floats.

    Args:
        adjacency: the graph's (n × n) weighted adjacency; a row's weights, normalised, are its transitions.
        starts: the start nodes.
        candidates: a boolean mask over the nodes: those that may be returned (the anchors); a start never is.
        restart: the probability of returning to the start at each step.
        top_k: candidates kept per start.
        iterations: the most power iterations.
        tol: stop once the summed absolute change of π over a batch falls below this.
        batch: starts solved at once.

    Returns:
        The top-k candidates per start by stationary probability, sorted by (start, −score, node).
    """
    adjacency = sp.csr_matrix(adjacency, dtype=np.float64)
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    transition_t = (sp.diags(inverse) @ adjacency).T.tocsr()  # column-stochastic: x ← Pᵀ x
    dead = degree == 0
    n = adjacency.shape[0]
    rows, cols, scores = [], [], []
    for offset in range(0, len(starts), batch):
        chunk = np.asarray(starts[offset: offset + batch], dtype=np.int64)
        seed = np.zeros((n, len(chunk)))
        seed[chunk, np.arange(len(chunk))] = 1.0
        pi = seed.copy()
        for _ in range(iterations):
            stuck = pi[dead].sum(axis=0) if dead.any() else np.zeros(len(chunk))
            nxt = restart * seed + (1 - restart) * (transition_t @ pi + seed * stuck)
            delta = np.abs(nxt - pi).sum()
            pi = nxt
            if delta < tol:
                break
        pi[~candidates] = 0.0
        pi[chunk, np.arange(len(chunk))] = 0.0
        k = min(top_k, n)
        best = np.argpartition(-pi, k - 1, axis=0)[:k]
        for j in range(len(chunk)):
            nodes = best[:, j]
            values = pi[nodes, j]
            keep = values > 0
            rows.append(np.full(int(keep.sum()), offset + j))
            cols.append(nodes[keep])
            scores.append(values[keep])
    if not rows:
        return TopK(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))
    return _top_k(np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64),
                  np.concatenate(scores), top_k)


def python_walker(adjacency: sp.csr_matrix, starts: np.ndarray, candidates: np.ndarray,
                  cfg: RWRConfig | None = None) -> TopK:
    """The straightforward per-node walker (one Python loop per start and hop): the benchmark baseline."""
    import random
    from collections import Counter

    cfg = cfg or RWRConfig()
    rand = random.Random(cfg.seed)
    indptr, indices = adjacency.indptr.tolist(), adjacency.indices.tolist()
    rows, cols, scores = [], [], []
    for i, start in enumerate(starts.tolist()):
        visits: Counter[int] = Counter()
        pos = start
        for _ in range(cfg.walk_length):
            lo, hi = indptr[pos], indptr[pos + 1]
            if rand.random() < cfg.restart or hi == lo:
                pos = start
                continue
            pos = indices[lo + int(rand.random() * (hi - lo))]
            if candidates[pos] and pos != start:
                visits[pos] += 1
        for node, count in visits.items():
            rows.append(i)
            cols.append(node)
            scores.append(count)
    return _top_k(np.array(rows, np.int64), np.array(cols, np.int64), np.array(scores, np.float64), cfg.top_k)


def top_k_overlap(a: TopK, b: TopK) -> float:
    """Mean over starts of |A ∩ B| / max(|A|, |B|): 1.0 when both pick the same anchors."""
    sa, sb = a.as_sets(), b.as_sets()
    starts = set(sa) | set(sb)
    if not starts:
        return 1.0
    scores = [len(set(sa.get(s, [])) & set(sb.get(s, []))) / max(len(sa.get(s, [])), len(sb.get(s, [])))
              for s in starts]
    return float(np.mean(scores))


def anchor_graph(anchor_set: AnchorSet, n_docs: int, n_labels: int) -> sp.csr_matrix:
    """Undirected graph over [train documents | labels | anchors] from an anchor set's edge lists."""
    n = n_docs + n_labels + len(anchor_set.texts)
    rows = np.concatenate([anchor_set.doc_edges[:, 0], n_docs + anchor_set.label_edges[:, 0]])
    cols = n_docs + n_labels + np.concatenate([anchor_set.doc_edges[:, 1], anchor_set.label_edges[:, 1]])
    data = np.ones(len(rows), dtype=np.float32)
    upper = sp.csr_matrix((data, (rows, cols)), shape=(n, n))
    graph = (upper + upper.T).tocsr()
    graph.data[:] = 1.0
    return graph


def _union_edges(own: np.ndarray, own_proxy: np.ndarray, walked: np.ndarray,
                 n_anchors: int) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicated union of one side's own edges and the walk's, sorted by (node, anchor), with proxy flags:
    an edge stays a proxy edge when every own copy of it is one; an edge only the walk found is not."""
    keys, inverse = np.unique(np.r_[own[:, 0] * n_anchors + own[:, 1], walked[:, 0] * n_anchors + walked[:, 1]],
                              return_inverse=True)
    own_native = np.bincount(inverse[:len(own)], weights=~np.asarray(own_proxy, bool), minlength=len(keys))
    own_count = np.bincount(inverse[:len(own)], minlength=len(keys))
    proxy = (own_count > 0) & (own_native == 0)
    return np.stack([keys // n_anchors, keys % n_anchors], axis=1), proxy


def expand_anchor_set(dataset: XCDataset, name: str, cfg: RWRConfig | None = None,
                      progress: bool = False) -> AnchorSet:
    """RWR-expanded copy of ``dataset.anchor_sets[name]``: each doc/label keeps every edge it has and gains
    the anchors its walks visit (all of them, or the ``cfg.top_k`` most visited). Edges come out
    deduplicated and sorted by (node, anchor); proxy flags of the kept edges are carried over.

    Args:
        dataset: the data set holding the anchor set; it is not modified.
        name: a key of ``dataset.anchor_sets``.
        cfg: the walks' settings (:func:`random_walk_with_restart`); defaults if None.
        progress: show a bar over the walks.

    Returns:
        A new :class:`AnchorSet` with the same anchor texts and the expanded document and label edges.

    Raises:
        KeyError: ``name`` is not one of the data set's anchor sets.
    """
    cfg = cfg or RWRConfig()
    native = dataset.anchor_sets[name]
    n_docs, n_labels = len(dataset.train_texts), dataset.n_labels
    graph = anchor_graph(native, n_docs, n_labels)
    candidates = np.zeros(graph.shape[0], dtype=bool)
    candidates[n_docs + n_labels:] = True
    starts = np.arange(n_docs + n_labels)
    top = random_walk_with_restart(graph, starts, candidates, cfg, progress=progress)
    anchor = top.node - n_docs - n_labels
    is_doc = top.start < n_docs
    n_anchors = max(len(native.texts), 1)
    doc_edges, doc_proxy = _union_edges(native.doc_edges, native.doc_proxy,
                                        np.stack([top.start[is_doc], anchor[is_doc]], axis=1), n_anchors)
    label_edges, label_proxy = _union_edges(native.label_edges, native.label_proxy,
                                            np.stack([top.start[~is_doc] - n_docs, anchor[~is_doc]], axis=1),
                                            n_anchors)
    return AnchorSet(name=name, texts=list(native.texts), doc_edges=doc_edges, label_edges=label_edges,
                     doc_proxy=doc_proxy, label_proxy=label_proxy)
