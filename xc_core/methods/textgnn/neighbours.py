"""Who a node's neighbours are (TextGNN §4.2): behaviour-graph neighbours from the data set's anchor sets, ranked
by strength, with ANN proxy neighbours where a node has none (§4.2.2), capped at ``k`` and padded (masked).

* **Graph neighbours.** A train query's are its document-side anchors (co-session queries); a label's its
  label-side anchors (click-graph queries, co-clicked items); a test query's the sets' ``test_edges`` when the
  data set has them. The anchor sets carry no edge weights, so the strength of (node, anchor) is read from the
  graph tables the sets were built from when the data set's ``meta["graphs_dir"]`` still holds them — the
  click graph's CTR (only for pairs shown at least ``min_impressions`` times, TextGNN §4.2.1), co-session and
  co-click session counts, each scaled to [0, 1] by its set's largest — and is 1 + that weight per set the edge
  is in (an RWR-expanded anchor without a direct edge counts 1). Ties: cosine to the centre under the encoder.
* **ANN proxies.** A node with no graph neighbour (left) gets the anchor texts of its side nearest to it under
  the encoder (faiss, exact inner product), itself excluded. Both kinds are recorded so a summary can say which
  share of nodes were served by which.
* **No leaks.** A train query never has one of its positive labels' texts (nor its own) as a neighbour, graph
  or proxy; a label's neighbour list is filtered per training pair so that the pair's own query is not in it
  (:func:`pick`). Anchors that read like a test query are kept (unlike RAMEN's held-out filter): here they are
  inputs from the training-period behaviour graph, which serving has too, never training targets.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset

log = logging.getLogger(__name__)

Embed = Callable[[list[str]], np.ndarray]  # texts → unit rows


@dataclass
class Neighbours:
    """Ranked neighbour texts per node (up to ``candidates``) and whether they are ANN proxies."""

    texts: list[list[str]]
    proxy: np.ndarray  # (n,) bool: no graph neighbour survived, the list is the ANN proxies

    def counts(self) -> dict[str, int]:
        served = np.array([len(t) > 0 for t in self.texts], dtype=bool)
        return {"graph": int((served & ~self.proxy).sum()), "proxy": int((served & self.proxy).sum()),
                "none": int((~served).sum())}

    def to_json(self) -> dict[str, object]:
        return {"texts": self.texts, "proxy": self.proxy.tolist()}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Neighbours:
        return cls([list(t) for t in data["texts"]], np.asarray(data["proxy"], dtype=bool))  # type: ignore[attr-defined]


def pick(candidates: Sequence[str], exclude: set[str], k: int) -> list[str]:
    """The first ``k`` candidates not in ``exclude`` (already ranked, best first)."""
    out = [t for t in candidates if t not in exclude]
    return out[:k]


def padded(rows: Sequence[Sequence[str]], k: int) -> tuple[list[str], np.ndarray]:
    """Row-major (n·k) texts with "" in padded slots, and the (n, k) mask of slots present."""
    texts, present = [], np.zeros((len(rows), k), dtype=bool)
    for i, row in enumerate(rows):
        row = list(row)[:k]
        present[i, : len(row)] = True
        texts += row + [""] * (k - len(row))
    return texts, present


class MemoEmbed:
    """``embed`` that encodes each distinct text once: the neighbour step asks for the same anchor texts as the
    tie-break pool and again as the proxy pool (on aol-1000 about half of what it encodes repeats)."""

    def __init__(self, embed: Embed) -> None:
        self.embed: Embed = embed
        self.row: dict[str, int] = {}
        self.vecs: np.ndarray | None = None

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.row]
        if new or self.vecs is None:
            fresh = self.embed(new)
            self.row.update({t: len(self.row) + i for i, t in enumerate(new)})
            self.vecs = fresh if self.vecs is None else np.concatenate([self.vecs, fresh])
        return self.vecs[[self.row[t] for t in texts]]


# -- edge strength --------------------------------------------------------------------------------------------

def _table(dataset: XCDataset, name: str) -> pl.DataFrame | None:
    folder = dataset.meta.get("graphs_dir")
    path = Path(folder) / f"{name}.parquet" if folder else None
    return pl.read_parquet(path) if path is not None and path.exists() else None


def edge_weights(dataset: XCDataset, name: str, side: str, min_impressions: int) -> dict[tuple[str, str], float]:
    """(node key, anchor text) → weight in [0, 1] from the set's graph table, when the data set still points at
    it; node key: a document's text (``side="doc"``) or a label's id. Empty when there is no table."""
    table = _table(dataset, name)
    if table is None:
        return {}
    cols = set(table.columns)
    keys: list[tuple[str, str]]
    if {"query", "item", "ctr", "impressions"} <= cols and side == "label":  # click graph: item ← query
        rows = table.filter(pl.col("impressions") >= min_impressions)
        keys, values = list(zip(rows["item"].to_list(), rows["query"].to_list(), strict=True)), rows["ctr"].to_numpy()
    elif {"q1", "q2", "sessions"} <= cols and side == "doc":  # co-session queries
        keys = list(zip(table["q1"].to_list(), table["q2"].to_list(), strict=True))
        values = table["sessions"].to_numpy()
    elif {"i1", "i2", "sessions"} <= cols and side == "label":  # co-clicked items: anchors are the items' texts
        text_of = dict(zip(dataset.label_ids, dataset.label_texts, strict=True))
        keys = [(a, text_of.get(b, "")) for a, b in zip(table["i1"].to_list(), table["i2"].to_list(), strict=True)]
        values = table["sessions"].to_numpy()
    else:
        return {}
    values = np.asarray(values, dtype=np.float64)
    top = float(values.max()) if len(values) else 1.0
    return {key: float(v) / top if top > 0 else 0.0 for key, v in zip(keys, values, strict=True)}


# -- ranking and proxies -------------------------------------------------------------------------------------

def rank_graph(n: int, sets: Sequence[tuple[np.ndarray, list[str], dict[tuple[str, str], float]]],
               node_keys: Sequence[str], exclude: Sequence[set[str]], node_vecs: np.ndarray | None,
               embed: Embed | None, limit: int) -> list[list[str]]:
    """Per node: its anchor texts over ``sets`` (edges (node, anchor), anchor texts, weights), strongest first,
    ties by cosine to the node (when ``embed`` is given), never an excluded text; at most ``limit``."""
    strength: list[dict[str, float]] = [defaultdict(float) for _ in range(n)]
    for edges, texts, weights in sets:
        for node, anchor in edges.tolist():
            text = texts[anchor]
            if text in exclude[node]:
                continue
            strength[node][text] += 1.0 + weights.get((node_keys[node], text), 0.0)
    similarity: dict[str, np.ndarray] = {}
    if embed is not None and node_vecs is not None:
        pool = sorted({t for s in strength for t in s})
        similarity = dict(zip(pool, embed(pool), strict=True)) if pool else {}
    out = []
    for node, scores in enumerate(strength):
        def key(text: str, node: int = node, scores: dict[str, float] = scores) -> tuple[float, float, str]:
            cos = float(node_vecs[node] @ similarity[text]) if similarity and node_vecs is not None else 0.0
            return (-scores[text], -cos, text)

        out.append(sorted(scores, key=key)[:limit])
    return out


def ann_proxies(node_vecs: np.ndarray, pool: list[str], pool_vecs: np.ndarray, exclude: Sequence[set[str]],
                k: int, search: int) -> list[list[str]]:
    """Per node: the ``k`` pool texts nearest to it (inner product of unit rows), excluded texts skipped."""
    import faiss

    if not pool or len(node_vecs) == 0:
        return [[] for _ in range(len(node_vecs))]
    index = faiss.IndexFlatIP(pool_vecs.shape[1])
    index.add(np.ascontiguousarray(pool_vecs, dtype=np.float32))
    _, ids = index.search(np.ascontiguousarray(node_vecs, dtype=np.float32), min(len(pool), search + k))
    return [pick(list(dict.fromkeys(pool[j] for j in row if j >= 0)), exclude[i], k) for i, row in enumerate(ids)]


def complete(graph: list[list[str]], node_vecs: Callable[[np.ndarray], np.ndarray], pool: list[str],
             pool_vecs: np.ndarray, exclude: Sequence[set[str]], k: int, search: int) -> Neighbours:
    """Graph neighbours where a node has any, ANN proxies (``k``) for the others (TextGNN Fig. 3b)."""
    missing = np.array([len(g) == 0 for g in graph], dtype=bool)
    rows = np.flatnonzero(missing)
    texts = [list(g) for g in graph]
    if len(rows):
        found = ann_proxies(node_vecs(rows), pool, pool_vecs, [exclude[int(i)] for i in rows], k, search)
        for i, proxies in zip(rows, found, strict=True):
            texts[i] = proxies
    return Neighbours(texts, missing)


# -- the three node kinds -------------------------------------------------------------------------------------

def _doc_sets(dataset: XCDataset) -> list[tuple[str, AnchorSet]]:
    return [(n, a) for n, a in dataset.anchor_sets.items() if len(a.doc_edges)]


def _label_sets(dataset: XCDataset) -> list[tuple[str, AnchorSet]]:
    return [(n, a) for n, a in dataset.anchor_sets.items() if len(a.label_edges)]


def anchor_test_edges(anchor_set: AnchorSet) -> np.ndarray:
    """The set's (test document, anchor) edges; none when the data set predates them."""
    edges = getattr(anchor_set, "test_edges", None)
    return np.empty((0, 2), np.int64) if edges is None else np.asarray(edges, np.int64).reshape(-1, 2)


