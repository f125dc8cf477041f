"""The positive control's oracle (xc_core/graphs/oracle.py): its edges and the test queries it can reach."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset


def test_novel_only_edges_are_test_labels_the_query_never_trained_on(tiny_data: XCDataset) -> None:
    from xc_core.graphs.oracle import first_training_rows, oracle_pairs, oracle_set

    every, novel = oracle_pairs(tiny_data), oracle_pairs(tiny_data, novel_only=True)
    assert 0 < len(novel) < len(every), "the tiny log repeats training queries with old and new labels"
    y_train = sp.csr_matrix(tiny_data.y_train)
    assert not np.asarray(y_train[novel[:, 0], novel[:, 1]]).any()
    assert np.asarray(y_train[every[:, 0], every[:, 1]]).any()
    # every edge links a training row to a label its text clicks in the test period
    test_of = {text: t for t, text in enumerate(tiny_data.test_texts)}
    y_test = sp.csr_matrix(tiny_data.y_test)
    rows = first_training_rows(tiny_data)
    for row, label in every[:50]:
        text = tiny_data.train_texts[row]
        assert rows[text] == row and y_test[test_of[text], label] > 0
    # the anchor set holds the same edges, by anchor text
    anchors = oracle_set(tiny_data, novel_only=True)
    linked = {(int(r), anchors.texts[a]) for r, a in anchors.doc_edges}
    assert linked == {(int(r), tiny_data.label_texts[j]) for r, j in novel}


def test_novel_answer_queries_are_covered_queries_with_no_trained_answer(tiny_data: XCDataset) -> None:
    from xc_core.graphs.oracle import covered_queries, first_training_rows, novel_answer_queries

    covered, novel = covered_queries(tiny_data), novel_answer_queries(tiny_data)
    assert novel.any() and (covered & ~novel).any()
    assert not (novel & ~covered).any()
    y_test, y_train = sp.csr_matrix(tiny_data.y_test), sp.csr_matrix(tiny_data.y_train)
    rows = first_training_rows(tiny_data)
    for t in np.flatnonzero(covered):
        truth = set(y_test[t].indices)
        trained = set(y_train[rows[tiny_data.test_texts[t]]].indices)
        assert novel[t] == (bool(truth) and not truth & trained)
