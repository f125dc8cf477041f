"""The click memory and label popularity (classifier/memory.py): what they remember, how the stage chooses them out
of fold, and that a saved classifier serves them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.classifier.memory import ClickMemory, label_popularity, memory_key


def _clicks(rows: list[dict[int, float]], n_labels: int) -> sp.csr_matrix:
    data = [(r, label, days) for r, row in enumerate(rows) for label, days in row.items()]
    r, c, v = zip(*data, strict=True)
    return sp.csr_matrix((np.array(v, np.float32), (r, c)), shape=(len(rows), n_labels))


def test_the_memory_scores_a_repeated_querys_labels_by_click_days_and_merges_texts_that_match() -> None:
    clicks = _clicks([{3: 28.0, 5: 1.0}, {5: 2.0}, {1: 4.0}, {}], 8)
    memory = ClickMemory.fit(["Bank of America", "bank  of america", "maps", "never clicked"], clicks)
    assert memory.keys == ["bank of america", "maps"], "one row per key; a document without a click is left out"
    ids, scores = memory.scores("BANK OF america ")
    assert ids.tolist() == [3, 5] and scores.tolist() == pytest.approx([1.0, 3.0 / 28.0])
    assert len(memory.scores("bank of americas")[0]) == 0, "only the exact text (case and spaces aside) matches"
    assert len(memory.scores("america bank of")[0]) == 0, "word order tells queries apart"
    assert len(memory.scores("never clicked")[0]) == 0
    assert len(ClickMemory.fit(["  ", "maps"], _clicks([{2: 1.0}, {1: 1.0}], 8)).scores(" ")[0]) == 0, \
        "an empty text is remembered for no query"
    scores, ids = memory.search(["maps", "unknown", "bank of america"])
    assert ids.tolist() == [[1, -1], [-1, -1], [3, 5]] and scores[0, 0] == 1.0 and scores[1].sum() == 0
    scores, ids = memory.search(["maps", "bank of america"], k=1)
    assert ids.tolist() == [[1], [3]], "capped at k per row, the most clicked kept"


def test_popularity_is_log_click_days_over_the_most_clicked_labels() -> None:
    popularity = label_popularity(_clicks([{0: 9.0, 1: 1.0}, {0: 3.0}], 4))
    assert popularity.tolist() == pytest.approx([1.0, np.log(2) / np.log(13), 0.0, 0.0])
    assert label_popularity(sp.csr_matrix((2, 3), dtype=np.float32)).tolist() == [0.0, 0.0, 0.0]
    assert memory_key("  A\tB ") == "a b"


def test_click_days_count_each_day_and_stop_before_a_block() -> None:
    from xc_core.datasets.container import XCDataset

    y = sp.csr_matrix(np.array([[1, 0], [1, 1]], np.float32))
    pair_days = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 5], [1, 1, 2], [1, 0, 4]], np.int64)
    data = XCDataset(name="days", train_texts=["a", "b"], test_texts=["a"], label_texts=["x", "y"], y_train=y,
                     y_test=sp.csr_matrix(np.array([[1, 0]], np.float32)), train_pair_days=pair_days)
    assert data.click_days().toarray().tolist() == [[3, 0], [1, 1]]
    assert data.click_days(before_day=3).toarray().tolist() == [[2, 0], [0, 1]]
    folder = XCDataset(name="folder", train_texts=["a", "b"], test_texts=["a"], label_texts=["x", "y"], y_train=y,
                       y_test=sp.csr_matrix(np.array([[1, 0]], np.float32)))
    assert folder.click_days().toarray().tolist() == y.toarray().tolist(), "no click days: a pair counts once"


def test_the_stage_serves_the_memory_where_repeated_queries_click_what_they_clicked_before() -> None:
    """Every scored row is a repeated query whose truth is its most clicked training label, which the encoder ranks
    below a decoy: the memory wins out of fold and is served. Where the remembered labels are not the truth, it is
    not."""
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig
    from xc_core.classifier.stage import FusionGrid, choose_fusion

    rng = np.random.default_rng(0)
    n_labels, n_rows, dim = 100, 400, 32
    labels = rng.normal(size=(n_labels, dim)).astype(np.float32)
    labels /= np.linalg.norm(labels, axis=1, keepdims=True)
    positive = rng.integers(0, n_labels, n_rows)
    decoy = (positive + 1) % n_labels
    queries = 0.5 * labels[positive] + 0.7 * labels[decoy] + 0.05 * rng.normal(size=(n_rows, dim))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    truth = sp.csr_matrix((np.ones(n_rows), (np.arange(n_rows), positive)), shape=(n_rows, n_labels))
    texts = [f"query {i}" for i in range(n_rows)]
    cfg = ClassifierConfig(alphas=(1.0,), lexical=LexicalConfig(weights=(0.0,)), popularity_weights=(0.0,))
    for case, remembered in (("truth", positive), ("elsewhere", (positive + 50) % n_labels)):
        clicks = _clicks([{int(r): 5.0, int(d): 1.0} for r, d in zip(remembered, decoy, strict=True)], n_labels)
        grid = FusionGrid(queries, truth, labels, labels, 20, np.empty((0, 2), np.int64), np.ones(n_labels),
                          channels={"memory": ClickMemory.fit(texts, clicks)}, texts=texts)
        served, tests, _ = choose_fusion(grid, cfg)
        assert tests["fusion"]["kept"] is (case == "truth"), (case, tests["fusion"]["reason"])
        assert (served["memory_weight"] > 0) is (case == "truth")
        if case == "truth":
            assert served["P@1"] == 1.0, "the remembered label outranks the decoy on every row"


def test_a_saved_classifier_serves_its_memory_and_popularity(tmp_path: Path) -> None:
    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.fusion import FusedClassifier, fused_search
    from xc_core.classifier.memory import LabelPopularity
    from xc_core.index import IndexConfig, LabelIndex

    rng = np.random.default_rng(1)
    labels = rng.normal(size=(30, 16)).astype(np.float32)
    labels /= np.linalg.norm(labels, axis=1, keepdims=True)
    memory = ClickMemory.fit(["cheap flights"], _clicks([{29: 7.0, 4: 2.0}], 30))
    popularity = label_popularity(_clicks([{7: 100.0}], 30))
    fused = FusedClassifier(labels, Fusion(memory_weight=6.4, popularity_weight=0.3), 10,
                            channels={"memory": memory, "popularity": LabelPopularity(popularity)})
    loaded = FusedClassifier.load(fused.save(tmp_path / "clf"))
    assert loaded.weight("memory") == 6.4 and loaded.weight("popularity") == 0.3
    assert loaded.active("memory") is not None
    index = LabelIndex.build(labels, None, IndexConfig(kind="flat"))
    query = labels[[12]]
    _, ids = fused_search(query, index, index, labels, loaded, 3, texts=["Cheap  Flights"])
    assert ids[0, :2].tolist() == [29, 4], "the remembered labels first, by their click days"
    _, ids = fused_search(query, index, index, labels, loaded, 3, texts=["cheap hotels"])
    assert ids[0, 0] == 12, "a query never asked in training keeps the encoder's ranking"
    offsets = loaded.label_offsets()
    assert offsets is not None and offsets[7] == pytest.approx(0.3) and offsets[12] == 0.0
    with pytest.raises(ValueError, match=r"read the query texts \(memory\): pass the query texts"):
        fused_search(query, index, index, labels, loaded, 3)
    grown = loaded.with_new_labels(labels[:2])
    grown_popularity = grown.channels["popularity"].label_scores()
    assert grown_popularity is not None and len(grown_popularity) == 32 and grown_popularity[-1] == 0.0
    off = FusedClassifier.load(loaded.with_fusion(memory_weight=0.0, popularity_weight=0.0).save(tmp_path / "off"))
    assert not off.channels and not (tmp_path / "off" / "memory").exists()


def test_popularity_is_chosen_where_the_labels_with_clicks_rank_among_themselves() -> None:
    """Each row's top label is an untrained one it clicked, whatever the popularity weight, so on all labels every ρ
    ties (and the smallest would win). Among the labels with clicks the encoder puts an unclicked, never-clicked
    label above the row's popular positive: ρ ≥ 0.1 orders them, and is the one chosen."""
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig
    from xc_core.classifier.memory import LabelPopularity
    from xc_core.classifier.stage import FusionGrid, choose_fusion

    n_rows, n_labels = 300, 60  # labels 0–14 popular, 15–29 trained without popularity, 30–59 untrained
    labels = np.eye(n_labels, 64, dtype=np.float32)
    popular, decoy, untrained = np.arange(n_rows) % 15, 15 + np.arange(n_rows) % 15, 30 + np.arange(n_rows) % 30
    queries = 0.8 * labels[untrained] + 0.45 * labels[decoy] + 0.38 * labels[popular]
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    rows = np.repeat(np.arange(n_rows), 2)
    truth = sp.csr_matrix((np.ones(2 * n_rows), (rows, np.stack([untrained, popular], 1).ravel())),
                          shape=(n_rows, n_labels))
    popularity = np.r_[np.ones(15), np.zeros(45)].astype(np.float32)
    cfg = ClassifierConfig(alphas=(1.0,), lexical=LexicalConfig(weights=(0.0,)), memory_weights=(0.0,))
    grid = FusionGrid(queries.astype(np.float32), truth, labels, labels, 10, np.empty((0, 2), np.int64),
                      np.ones(n_labels), channels={"popularity": LabelPopularity(popularity)},
                      untrained=np.arange(n_labels) >= 30)
    _, tests, _ = choose_fusion(grid, cfg)
    candidate = tests["fusion"]["candidate"]
    assert candidate.get("popularity_weight") == 0.1, candidate
    assert not candidate.get("untrained_offset"), "the offset cannot help: every row's top is already a positive"

