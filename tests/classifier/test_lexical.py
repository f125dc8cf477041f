"""The lexical channel: TF-IDF nearest training documents vote for their labels, fused with the dense scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.classifier import FusedClassifier, fused_search
from xc_core.classifier.channels import Fusion
from xc_core.classifier.lexical import LexicalChannel, LexicalConfig
from xc_core.datasets.container import XCDataset
from xc_core.index import IndexConfig, LabelIndex

DOCS = ["yahooo mail login", "yahooo mail", "cheap flights paris", "cheap flights rome", "weather paris"]
LABELS = sp.csr_matrix(([1.0] * 5, ([0, 1, 2, 3, 4], [0, 0, 1, 1, 2])), shape=(5, 4))  # label 3: no document


@pytest.fixture()
def channel() -> LexicalChannel:
    return LexicalChannel.fit(DOCS, LABELS, LexicalConfig(min_df=1, neighbours=2))


def test_similar_training_documents_vote_for_their_labels(channel: LexicalChannel) -> None:
    scores, ids = channel.search(["yahooo login", "flights to rome", "zzz unknown"], k=3)
    assert ids[0, 0] == 0 and scores[0, 0] == pytest.approx(1.0), "the misspelling is remembered as a word"
    assert ids[1, 0] == 1
    assert (ids[2] == -1).all() and np.isneginf(scores[2]).all(), "no shared word: the channel abstains"
    assert 3 not in ids, "a label no training document carries gets no lexical vote"


def test_the_channel_survives_a_save_and_load(channel: LexicalChannel, tmp_path: Path) -> None:
    queries = ["yahooo", "paris weather", "cheap rome"]
    again = LexicalChannel.load(channel.save(tmp_path / "lexical"))
    for a, b in zip(channel.search(queries, 4), again.search(queries, 4), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_query_is_weighted_exactly_as_scikit_learn_weights_the_documents(channel: LexicalChannel) -> None:
    from xc_core.classifier.lexical import _vectorizer

    reference = _vectorizer(channel.cfg, channel.vocabulary)
    reference.idf_ = channel.idf
    for text in ["Yahooo MAIL mail login", "cheap flights flights paris rome", "zzz"]:
        features, weights = channel._query(text)
        row = np.zeros(len(channel.vocabulary), dtype=np.float32)
        row[features] = weights
        np.testing.assert_allclose(row, reference.transform([text]).toarray()[0], atol=1e-6)


def test_a_tie_at_the_neighbour_cut_keeps_the_earlier_document() -> None:
    # two identical documents carrying different labels; one neighbour votes
    labels = sp.csr_matrix(([1.0, 1.0], ([0, 1], [1, 0])), shape=(2, 2))
    channel = LexicalChannel.fit(["red shoes", "red shoes"], labels, LexicalConfig(min_df=1, neighbours=1))
    for _ in range(3):
        ids, scores = channel.scores("red shoes")
        assert ids.tolist() == [1] and scores.tolist() == [1.0], "document 0's label, every time"


def test_no_usable_words_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="min_df"):
        LexicalChannel.fit(["a b", "c d"], sp.identity(2, format="csr"), LexicalConfig(min_df=2))


def test_a_zero_weight_is_the_dense_search_and_a_positive_one_needs_the_texts(tiny_data: XCDataset,
                                                                               tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    label_vecs = rng.normal(size=(tiny_data.n_labels, 16)).astype(np.float32)
    label_vecs /= np.linalg.norm(label_vecs, axis=1, keepdims=True)
    queries = rng.normal(size=(len(tiny_data.test_texts), 16)).astype(np.float32)
    flat = IndexConfig(kind="flat")
    index = LabelIndex.build(label_vecs, None, flat)
    lexical = LexicalChannel.fit(tiny_data.train_texts, tiny_data.y_train, LexicalConfig())
    texts = list(tiny_data.test_texts)
    dense = FusedClassifier(label_vecs, Fusion(alpha=0.5), 20)
    off = FusedClassifier(label_vecs, Fusion(alpha=0.5, lexical_weight=0.0), 20, channels={"lexical": lexical})
    on = FusedClassifier(label_vecs, Fusion(alpha=0.5, lexical_weight=0.5), 20, channels={"lexical": lexical})
    base = fused_search(queries, index, index, label_vecs, dense, 10)
    for a, b in zip(base, fused_search(queries, index, index, label_vecs, off, 10, texts=texts), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="query texts"):
        fused_search(queries, index, index, label_vecs, on, 10)
    _, with_words = fused_search(queries, index, index, label_vecs, on, 10, texts=texts)
    assert not np.array_equal(with_words, base[1]), "the lexical channel changes the ranking"
    # and the words find the test documents' true labels where random dense vectors do not
    def found(top: np.ndarray) -> float:
        return float(np.mean([np.isin(ids[ids >= 0], tiny_data.y_test[row].indices).any()
                              for row, ids in enumerate(top)]))

    assert found(lexical.search(texts, 10)[1]) > 0.5 > found(base[1])
    assert found(with_words) > found(base[1])
    # saved with its weight, loaded with its channel; a zero weight saves no channel
    loaded = FusedClassifier.load(on.save(tmp_path / "on"))
    assert loaded.active("lexical") is not None and loaded.weight("lexical") == 0.5
    assert not (off.save(tmp_path / "off") / "lexical").exists()
    assert FusedClassifier.load(tmp_path / "off").active("lexical") is None


@pytest.mark.parametrize("shuffled", [False, True])
def test_the_lexical_channel_is_kept_only_when_its_validation_gain_is_significant(tiny_data: XCDataset,
                                                                                   shuffled: bool) -> None:
    """Random dense vectors (256-d: cosines near 0), the test documents as the held-out rows: words that vote for
    the true labels win clearly (kept); the same channel voting for random labels is noise (not kept, the
    dense fusion stays)."""
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.stage import FusionGrid, choose_fusion
    from xc_core.evaluation.metrics import propensity

    rng = np.random.default_rng(1)
    y = sp.csr_matrix(tiny_data.y_train)
    n, n_labels = y.shape  # shuffled: each document votes for one uniformly drawn label (no popularity either)
    noise = sp.csr_matrix((np.ones(n), (np.arange(n), rng.integers(0, n_labels, n))), shape=y.shape)
    voters = noise if shuffled else y
    lexical = LexicalChannel.fit(list(tiny_data.train_texts), voters, LexicalConfig())
    vecs = rng.normal(size=(tiny_data.n_labels, 256)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    queries = rng.normal(size=(len(tiny_data.test_texts), 256)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    grid = FusionGrid(queries, sp.csr_matrix(tiny_data.y_test), vecs, vecs, 20, tiny_data.filter_pairs,
                      propensity(tiny_data), {"lexical": lexical}, list(tiny_data.test_texts))
    cfg = ClassifierConfig(alphas=(0.5,))
    best, tests, _ = choose_fusion(grid, cfg)
    test = tests["fusion"]
    assert test["kept"] is (not shuffled) and (best["lexical_weight"] > 0) is (not shuffled)
    assert (test["low"] > 0) is (not shuffled)
