"""The name channel (classifier/names.py): which labels a query names, how the stage chooses it out of fold, and that a
saved classifier serves it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.classifier.names import NAMES_FILE, LabelNames, name_key, name_score


def test_a_name_scores_by_how_much_of_the_longer_text_the_shorter_one_is() -> None:
    assert name_key(" Bank of\tAmerica ") == "bankofamerica"
    assert name_score("bankofamerica", "bankofamerica") == 1.0
    assert name_score(name_key("bank of america online"), "bankofamerica") == pytest.approx((13 / 19) ** 2)
    assert name_score("myspace", "myspacecodes") == pytest.approx((7 / 12) ** 2), "a query the name contains"
    assert name_score("bankofamerica", "wellsfargo") == 0.0
    assert name_score("tvguide", "tv") == 0.0, "a text under 4 characters names nothing"


def test_the_labels_a_query_names_are_found_without_scanning_the_catalogue() -> None:
    names = LabelNames.fit(["bank of america", "bankofamerica", "america", "com", "", "wells-fargo"])
    ids, scores = names.named_in("www.BankOfAmerica.com")
    assert ids.tolist() == [0, 1, 2], "every label whose name occurs in the query, the short and empty ones aside"
    assert scores.tolist() == pytest.approx([(13 / 21) ** 2, (13 / 21) ** 2, (7 / 21) ** 2])
    scores, ids = names.search(["bank of america", "nothing here", "america"], k=2)
    assert ids.tolist() == [[0, 1], [-1, -1], [2, -1]], "best first (ties: the lower id), at most k, −1 padded"
    assert scores[0].tolist() == [1.0, 1.0] and scores[1].sum() == 0
    on = names.scores_on(["americas", "bank", "ban"], np.array([[2, 0, -1], [0, 5, 99], [0, 1, 2]]))
    assert on.ravel().tolist() == pytest.approx([(7 / 8) ** 2, 0, 0, (4 / 13) ** 2, 0, 0, 0, 0, 0]), \
        "a candidate's name containing the query scores too; pads, unknown ids and short queries score 0"


def test_the_stage_serves_the_name_channel_where_queries_name_their_labels() -> None:
    """Every row's truth is the label its query spells out, which the encoder ranks below a decoy: the name channel
    wins out of fold and is served. Where the named label is not the truth, it is not."""
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig
    from xc_core.classifier.stage import FusionGrid, choose_fusion

    rng = np.random.default_rng(0)
    n_labels, n_rows, dim = 100, 400, 32
    labels = rng.normal(size=(n_labels, dim)).astype(np.float32)
    labels /= np.linalg.norm(labels, axis=1, keepdims=True)
    label_texts = [f"site{i:03d}shop" for i in range(n_labels)]
    positive = rng.integers(0, n_labels, n_rows)
    decoy = (positive + 1) % n_labels
    queries = 0.5 * labels[positive] + 0.7 * labels[decoy] + 0.05 * rng.normal(size=(n_rows, dim))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    truth = sp.csr_matrix((np.ones(n_rows), (np.arange(n_rows), positive)), shape=(n_rows, n_labels))
    cfg = ClassifierConfig(alphas=(1.0,), lexical=LexicalConfig(weights=(0.0,)), memory_weights=(0.0,),
                           popularity_weights=(0.0,))
    for case, named in (("truth", positive), ("elsewhere", (positive + 50) % n_labels)):
        texts = [f"site {n:03d} shop" for n in named]
        grid = FusionGrid(queries, truth, labels, labels, 5, np.empty((0, 2), np.int64), np.ones(n_labels),
                          channels={"names": LabelNames.fit(label_texts)}, texts=texts)
        served, tests, _ = choose_fusion(grid, cfg)
        assert tests["fusion"]["kept"] is (case == "truth"), (case, tests["fusion"]["reason"])
        assert (served["name_weight"] > 0) is (case == "truth")
        if case == "truth":
            assert served["P@1"] == 1.0, "the named label joins the 5-deep shortlist and outranks the decoy"


def test_a_saved_classifier_serves_its_name_channel(tmp_path: Path) -> None:
    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.fusion import FusedClassifier, fused_search
    from xc_core.index import IndexConfig, LabelIndex

    rng = np.random.default_rng(1)
    labels = rng.normal(size=(30, 16)).astype(np.float32)
    labels /= np.linalg.norm(labels, axis=1, keepdims=True)
    names = LabelNames.fit([f"label{i}" for i in range(29)] + ["bankofamerica"])
    fused = FusedClassifier(labels, Fusion(name_weight=1.6), 3, channels={"names": names})
    loaded = FusedClassifier.load(fused.save(tmp_path / "c"))
    assert loaded.weight("names") == 1.6 and loaded.active("names") is not None
    assert (tmp_path / "c" / NAMES_FILE).exists()
    index = LabelIndex.build(labels, None, IndexConfig(kind="flat"))
    query = labels[[12]]
    _, ids = fused_search(query, index, index, labels, loaded, 3, texts=["Bank of America"])
    assert ids[0, 0] == 29, "the named label first, though the 3-deep ANN shortlists never held it"
    _, ids = fused_search(query, index, index, labels, loaded, 3, texts=["cheap hotels"])
    assert ids[0, 0] == 12, "a query naming no label keeps the encoder's ranking"
    with pytest.raises(ValueError, match=r"read the query texts \(names\): pass the query texts"):
        fused_search(query, index, index, labels, loaded, 3)
    alone = loaded.classifier_alone()
    assert not alone.uses_texts and alone.alpha == 0.0, "W alone needs no query texts (predict.py's variant)"
    assert fused_search(query, index, index, labels, alone, 3)[1][0, 0] == 12
    off = FusedClassifier.load(loaded.with_fusion(name_weight=0.0).save(tmp_path / "off"))
    assert "names" not in off.channels and not (tmp_path / "off" / NAMES_FILE).exists()
    (tmp_path / "c" / NAMES_FILE).write_text('{"bankofamerica": 29}')
    with pytest.raises(ValueError, match=f"{NAMES_FILE}: expected a JSON list of strings, one per label"):
        FusedClassifier.load(tmp_path / "c")
    (tmp_path / "c" / NAMES_FILE).write_text('["bankofamerica", ')
    with pytest.raises(ValueError, match="not a JSON list of label names"):
        FusedClassifier.load(tmp_path / "c")
    (tmp_path / "c" / NAMES_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=NAMES_FILE):
        FusedClassifier.load(tmp_path / "c")
