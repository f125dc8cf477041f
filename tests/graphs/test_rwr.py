"""RWR anchor expansion: agrees with exact personalised PageRank, is seeded, and maps back to anchors."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.graphs.rwr import (
    RWRConfig,
    anchor_graph,
    expand_anchor_set,
    personalized_pagerank,
    random_walk_with_restart,
    top_k_overlap,
)


def _multigraph(n_starts: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Each start links to 6 own anchors with distinct edge multiplicities 1, 2, 4 … 32 (a multigraph: the walker
    picks an edge uniformly, so multiplicity is weight), and anchors are shared with one other start.
    Exact PPR then separates the anchors clearly, and the walk must rank them the same way."""
    rng = np.random.default_rng(seed)
    rows: list[int] = []
    cols: list[int] = []
    for start in range(n_starts):
        anchors = n_starts + 6 * start + np.arange(6)
        for weight, anchor in zip(rng.permutation(2 ** np.arange(6)), anchors, strict=True):
            rows += [start] * int(weight)
            cols += [int(anchor)] * int(weight)
        neighbour_anchor = n_starts + 6 * ((start + 1) % n_starts)
        rows.append(start)
        cols.append(int(neighbour_anchor))
    n = n_starts * 7
    both_r, both_c = np.r_[rows, cols], np.r_[cols, rows]
    order = np.argsort(both_r, kind="stable")
    indptr = np.r_[0, np.cumsum(np.bincount(both_r, minlength=n))]
    graph = sp.csr_matrix((np.ones(len(order)), both_c[order], indptr), shape=(n, n))
    return graph, np.arange(n_starts), np.arange(n) >= n_starts


def test_rwr_top_k_matches_exact_personalised_pagerank() -> None:
    graph, starts, anchors = _multigraph(300, seed=1)
    walk = random_walk_with_restart(graph, starts, anchors, RWRConfig(top_k=3, seed=3))
    exact = personalized_pagerank(graph, starts, anchors, restart=0.8, top_k=3)
    assert top_k_overlap(walk, exact) >= 0.9


def test_rwr_is_deterministic_for_a_seed_and_varies_with_it() -> None:
    rng = np.random.default_rng(0)
    r, c = rng.integers(0, 500, 3000), rng.integers(0, 500, 3000)
    graph = sp.csr_matrix((np.ones(3000), (r, c)), shape=(500, 500))
    graph = (graph + graph.T).tocsr()
    anchors = np.arange(500) >= 250
    runs = [random_walk_with_restart(graph, np.arange(100), anchors, RWRConfig(seed=s)) for s in (7, 7, 8)]
    assert all(np.array_equal(getattr(runs[0], f), getattr(runs[1], f)) for f in ("start", "node", "score"))
    assert not np.array_equal(runs[0].score, runs[2].score)


def test_rwr_without_top_k_keeps_every_visited_anchor_and_top_k_cuts_to_the_most_visited() -> None:
    graph, starts, anchors = _multigraph(200, seed=4)
    every = random_walk_with_restart(graph, starts, anchors, RWRConfig(seed=5))
    cut = random_walk_with_restart(graph, starts, anchors, RWRConfig(seed=5, top_k=3))
    assert RWRConfig().top_k is None
    assert np.bincount(every.start).max() > 3 and np.bincount(cut.start).max() == 3
    # Same seed, same walks: the cut is the 3 most visited of the full visit counts, the full set has all of them.
    full = {(s, n): c for s, n, c in zip(every.start.tolist(), every.node.tolist(), every.score.tolist(), strict=True)}
    assert all(full[(s, n)] == c for s, n, c in zip(cut.start.tolist(), cut.node.tolist(), cut.score.tolist(),
                                                     strict=True))
    for s, nodes in cut.as_sets().items():
        ranked = sorted((-c, n) for (t, n), c in full.items() if t == s)
        assert nodes == [n for _, n in ranked[:3]]
    # Three hops out (anchor → the other start sharing it → its anchors) the walk finds anchors that are not the
    # start's own neighbours; ~80 moves in 400 hops do not always visit a neighbour with 1 edge in 64, though.
    neighbours = {s: set(graph.indices[graph.indptr[s]: graph.indptr[s + 1]].tolist()) for s in starts.tolist()}
    assert any(set(nodes) - neighbours[s] for s, nodes in every.as_sets().items())
    assert any(neighbours[s] - set(nodes) for s, nodes in every.as_sets().items())