def doc_pool(dataset: XCDataset) -> list[str]:
    """Anchor texts a query's ANN proxies are drawn from: every anchor of the document-side sets."""
    sets = [a for _, a in _doc_sets(dataset)] + [a for a in dataset.anchor_sets.values() if len(anchor_test_edges(a))]
    return sorted({t for a in sets for t in a.texts})


def label_pool(dataset: XCDataset) -> list[str]:
    return sorted({t for _, a in _label_sets(dataset) for t in a.texts})


def positive_texts(dataset: XCDataset) -> list[set[str]]:
    """Per train document: its own text and its positive labels' texts (never its neighbours)."""
    y = sp.csr_matrix(dataset.y_train)
    return [{dataset.train_texts[i], *(dataset.label_texts[j] for j in y.indices[y.indptr[i]:y.indptr[i + 1]])}
            for i in range(y.shape[0])]


def train_doc_neighbours(dataset: XCDataset, embed: Embed, k: int, limit: int, min_impressions: int,
                         search: int) -> tuple[Neighbours, list[str], np.ndarray]:
    """Neighbours of every train document, and the proxy pool with its vectors (kept for serving)."""
    exclude = positive_texts(dataset)
    sets = [(a.doc_edges, a.texts, edge_weights(dataset, n, "doc", min_impressions)) for n, a in _doc_sets(dataset)]
    vecs = embed(list(dataset.train_texts))
    graph = rank_graph(len(dataset.train_texts), sets, dataset.train_texts, exclude, vecs, embed, limit)
    pool = doc_pool(dataset)
    pool_vecs = embed(pool) if pool else np.zeros((0, vecs.shape[1]), np.float32)
    return complete(graph, lambda rows: vecs[rows], pool, pool_vecs, exclude, k, search), pool, pool_vecs


