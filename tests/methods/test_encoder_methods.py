"""Dual-encoder methods configure the one trainer: AugGT's label propagation on a hand-made graph, what each ablation
switches off, and validation recall scored against the original labels whatever a method trains on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.methods.auggt import propagate_labels
from xc_core.methods.encoder import encoder_method
from xc_core.training.config import TrainConfig


def _with_y(data: XCDataset, y: sp.csr_matrix, anchors: dict[str, AnchorSet]) -> XCDataset:
    return XCDataset(data.name, data.train_texts[: y.shape[0]], data.test_texts, data.label_texts[: y.shape[1]], y,
                     data.y_test[:, : y.shape[1]], data.train_ids[: y.shape[0]], data.test_ids,
                     data.label_ids[: y.shape[1]], anchors, data.filter_pairs, data.test_novel,
                     data.label_novel[: y.shape[1]], data.test_decile, dict(data.meta))


def test_auggt_adds_labels_reached_through_a_shared_anchor_and_keeps_the_originals(tiny_data: XCDataset) -> None:
    # documents 0 and 1 share anchor 0, so each gains the labels of the other; document 2 alone has anchor 1
    y = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]], dtype=np.float32))
    anchors = {"g": AnchorSet("g", ["a0", "a1"], np.array([[0, 0], [1, 0], [2, 1]]), np.zeros((0, 2), int))}
    out = propagate_labels(_with_y(tiny_data, y, anchors), extra=2).toarray()
    assert out.tolist() == [[1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 1]]
    assert propagate_labels(_with_y(tiny_data, y, anchors), extra=1).toarray()[0].tolist() == [1, 1, 0, 0]


@pytest.mark.parametrize(("name", "expected"), [
    ("dual_encoder", {"regularize": False}),
    ("ramen", {"regularize": True, "prune": True, "bandit": True}),
    ("ramen_no_pruning", {"regularize": True, "prune": False}),
    ("ramen_no_doc_graph", {"doc_sets": [], "label_sets": None}),
    ("ramen_no_label_graph", {"label_sets": [], "doc_sets": None}),
    ("ramen_no_bandit", {"bandit": False, "regularize": True}),
    ("auggt", {"regularize": False, "prune": False, "bandit": False}),
])
def test_each_method_switches_exactly_its_ingredient(name: str, expected: dict[str, object]) -> None:
    cfg = encoder_method(name).configure(TrainConfig())
    assert {k: getattr(cfg, k) for k in expected} == expected


def test_auggt_validation_recall_is_scored_on_the_original_labels(tiny_data: XCDataset, tiny_home: Path,
                                                                  tmp_path: Path) -> None:
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    method = encoder_method("auggt")
    cfg = method.configure(profile.train)
    augmented = method.prepare(tiny_data, cfg)
    assert augmented.y_train.nnz > tiny_data.y_train.nnz
    enc = encoder_config(profile, tiny_home)
    # the event log's temporal split scores the clicks of its validation days whatever the method trains on, and
    # training keeps the added pairs (they have no click day), minus only the pairs first clicked in those days
    temporal = Trainer(augmented, enc, cfg, tmp_path / "t")
    added = (augmented.y_train - augmented.y_train.multiply(tiny_data.y_train)).tocsr()
    assert temporal.split.kind == "temporal" and added.nnz and temporal.data.y_train.multiply(added).nnz == added.nnz
    assert temporal.val_truth is temporal.split.y_val
    cfg = cfg.model_copy(update={"val_split": "documents"})  # held-out documents: scored on what the caller passes
    as_trained = Trainer(augmented, enc, cfg, tmp_path / "a")
    scored_alike = Trainer(augmented, enc, cfg, tmp_path / "b", val_truth=tiny_data.y_train)
    reference = Trainer(tiny_data, enc, cfg, tmp_path / "c")  # same untrained encoder, original labels
    assert scored_alike.validation_recall() == pytest.approx(reference.validation_recall())
    assert as_trained.validation_recall() != pytest.approx(reference.validation_recall())


def test_every_data_set_gets_the_profile_recipe_then_overrides_then_the_methods_switches() -> None:
    from xc_core.methods.encoder.training import train_config
    from xc_core.profiles import get_profile

    demo = get_profile("demo")
    wiki = train_config(encoder_method("ramen"), demo)
    assert (wiki.lr, wiki.batching, wiki.regularize, wiki.tower) == (2e-5, "random", True, True)
    assert train_config(encoder_method("ramen"), demo).lr == demo.train.lr
    assert train_config(encoder_method("dual_encoder"), demo, {"lr": 1e-4, "regularize": True}).lr == 1e-4
    assert not train_config(encoder_method("dual_encoder"), demo, {"regularize": True}).regularize


def test_a_setting_the_method_would_ignore_is_refused_before_anything_is_removed(tiny_data: XCDataset,
                                                                                 tmp_path: Path) -> None:
    """``--set bandit=false`` on ramen used to train with the bandit on (the method's switches win), and a misspelt
    field trained the profile's recipe: both are refused now, naming the fix, and an earlier model stays."""
    from xc_core.methods import get_method
    from xc_core.methods.base import SettingError, check_settings
    from xc_core.paths import model_dir
    from xc_core.stages.train import train_method

    earlier = model_dir(tmp_path, tiny_data.name, "ramen", "tiny") / "encoder" / "weights"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("an earlier model")
    for settings, says in (({"bandit": False}, "sets bandit=True itself .* train ramen_no_bandit instead"),
                           ({"regularize": False, "prune": False, "bandit": False}, "train dual_encoder or"),
                           ({"lamda_reg": 1.0}, "no setting named lamda_reg \\(did you mean lambda_reg")):
        with pytest.raises(SettingError, match=says):
            train_method(tiny_data, "ramen", "tiny", tmp_path, overrides=settings)
    assert earlier.read_text() == "an earlier model"
    # the same value as the method's own switch, TrainConfig's fields, and a method's own config are accepted
    check_settings(get_method("ramen"), {"bandit": True, "lambda_reg": 2.0})
    check_settings(get_method("irene"), {"stage_one": "dual_encoder", "lr": 1e-3})
    with pytest.raises(SettingError, match="IreneConfig's"):
        check_settings(get_method("irene"), {"stage_uno": "dual_encoder"})


def test_a_graph_method_restricted_to_some_anchor_sets_is_a_method_variant() -> None:
    from xc_core.methods.encoder import encoder_method

    links = encoder_method("ramen@links")
    assert links.name == "ramen@links" and links.needs_anchor_sets
    assert links.overrides["doc_sets"] == ["links"] and links.overrides["label_sets"] == ["links"]
    # an ablation keeps its own cut: no document graph stays no document graph
    assert encoder_method("ramen_no_doc_graph@links+categories").overrides["doc_sets"] == []
    with pytest.raises(ValueError, match="only a method that trains on anchor sets"):
        encoder_method("dual_encoder@links")
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        encoder_method("nope@links")