def test_rwr_never_returns_the_start_or_non_candidates_and_keeps_at_most_k() -> None:
    graph, starts, anchors = _multigraph(50, seed=2)
    top = random_walk_with_restart(graph, starts, anchors, RWRConfig(top_k=3))
    assert anchors[top.node].all() and not np.isin(top.node, starts).any()
    assert np.bincount(top.start).max() <= 3


def test_expansion_reaches_anchors_of_documents_sharing_an_anchor() -> None:
    # doc0 - a0 - doc1 - a1 ; label0 - a1 : doc0 reaches a1 through doc1, label0 reaches a0.
    anchors = AnchorSet("links", ["a0", "a1"], doc_edges=np.array([(0, 0), (1, 0), (1, 1)]),
                        label_edges=np.array([(0, 1)]))
    data = XCDataset("toy", ["d0", "d1"], ["t0"], ["l0"], y_train=sp.csr_matrix(np.ones((2, 1))),
                     y_test=sp.csr_matrix(np.ones((1, 1))), anchor_sets={"links": anchors})
    expanded = expand_anchor_set(data, "links", RWRConfig(seed=0, walk_length=4000))
    assert {tuple(e) for e in expanded.doc_edges.tolist()} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert {tuple(e) for e in expanded.label_edges.tolist()} == {(0, 0), (0, 1)}
    assert expanded.texts == ["a0", "a1"]


def _star_with_many_anchors(n_anchors: int) -> XCDataset:
    """doc0 has ``n_anchors`` native anchors, more than its ~80 moves in 400 hops can all visit; doc1 shares a0
    with doc0 and also has a private anchor; label0 has one proxy edge to a1."""
    texts = [f"a{i}" for i in range(n_anchors + 1)]
    doc_edges = np.array([(0, i) for i in range(n_anchors)] + [(1, 0), (1, n_anchors)])
    anchors = AnchorSet("links", texts, doc_edges=doc_edges, label_edges=np.array([(0, 1)]),
                        label_proxy=np.array([True]))
    return XCDataset("toy", ["d0", "d1"], ["t0"], ["l0"], y_train=sp.csr_matrix(np.ones((2, 1))),
                     y_test=sp.csr_matrix(np.ones((1, 1))), anchor_sets={"links": anchors})


def test_expansion_always_keeps_every_native_edge_even_those_the_walk_misses() -> None:
    data = _star_with_many_anchors(300)
    for cfg in (RWRConfig(seed=0), RWRConfig(seed=0, top_k=2)):
        expanded = expand_anchor_set(data, "links", cfg)
        native = {tuple(e) for e in data.anchor_sets["links"].doc_edges.tolist()}
        got = [tuple(e) for e in expanded.doc_edges.tolist()]
        assert native <= set(got) and len(got) == len(set(got))  # kept, and deduplicated
        assert got == sorted(got)
        assert (0, 1) in {tuple(e) for e in expanded.label_edges.tolist()}
    walk = random_walk_with_restart(anchor_graph(data.anchor_sets["links"], 2, 1), np.array([0]),
                                    np.arange(2 + 1 + 301) >= 3, RWRConfig(seed=0))
    assert len(walk.node) < 300  # the walk alone would lose some of doc0's anchors


def test_expansion_adds_walk_anchors_and_keeps_proxy_flags_of_the_edges_it_had() -> None:
    data = _star_with_many_anchors(3)
    expanded = expand_anchor_set(data, "links", RWRConfig(seed=0, walk_length=4000))
    edges = {tuple(e): p for e, p in zip(expanded.doc_edges.tolist(), expanded.doc_proxy.tolist(), strict=True)}
    assert set(edges) == {(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)}  # via the shared a0
    assert not any(edges.values())
    labels = {tuple(e): p for e, p in zip(expanded.label_edges.tolist(), expanded.label_proxy.tolist(), strict=True)}
    assert labels[(0, 1)] and not any(p for e, p in labels.items() if e != (0, 1))  # only the proxy edge is one
