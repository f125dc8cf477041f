"""Issue #32: brand- / location-safe training from item metadata and query text (training/attributes.py).

Hand-made inputs pin the rules (which label is another brand's, which anchor edge crosses, which negatives are
mined, how the extra softmax column scores); on the tiny simulated home the trainer mines them and filters the
anchor sets; on aol-1000, wikispeedia and an XC folder (no item metadata) both switches change nothing at all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.training.attributes import (
    AttributeIndex,
    crossing_edges,
    mine_negatives,
    mismatch_matrix,
    without_crossing_edges,
)

LABELS = ["acme running shoes", "zenith running shoes", "running shoes", "acme socks", "plumber san diego",
          "plumber boston"]
ATTRIBUTES = {"brand": ["Acme", "Zenith", None, "acme", None, None],
              "location": [None, None, None, None, "San Diego", "Boston"]}
SWITCHES = {"attribute_negatives": 5, "attribute_anchor_filter": True}


def _index() -> AttributeIndex:
    index = AttributeIndex.build(ATTRIBUTES, LABELS)
    assert index is not None
    return index


# -- the rules on hand-made inputs -----------------------------------------------------------------------------------
def test_no_index_without_a_carried_value() -> None:
    assert AttributeIndex.build({}, LABELS) is None
    assert AttributeIndex.build({"brand": [None] * len(LABELS), "location": ["", None, "", None, None, None]},
                                LABELS) is None
    assert _index().attributes == ["brand", "location"]
    assert _index().lexicons["brand"] == ["acme", "zenith"]  # lower-cased words, one value per spelling


def test_mismatch_is_a_label_carrying_a_value_the_query_does_not_name() -> None:
    queries = ["acme running shoes", "cheap running shoes", "plumber in san diego", "acme or zenith shoes",
               "acmeshoes"]
    dense = mismatch_matrix(_index(), queries).toarray()
    expected = np.zeros((5, 6), dtype=bool)
    expected[0, 1] = True  # zenith for an acme query; the unbranded "running shoes" is no mismatch
    expected[2, 5] = True  # boston for a san diego query
    # names both brands: neither is a mismatch; "acmeshoes" names none (whole words only)
    np.testing.assert_array_equal(dense, expected)


def test_mined_negatives_are_the_most_similar_mismatches_never_a_positive() -> None:
    mismatch = sp.csr_matrix(np.array([[0, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 1]], dtype=bool))
    positives = sp.csr_matrix(np.array([[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=np.float32))
    docs = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], dtype=np.float32)
    labels = np.array([[0.0, 1.0], [0.6, 0.8], [1.0, 0.0], [0.8, 0.6]], dtype=np.float32)
    mined = mine_negatives(docs, labels, mismatch, positives, per_doc=3)
    # row 0: label 2 is a positive; 3 (0.8) before 1 (0.6); row 1: nothing; row 2: 0 (1.0) before 3 (0.6)
    np.testing.assert_array_equal(mined, [[3, 1, -1], [-1, -1, -1], [0, 3, -1]])
    np.testing.assert_array_equal(mine_negatives(docs, labels, mismatch, positives, per_doc=1), [[3], [-1], [0]])


def test_an_edge_crosses_when_its_ends_carry_different_values() -> None:
    docs = ["acme running shoes", "zenith shoes", "running shoes", "plumber san diego"]
    texts = ["zenith running shoes", "acme socks", "cheap shoes", "plumber boston", "acme shoes review"]
    anchors = AnchorSet("t", texts, doc_edges=np.array([(0, 0), (0, 1), (0, 2), (1, 4), (2, 0), (3, 3), (3, 2)]),
                        label_edges=np.array([(0, 0), (0, 1), (1, 4), (2, 0), (4, 3), (5, 3)]))
    doc_cross, label_cross = crossing_edges(anchors, _index(), docs)
    # doc 0 (acme) → zenith anchor crosses; → "acme socks" (a label: brand acme) and "cheap shoes" do not;
    # doc 1 (zenith) → "acme shoes review" (names acme) crosses; an unbranded doc never crosses;
    # doc 3 (san diego) → boston crosses
    np.testing.assert_array_equal(doc_cross, [True, False, False, True, False, True, False])
    # label 0 (acme) → a zenith label's text crosses, → acme socks not; label 1 (zenith) → "acme shoes review"
    # crosses; label 2 has no brand; label 4 (san diego) → boston crosses, label 5 (boston) → boston does not
    np.testing.assert_array_equal(label_cross, [True, False, True, False, True, False])
    kept, dropped = without_crossing_edges(anchors, _index(), docs)
    assert dropped == 6 and len(kept.doc_edges) == 4 and len(kept.label_edges) == 3
    assert without_crossing_edges(anchors, None, docs) == (anchors, 0)


def test_the_row_negative_enters_only_its_own_row_softmax() -> None:
    from xc_core.training.losses import InBatchSoftmaxLoss, in_batch_softmax

    torch.manual_seed(0)
    docs = torch.nn.functional.normalize(torch.randn(4, 8), dim=1)
    labels = torch.nn.functional.normalize(torch.randn(4, 8), dim=1)
    hard = torch.nn.functional.normalize(torch.randn(4, 8), dim=1)
    hard[0] = docs[0]  # row 0's extra negative: as close to its document as anything can be
    positive = torch.eye(4, dtype=torch.bool)
    loss = InBatchSoftmaxLoss(scale=20.0)
    plain = loss(docs, labels, positive)
    none = loss(docs, labels, positive, hard_emb=hard, hard_valid=torch.zeros(4, dtype=torch.bool))
    assert float(none) == pytest.approx(float(plain), abs=1e-6)
    assert float(plain) == pytest.approx(float(in_batch_softmax(docs @ labels.T, ~positive, 20.0)), abs=1e-6)
    valid = torch.tensor([True, False, False, False])
    with_hard = loss(docs, labels, positive, hard_emb=hard, hard_valid=valid)
    scores = 20.0 * (docs @ labels.T)
    rows = [torch.logsumexp(torch.cat([scores[0], (20.0 * docs[0] @ hard[0])[None]]), 0) - scores[0, 0],
            *(torch.logsumexp(scores[i], 0) - scores[i, i] for i in range(1, 4))]
    assert float(with_hard) == pytest.approx(float(torch.stack(rows).mean()), abs=1e-5)
    assert float(with_hard) > float(plain) + 0.1
    with pytest.raises(ValueError, match="hard_emb"):
        loss(docs, labels, positive, hard_emb=hard[:2], hard_valid=valid)


def test_a_pool_draws_last_and_never_gives_a_positive() -> None:
    from xc_core.training.batches import BatchBuilder

    y = sp.csr_matrix(np.array([[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0]], dtype=np.float32))
    docs = ["acme running shoes", "zenith running shoes", "running shoes"]
    plain = BatchBuilder.from_anchor_sets(docs, LABELS, y, {}, [], [])
    pool = np.array([[1, 4, -1], [-1, -1, -1], [3, -1, -1]])  # doc 2's only candidate is its own positive
    pooled = BatchBuilder.from_anchor_sets(docs, LABELS, y, {}, [], [], hard_pool=pool)
    for seed in range(20):
        a, b = plain.build(np.arange(3), np.random.default_rng(seed)), pooled.build(np.arange(3),
                                                                                    np.random.default_rng(seed))
        np.testing.assert_array_equal(a.label_ids, b.label_ids)  # the other draws are unchanged
        assert a.hard_label_ids is None and b.hard_label_ids is not None
        assert b.hard_label_ids is not None  # (for the type checker)
        assert b.hard_label_ids[0] in (1, 4) and b.hard_label_ids[1] == -1 and b.hard_label_ids[2] == -1
        assert b.hard_texts[1] == "" and b.hard_texts[0] == LABELS[b.hard_label_ids[0]]
    drawn = {int(np.asarray(pooled.build(np.arange(3), np.random.default_rng(s)).hard_label_ids)[0])
             for s in range(20)}
    assert drawn == {1, 4}


# -- the trainer on the tiny simulated home (labels carry brand and location) ---------------------------------------
def test_the_trainer_mines_other_brands_and_places_and_filters_crossing_anchors(
        tiny_data: XCDataset, tiny_home: Path, tmp_path: Path) -> None:
    from xc_core.evaluation.mismatch import named_values, words
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    assert tiny_data.label_attributes  # the simulated events carry brand and location
    trainer = Trainer(tiny_data, encoder_config(profile, tiny_home), profile.train.model_copy(update=SWITCHES),
                      tmp_path / "m")
    trainer._mine_negatives(0)
    assert trainer.hard_pool is not None
    rows = np.flatnonzero(trainer.hard_pool[:, 0] >= 0)
    assert len(rows) and set(rows) <= set(trainer.train_idx)
    lexicons = {a: sorted({" ".join(words(v)) for v in vals if v}) for a, vals in tiny_data.label_attributes.items()}
    for doc in rows:
        text = tiny_data.train_texts[doc]
        for label in trainer.hard_pool[doc][trainer.hard_pool[doc] >= 0]:
            assert tiny_data.y_train[doc, label] == 0
            # some attribute: the query names a value, the label carries another
            assert any(named_values([text], lexicons[a])[0]
                       and tiny_data.label_attributes[a][label] is not None
                       and lexicons[a].index(" ".join(words(tiny_data.label_attributes[a][label])))
                       not in named_values([text], lexicons[a])[0] for a in lexicons)
    assert sum(trainer.attribute_anchor_edges.values()) > 0 and trainer.attributes is not None
    for name, anchors in trainer.full_anchors.items():
        doc_cross, label_cross = crossing_edges(anchors, trainer.attributes, tiny_data.train_texts)
        assert not doc_cross.any() and not label_cross.any(), name
    batch = trainer.builder.build(trainer.train_idx[:16], np.random.default_rng(0))
    assert batch.hard_label_ids is not None
    losses = trainer.losses(batch)
    assert torch.isfinite(losses["task"])
    metrics = trainer.validation_metrics()
    assert any(k.endswith("_mismatch@100") for k in metrics)


def test_training_with_attribute_negatives_lowers_the_score_of_the_mined_labels(tiny_data: XCDataset,
                                                                                tiny_home: Path,
                                                                                tmp_path: Path) -> None:
    """The same training without and with the negatives: with them the documents score their mined labels of
    another brand / place lower (what the A/B counts as bad matches), relative to their own positives."""
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    gaps = {}
    probe = None
    for negatives in (0, 20):
        cfg = profile.train.model_copy(update={"attribute_negatives": negatives, "regularize": False, "prune": False,
                                               "bandit": False, "select_best": False, "epochs": 3,
                                               "val_split": "documents"})  # the training rows it was written for
        trainer = Trainer(tiny_data, encoder_config(profile, tiny_home), cfg, tmp_path / str(negatives))
        if probe is None:  # the pairs probed: the starting encoder's mined labels, one fixed set for both runs
            probe_trainer = Trainer(tiny_data, encoder_config(profile, tiny_home),
                                    cfg.model_copy(update={"attribute_negatives": 20}), tmp_path / "probe")
            probe_trainer._mine_negatives(0)
            assert probe_trainer.hard_pool is not None
            probe = probe_trainer.hard_pool
        trainer.fit()
        rows = np.flatnonzero(probe[:, 0] >= 0)
        docs = trainer.encode([tiny_data.train_texts[r] for r in rows])
        labels = trainer.encode(tiny_data.label_texts)
        y = sp.csr_matrix(tiny_data.y_train)
        gap = []
        for i, r in enumerate(rows):
            mined = probe[r][probe[r] >= 0]
            gap.append(float((labels[y[r].indices] @ docs[i]).mean() - (labels[mined] @ docs[i]).mean()))
        gaps[negatives] = float(np.mean(gap))
    assert gaps[20] > gaps[0] + 0.02, gaps


# -- no item metadata: nothing changes --------------------------------------------------------------------------------
def _assert_unchanged(data: XCDataset, home: Path) -> None:
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    assert not data.label_attributes
    profile = get_profile("tiny")
    cfg = profile.train.model_copy(update={"max_train_docs": 200, "val_max_labels": 500,
                                           "regularize": bool(data.anchor_sets)})  # an XC folder has none
    off = Trainer(data, encoder_config(profile, home), cfg, home / "off")
    on = Trainer(data, encoder_config(profile, home), cfg.model_copy(update=SWITCHES), home / "on")
    assert on.attributes is None and on.attribute_anchor_edges == {}
    for name, anchors in off.full_anchors.items():
        np.testing.assert_array_equal(on.full_anchors[name].doc_edges, anchors.doc_edges)
        np.testing.assert_array_equal(on.full_anchors[name].label_edges, anchors.label_edges)
    on._mine_negatives(0)
    assert on.hard_pool is None
    rows = on.train_idx[:16]
    a, b = off.builder.build(rows, np.random.default_rng(1)), on.builder.build(rows, np.random.default_rng(1))
    assert b.hard_label_ids is None and a.label_texts == b.label_texts
    for name, side in a.doc_anchors.items():
        assert b.doc_anchors[name].texts == side.texts
    assert set(on.validation_metrics()) == {"recall@10", "P@1", "P@5"}


def test_nothing_changes_on_aol_1000(aol_slice: Path, tmp_path: Path) -> None:
    from xc_core.datasets.definitions import builtin_definitions
    from xc_core.datasets.events import build_events_dataset
    from xc_core.logs.ingest import Source, ingest
    from xc_core.logs.store import EventStore

    ingest([Source("aol", aol_slice)], tmp_path, progress=False)
    built = build_events_dataset(EventStore(tmp_path), tmp_path / "graphs",
                                 builtin_definitions()["aol-1000"].events_config(None))
    data = XCDataset.load(built.save(tmp_path / "aol"))
    assert any(len(a.doc_edges) + len(a.label_edges) for a in data.anchor_sets.values())
    _assert_unchanged(data, tmp_path)


def test_nothing_changes_on_wikispeedia(tmp_path: Path) -> None:
    from tests.datasets.test_wikispeedia import real_dir
    from xc_core.datasets.wikispeedia import build_wikispeedia

    _assert_unchanged(build_wikispeedia(real_dir(), seed=0), tmp_path)


def test_nothing_changes_on_an_xc_repository_folder(tmp_path: Path) -> None:
    from tests.datasets.test_xc_repo import plain_folder
    from xc_core.datasets.xc_repo import read_xc_repo

    _assert_unchanged(read_xc_repo(plain_folder(tmp_path / "xc")), tmp_path)


# -- validation rows from the documents the subsample never trains on ------------------------------------------------
def test_unused_documents_validate_up_to_val_max_and_nothing_else_moves() -> None:
    from xc_core.training.config import TrainConfig
    from xc_core.training.validation import split_validation

    base = TrainConfig(max_train_docs=2000, val_max=1000, val_fraction=0.05, val_min=10)  # no floor here
    train, val = split_validation(5000, base)
    more_train, more_val = split_validation(5000, base.model_copy(update={"val_from_unused": True}))
    assert len(val) == 250 and len(more_val) == 1000 and set(val) <= set(more_val)  # the same order, a longer prefix
    assert len(more_train) == 4000 >= base.max_train_docs and not set(more_train) & set(more_val)
    # the unused documents are fewer than the fraction's rows, or there is no subsample: the split is unchanged
    for n, cfg in ((2100, base), (5000, base.model_copy(update={"max_train_docs": None}))):
        plain = split_validation(n, cfg)
        flagged = split_validation(n, cfg.model_copy(update={"val_from_unused": True}))
        assert all((a == b).all() for a, b in zip(plain, flagged, strict=True))
    capped = split_validation(20_000, base.model_copy(update={"val_from_unused": True}))
    assert len(capped[1]) == 1000  # val_max still bounds it (the fraction alone gives 1,000 here too)


@pytest.mark.parametrize(("n", "expected"), [(100_000, 2000), (20_000, 1000), (3000, 600), (200, 40)])
def test_validation_is_sized_for_power_a_fraction_with_a_floor_and_a_cap(n: int, expected: int) -> None:
    """5% of the documents, at least val_min (1,000) rows where that holds out at most val_min_share (20%), at most
    val_max (2,000): 160 rows on a 3,200-document set could not see a gain of a few points."""
    from xc_core.training.config import TrainConfig
    from xc_core.training.validation import split_validation

    train, val = split_validation(n, TrainConfig())
    assert len(val) == expected and len(train) == n - expected and not set(train) & set(val)
