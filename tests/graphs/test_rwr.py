"""RWR anchor expansion: agrees with exact personalised PageRank, is seeded, and maps back to anchors."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.graphs.rwr import (RWRConfig, expand_anchor_set, personalized_pagerank, random_walk_with_restart,
                                top_k_overlap)


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


def test_rwr_never_returns_the_start_or_non_candidates_and_keeps_at_most_k() -> None:
    graph, starts, anchors = _multigraph(50, seed=2)
    top = random_walk_with_restart(graph, starts, anchors, RWRConfig(top_k=3))
    assert anchors[top.node].all() and not np.isin(top.node, starts).any()
    assert np.bincount(top.start).max() <= 3


def test_expansion_reaches_anchors_of_documents_sharing_an_anchor() -> None:
    # doc0 - a0 - doc1 - a1 ; label0 - a1 : doc0 reaches a1 through doc1, label0 reaches a0.
    anchors = AnchorSet("links", ["a0", "a1"], doc_edges=[(0, 0), (1, 0), (1, 1)], label_edges=[(0, 1)])
    data = XCDataset("toy", ["d0", "d1"], ["t0"], ["l0"], y_train=sp.csr_matrix(np.ones((2, 1))),
                     y_test=sp.csr_matrix(np.ones((1, 1))), anchor_sets={"links": anchors})
    expanded = expand_anchor_set(data, "links", RWRConfig(seed=0, walk_length=4000))
    assert {tuple(e) for e in expanded.doc_edges.tolist()} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert {tuple(e) for e in expanded.label_edges.tolist()} == {(0, 0), (0, 1)}
    assert expanded.texts == ["a0", "a1"]
