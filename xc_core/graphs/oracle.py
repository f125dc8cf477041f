"""The positive control for graph regularizers: an oracle anchor set that links each training query to the labels
the same query text clicks in the *test* period.

**A diagnostic, never a method**: it reads the test split on purpose, no method trains on it, and no figure made
with it is a result of xc. It answers one question before any verdict on a real graph: can the regularizer carry
information it is handed? If ``ramen`` trained with this set does not beat ``dual_encoder`` on the test queries the
set covers, the training loop cannot absorb the answers, and no real graph can help it
(``experiments/graph_oracle/graph_oracle.py``, ``tests/training/test_tower.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

#: the oracle set's name in a data set's anchor sets
ORACLE = "oracle_test_labels"


def oracle_set(data: Any, share: float = 1.0, seed: int = 0, novel_only: bool = False) -> Any:
    """The training query → its text's test-period labels edges, a seeded ``share`` of them kept; ``novel_only``:
    only labels the query has no training pair with (what the task loss cannot already teach)."""
    from xc_core.datasets.container import AnchorSet

    pairs_arr = oracle_pairs(data, share, seed, novel_only)
    labels, anchor = np.unique(pairs_arr[:, 1], return_inverse=True)
    return AnchorSet(name=ORACLE, texts=[data.label_texts[j] for j in labels],
                     doc_edges=np.stack([pairs_arr[:, 0], anchor], axis=1).reshape(-1, 2),
                     label_edges=np.empty((0, 2), np.int64))


def oracle_pairs(data: Any, share: float = 1.0, seed: int = 0, novel_only: bool = False) -> np.ndarray:
    """(edges, 2) int64 (training row, label id): the edges of :func:`oracle_set`, by label id. A training query
    text that occurs on several rows is linked from its first row."""
    first = first_training_rows(data)
    y = sp.csr_matrix(data.y_test)
    pairs = [(first[text], int(j)) for t, text in enumerate(data.test_texts) if text in first
             for j in y.indices[y.indptr[t]:y.indptr[t + 1]]]
    pairs_arr = np.unique(np.asarray(pairs, np.int64).reshape(-1, 2), axis=0)
    if novel_only:
        trained = np.asarray(sp.csr_matrix(data.y_train)[pairs_arr[:, 0], pairs_arr[:, 1]]).ravel() > 0
        pairs_arr = pairs_arr[~trained]
    keep = np.random.default_rng(seed).random(len(pairs_arr)) < share
    return pairs_arr[keep]


def first_training_rows(data: Any) -> dict[str, int]:
    """Each training query text → the first training row holding it (the row the oracle links from)."""
    first: dict[str, int] = {}
    for i, text in enumerate(data.train_texts):
        first.setdefault(text, i)
    return first


def covered_queries(data: Any) -> np.ndarray:
    """(test queries,) bool: the query's text is a training query's, so the oracle links it to its test labels."""
    train = set(data.train_texts)
    return np.array([text in train for text in data.test_texts], dtype=bool)


def covered_answers(data: Any) -> Iterator[tuple[int, set[int], set[int]]]:
    """(test row, its test-period labels, the labels its text's first training row holds) of each covered query
    (:func:`covered_queries`), in test-row order."""
    first = first_training_rows(data)
    y_test, y_train = sp.csr_matrix(data.y_test), sp.csr_matrix(data.y_train)
    for t, text in enumerate(data.test_texts):
        row = first.get(text)
        if row is not None:
            yield (t, set(y_test.indices[y_test.indptr[t]:y_test.indptr[t + 1]].tolist()),
                   set(y_train.indices[y_train.indptr[row]:y_train.indptr[row + 1]].tolist()))


def novel_answer_queries(data: Any) -> np.ndarray:
    """(test queries,) bool: covered queries (:func:`covered_queries`) whose every test-period label is one the query
    text has no training pair with — where a novel-only oracle holds the whole answer. On the other covered queries a
    training label is among the answers, so a novel oracle label ranked first can also displace a right one."""
    out = np.zeros(len(data.test_texts), dtype=bool)
    for t, truth, trained in covered_answers(data):
        out[t] = bool(truth) and not truth & trained
    return out
