"""Pruning keeps exactly the anchors with cosine above the threshold, with any encoder."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.graphs.pruning import prune_anchor_set, prune_dataset_anchors


def test_pruning_keeps_exactly_the_edges_with_positive_cosine() -> None:
    docs = np.array([[1.0, 0.0], [0.0, 1.0]])
    labels = np.array([[1.0, 1.0]])
    anchors = np.array([[1.0, 0.1], [-1.0, 0.0], [0.0, -1.0], [1.0, 0.0]])
    a = AnchorSet("t", ["a0", "a1", "a2", "a3"], doc_edges=[(0, 0), (0, 1), (1, 2), (1, 3)],
                  label_edges=[(0, 0), (0, 1), (0, 2)])
    # cosines: d0·a0 > 0, d0·a1 < 0, d1·a2 < 0, d1·a3 = 0 (not > 0); l0·a0 > 0, l0·a1 < 0, l0·a2 < 0
    pruned, counts = prune_anchor_set(a, docs, labels, anchors, threshold=0.0)
    assert pruned.doc_edges.tolist() == [[0, 0]]
    assert pruned.label_edges.tolist() == [[0, 0]]
    assert counts.as_dict() == {"doc_kept": 1, "doc_dropped": 3, "label_kept": 1, "label_dropped": 2}


def test_pruning_with_the_pretrained_minilm_drops_the_unrelated_anchor() -> None:
    from xc_core.encoders import EncoderConfig, TextEncoder

    encoder = TextEncoder(EncoderConfig(n_layers=6))
    anchors = AnchorSet("cosession_queries", ["cheap flights to paris", "zzz qqq xkcd", "airline tickets europe"],
                        doc_edges=[(0, 0), (0, 1), (0, 2)], label_edges=[])
    data = XCDataset("toy", ["flights to paris"], ["x"], ["air france"], y_train=sp.csr_matrix(np.ones((1, 1))),
                     y_test=sp.csr_matrix(np.ones((1, 1))), anchor_sets={"cosession_queries": anchors})
    embed = encoder.encode
    scores = embed(["flights to paris"]) @ embed(anchors.texts).T
    threshold = float(np.sort(scores.ravel())[0] + 1e-4)  # just above the least related anchor
    pruned, counts = prune_dataset_anchors(data, embed, threshold=threshold)
    kept = {anchors.texts[a] for a in pruned["cosession_queries"].doc_edges[:, 1]}
    assert kept == {"cheap flights to paris", "airline tickets europe"}  # the gibberish anchor is the one dropped
    assert counts["cosession_queries"].doc_dropped == 1