def label_neighbours(dataset: XCDataset, embed: Embed, k: int, limit: int, min_impressions: int,
                     search: int) -> Neighbours:
    exclude = [{t} for t in dataset.label_texts]
    sets = [(a.label_edges, a.texts, edge_weights(dataset, n, "label", min_impressions))
            for n, a in _label_sets(dataset)]
    vecs = embed(list(dataset.label_texts))
    graph = rank_graph(len(dataset.label_texts), sets, dataset.label_ids, exclude, vecs, embed, limit)
    pool = label_pool(dataset)
    pool_vecs = embed(pool) if pool else np.zeros((0, vecs.shape[1]), np.float32)
    return complete(graph, lambda rows: vecs[rows], pool, pool_vecs, exclude, k, search)


def heldout_doc_neighbours(dataset: XCDataset, query_vecs: np.ndarray, pool: list[str], pool_vecs: np.ndarray, k: int,
                        search: int) -> Neighbours:
    """Test documents: their ``test_edges`` anchors where the data set has them (ranked by how many sets give
    the edge, then cosine to the query), ANN proxies from the training pool otherwise."""
    exclude = [{t} for t in dataset.test_texts]
    no_weights: dict[tuple[str, str], float] = {}
    sets = [(edges, a.texts, no_weights) for a in dataset.anchor_sets.values() if len(edges := anchor_test_edges(a))]
    graph: list[list[str]] = [[] for _ in dataset.test_texts]
    if sets:
        rows = sorted({int(r) for edges, _, _ in sets for r in edges[:, 0]})
        by_row = {r: i for i, r in enumerate(rows)}
        texts = sorted({t[a] for edges, t, _ in sets for a in edges[:, 1]})
        position = {t: i for i, t in enumerate(texts)}
        lookup = _lookup(texts, pool, pool_vecs)

        def embed(wanted: list[str]) -> np.ndarray:
            return lookup[[position[t] for t in wanted]]

        local = [(np.column_stack([[by_row[int(r)] for r in e[:, 0]], e[:, 1]]).astype(np.int64), t, w)
                 for e, t, w in sets]
        ranked = rank_graph(len(rows), local, [dataset.test_texts[r] for r in rows], [exclude[r] for r in rows],
                            query_vecs[rows], embed, k)
        for r, found in zip(rows, ranked, strict=True):
            graph[r] = found
    return complete(graph, lambda rows: query_vecs[rows], pool, pool_vecs, exclude, k, search)


def answer_neighbours(y: sp.spmatrix, label_texts: Sequence[str], k: int) -> Neighbours:
    """The positive control's neighbours (``oracle_neighbours``): each row's first ``k`` positive labels' texts, in
    label order — the answer itself, which no real graph hands a query."""
    y = sp.csr_matrix(y)
    rows = [[label_texts[j] for j in sorted(y.indices[y.indptr[i]:y.indptr[i + 1]])[:k]] for i in range(y.shape[0])]
    return Neighbours(rows, np.zeros(len(rows), dtype=bool))


def _lookup(texts: list[str], pool: list[str], pool_vecs: np.ndarray) -> np.ndarray:
    """Vectors of ``texts`` from the pool (a test edge's anchor is an anchor text, so it is in the pool); zeros
    for a text the pool lacks (then only the strength ranks it)."""
    index = {t: i for i, t in enumerate(pool)}
    out = np.zeros((len(texts), pool_vecs.shape[1] if len(pool_vecs) else 1), np.float32)
    for i, t in enumerate(texts):
        if t in index:
            out[i] = pool_vecs[index[t]]
    return out
