"""The classifier stage on small real inputs: the tiny simulated data set and a tiny random BERT."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.classifier import ClassifierConfig, FusedClassifier, fused_search
from xc_core.classifier.channels import Fusion, fusion_keys
from xc_core.classifier.train import train_classifier
from xc_core.datasets.container import XCDataset
from xc_core.index import IndexConfig, LabelIndex

FLAT = IndexConfig(kind="flat")


@pytest.fixture(scope="module")
def encoder_dir(tiny_home: Path) -> Path:
    from xc_core.profiles import encoder_config, get_profile

    return Path(encoder_config(get_profile("tiny"), tiny_home).model_path or "")


def _encode(encoder_dir: Path, texts: list[str]) -> np.ndarray:
    from xc_core.encoders.text import encoder_for

    return encoder_for(encoder_dir, 16).encode(texts)


def _search(queries: np.ndarray, labels: np.ndarray, fused: FusedClassifier, k: int) -> np.ndarray:
    return fused_search(queries, LabelIndex.build(labels, None, FLAT), LabelIndex.build(fused.weights, None, FLAT),
                        labels, fused, k)[1]


def test_a_label_with_an_uninformative_text_is_found_through_its_clicks(tiny_data: XCDataset,
                                                                         encoder_dir: Path) -> None:
    """The busiest label gets a meaningless text; half of its clicking documents train W, the other half
    query: the encoder alone cannot rank it, the fused model does."""
    y = sp.csr_matrix(tiny_data.y_train)
    label = int(np.argmax(np.diff(y.tocsc().indptr)))
    texts = list(tiny_data.label_texts)
    texts[label] = "zq"
    docs = np.flatnonzero(y[:, label].toarray().ravel())
    held_out = docs[::2]
    train_rows = np.setdiff1d(np.arange(y.shape[0]), held_out)
    label_vecs = _encode(encoder_dir, texts)
    doc_vecs = _encode(encoder_dir, tiny_data.train_texts)
    fit = train_classifier(label_vecs, doc_vecs[train_rows], y[train_rows], ClassifierConfig(epochs=20, lr=0.01))
    queries = doc_vecs[held_out]

    def found(alpha: float) -> float:
        top = _search(queries, label_vecs, FusedClassifier(fit.weights, Fusion(alpha=alpha), 20), 10)
        return float((top == label).any(axis=1).mean())

    assert len(held_out) >= 5
    # a random tiny BERT puts every text at cosine ~0.9 of every other, so its classifier margins are small
    # next to the encoder's penalty for "zq": a fused weight of 0.1 on the encoder (real encoders spread
    # wider; the stage picks alpha on validation)
    assert found(0.1) >= 0.8, "the fused model ranks the label by its clicks"
    assert found(1.0) <= 0.2, "the encoder alone cannot know a label called 'zq'"


def test_alpha_one_reproduces_the_encoder_only_predictions(tiny_data: XCDataset, encoder_dir: Path,
                                                           tmp_path: Path) -> None:
    from xc_core.encoders.text import encoder_for
    from xc_core.methods.encoder.predict import predict

    encoder = encoder_for(encoder_dir, 16)
    label_vecs = encoder.encode(tiny_data.label_texts)
    rng = np.random.default_rng(0)
    weights = label_vecs + rng.normal(0, 0.5, label_vecs.shape).astype(np.float32)  # a W unlike the encoder
    FusedClassifier(weights / np.linalg.norm(weights, axis=1, keepdims=True), Fusion(), 20).save(tmp_path / "clf")
    plain = predict(tiny_data, encoder, tmp_path / "plain", "runs:/a/encoder", k=10, cfg=FLAT)
    fused = predict(tiny_data, encoder, tmp_path / "fused", "runs:/a/encoder", k=10, cfg=FLAT,
                    classifier_dir=tmp_path / "clf")
    assert (tmp_path / "fused" / "classifier" / "index.faiss").exists()
    a, b = plain.scores.toarray(), fused.scores.toarray()
    assert (a != 0).sum() > 0
    np.testing.assert_array_equal(a != 0, b != 0)
    np.testing.assert_allclose(a, b, atol=1e-5)
    # and the same W with alpha 0 is another ranking: the test above could have told them apart
    FusedClassifier.load(tmp_path / "clf").with_fusion(alpha=0.0).save(tmp_path / "clf0")
    other = predict(tiny_data, encoder, tmp_path / "other", "runs:/a/encoder", k=10, cfg=FLAT,
                    classifier_dir=tmp_path / "clf0")
    assert not np.array_equal(a != 0, other.scores.toarray() != 0)


def test_a_label_without_training_positives_keeps_its_text_vector_and_is_found_by_it(
        tiny_data: XCDataset, encoder_dir: Path) -> None:
    y = sp.lil_matrix(tiny_data.y_train)
    label = int(np.argmax(np.diff(sp.csr_matrix(tiny_data.y_train).tocsc().indptr)))
    y[:, label] = 0
    label_vecs = _encode(encoder_dir, tiny_data.label_texts)
    doc_vecs = _encode(encoder_dir, tiny_data.train_texts)
    fit = train_classifier(label_vecs, doc_vecs, sp.csr_matrix(y), ClassifierConfig(epochs=3, lr=0.01))
    np.testing.assert_allclose(fit.weights[label], label_vecs[label], atol=1e-6)
    assert fit.labels_trained < len(label_vecs)
    trained = np.flatnonzero(np.diff(sp.csr_matrix(y).tocsc().indptr))
    assert not np.allclose(fit.weights[trained], label_vecs[trained], atol=1e-3), "W did move where it had clicks"
    for alpha in (0.0, 0.5, 1.0):
        top = _search(label_vecs[[label]], label_vecs, FusedClassifier(fit.weights, Fusion(alpha=alpha), 20), 5)
        assert label in top[0], f"alpha {alpha}: the label is found by its own text"


def test_labels_added_after_training_are_found_by_their_text_and_take_the_untrained_offset(
        tiny_data: XCDataset, encoder_dir: Path) -> None:
    label_vecs = _encode(encoder_dir, tiny_data.label_texts)
    fit = train_classifier(label_vecs, _encode(encoder_dir, tiny_data.train_texts), sp.csr_matrix(tiny_data.y_train),
                           ClassifierConfig(epochs=2, lr=0.01))
    untrained = np.diff(sp.csr_matrix(tiny_data.y_train).tocsc().indptr) == 0
    fused = FusedClassifier(fit.weights, Fusion(alpha=0.5, untrained_offset=-0.05), 20, untrained=untrained)
    new_texts = ["zebra striped umbrella stand", "quantum flux capacitor repair kit"]
    new_vecs = _encode(encoder_dir, new_texts)
    grown = fused.with_new_labels(new_vecs)
    n = len(label_vecs)
    np.testing.assert_array_equal(grown.weights[:n], fit.weights)
    np.testing.assert_array_equal(grown.weights[n:], new_vecs)
    offsets = grown.label_offsets()
    assert offsets is not None and offsets.shape == (n + 2,) and np.all(offsets[n:] == np.float32(-0.05))
    all_vecs = np.concatenate([label_vecs, new_vecs])
    top = _search(new_vecs, all_vecs, grown, 5)
    assert top[0][0] == n and top[1][0] == n + 1, "an added ad is found first by its own text"
    assert len(fused.weights) == n, "the classifier it grew from is unchanged"
    with pytest.raises(ValueError, match=r"\(n, "):
        fused.with_new_labels(new_vecs[:, :3])


def test_the_classifier_method_reuses_its_base_encoder_and_serves_one_model(tiny_data: XCDataset,
                                                                          tmp_path: Path) -> None:
    import mlflow

    from xc_core.methods.versions import RECORD_KEY, method_code_version
    from xc_core.paths import eval_dir, model_dir
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.train import train_method
    from xc_core.tracking.store import activate, tracking_uri
    from xc_core.training.record import TrainedModel

    base = train_method(tiny_data, "pretrained", "tiny", tmp_path)
    assert base[RECORD_KEY] == method_code_version("pretrained", "train")
    # an edit elsewhere in xc_core changes the whole package's version, not the base's: its encoder is still reused
    TrainedModel.save(model_dir(tmp_path, tiny_data.name, "pretrained", "tiny"),
                      {**base, "code_version": "an-earlier-package"})
    fused = train_method(tiny_data, "pretrained-clf", "tiny", tmp_path)
    assert fused["encoder_from_run"] == base["mlflow_run_id"] and fused["train_config"] == base["train_config"]
    assert fused[RECORD_KEY] == method_code_version("pretrained-clf", "train") != base[RECORD_KEY]
    assert 0.0 <= fused["alpha"] <= 1.0 and fused["classifier_mb"] > 0
    curve, cfg = fused["alpha_curve"], ClassifierConfig()
    assert [row["alpha"] for row in curve if row["lexical_weight"] == 0.0 and row["linear_weight"] == 0.0
            ] == list(cfg.alphas)
    assert sorted({row["lexical_weight"] for row in curve}) == sorted(cfg.lexical.weights)
    assert sorted({row["linear_weight"] for row in curve}) == sorted(cfg.linear_weights), "the hybrid channel tried"
    info = FusedClassifier.load(Path(fused["classifier_dir"])).info
    tests = info["fallback_tests"]
    assert set(tests) == {"fusion"}, "one joint test of the served fusion against the encoder alone"
    test = tests["fusion"]
    assert test["fallback"] == {"alpha": 1.0}
    assert test["kept"] == (test["low"] > 0 and all(g[2] >= 0 for g in test["guards"].values())), test["reason"]
    # every out-of-fold row tests the cross-fitted choice. The tiny log's 5 training days keep 4 once the validation
    # day is held out (issue #64): too few for blocks of days, so document folds — and the record says which
    assert test["folds"] == len(info["folds"]) == ClassifierConfig().folds
    assert info["fold_kind"] == "documents" and all(f["name"].startswith("fold ") for f in info["folds"])
    assert test["tested_on_rows"] == info["out_of_fold_rows"] == sum(f["scored_rows"] for f in info["folds"]) > 0
    assert [f["fit_documents"] for f in info["folds"]] == sorted(f["fit_documents"] for f in info["folds"])
    assert test["detectable"]["P@1"] > 0
    # a probe's rebuild of the stage (experiments/decile_guard) scores the same rows in the same folds
    from xc_core.methods.encoder.training import trained_stage_grids

    _, folds, parts, _ = trained_stage_grids(tmp_path, tiny_data, "pretrained-clf", "tiny")
    assert [len(f.score_rows) for f in folds] == [f["scored_rows"] for f in info["folds"]] == [
        p.truth.shape[0] for p in parts]
    # ... with the model's own training seed: a model trained at another seed is rebuilt on that seed's folds
    record = model_dir(tmp_path, tiny_data.name, "pretrained-clf", "tiny") / "train_summary.json"
    as_trained = record.read_text()
    record.write_text(json.dumps({**json.loads(as_trained), "seed": 7}))
    try:
        _, reseeded, _, reseeded_cfg = trained_stage_grids(tmp_path, tiny_data, "pretrained-clf", "tiny")
    finally:
        record.write_text(as_trained)
    assert reseeded_cfg.seed == 7
    assert [f.score_rows.tolist() for f in reseeded] != [f.score_rows.tolist() for f in folds]
    served_fusion = {"alpha": fused["alpha"], **{key: fused[key] for key in fusion_keys()[1:] if fused[key]}}
    assert test["served"] == (served_fusion if test["kept"] else {"alpha": 1.0})
    activate(tracking_uri(tmp_path))
    model = mlflow.pyfunc.load_model(fused["model_uri"])
    served = model.unwrap_python_model().classifier
    assert served is not None and served.alpha == fused["alpha"]
    assert served.weight("lexical") == fused["lexical_weight"]
    assert (served.active("lexical") is not None) == (fused["lexical_weight"] > 0)
    # the hybrid channel travels in the MLflow model (its hybrid/ folder) exactly when the served fusion uses it
    assert served.weight("hybrid") == fused["linear_weight"]
    assert (served.active("hybrid") is not None) == (fused["linear_weight"] > 0)
    assert served.weights.shape == (tiny_data.n_labels, model.predict(["a query"]).shape[1])
    assert mlflow.pyfunc.load_model(base["model_uri"]).unwrap_python_model().classifier is None
    result = evaluate_method(tiny_data, "pretrained-clf", "tiny", tmp_path)
    assert 0.0 <= result["P@1"] <= 1.0 and result["test_documents"] == len(tiny_data.test_texts)
    # the head/tail trade-off: per-decile shares of each variant sum to its P@5, the fused one to the eval's
    variants = result["classifier"]["variants"]
    lexical = {"lexical only"} if result["classifier"]["lexical_weight"] > 0 else set()
    hybrid = {"hybrid only"} if result["classifier"]["linear_weight"] > 0 else set()
    assert set(variants) == {"encoder only", "classifier only", "fused", *lexical, *hybrid}
    assert variants["fused"]["P@5"] == pytest.approx(result["P@5"], abs=1e-9)
    assert (eval_dir(tmp_path, tiny_data.name, "pretrained-clf", "tiny") / "tradeoff.png").stat().st_size > 0
    assert variants["classifier only"]["P@5"] != variants["encoder only"]["P@5"]
    from xc_core.evaluation.fallback import FALLBACK_TABLE

    choices = result["tables"][FALLBACK_TABLE]  # the HTML report's table of the training's fallback tests
    assert [row["choice"] for row in choices] == ["fusion"] and choices[0]["detectable_P@1"] > 0
    assert all(row["method"] == "pretrained-clf" and isinstance(row["kept"], bool) for row in choices)
    _a_stage_with_the_same_inputs_copies_the_classifier(tiny_data, tmp_path, fused)


def _a_stage_with_the_same_inputs_copies_the_classifier(data: XCDataset, home: Path, record: dict) -> None:
    """Another -clf method whose stage has exactly these inputs (same encoder files, data, settings, unscored rows:
    ramen-clf on the dual_encoder encoder RAMEN fell back to) copies this run's classifier instead of refitting it;
    any other input gives another key."""
    import mlflow

    from xc_core.classifier.stage import stage_key
    from xc_core.methods.encoder.training import _fit_classifier, _same_classifier
    from xc_core.profiles import get_profile, train_settings
    from xc_core.training.validation import validation_split

    encoder, cfg = Path(record["encoder_dir"]), get_profile("tiny").classifier.model_copy(update={"seed": 0})
    data = validation_split(data, train_settings(get_profile("tiny"))).holdout_view(data)  # what the stage fit on
    key = stage_key(data, encoder, record["max_length"], cfg, None)
    assert record["classifier_key"] == key, "the record keeps its stage's key"
    assert _same_classifier(home, data.name, "ramen-clf", "tiny", 0, key) is not None
    assert _same_classifier(home, data.name, "pretrained-clf", "tiny", 0, key) is None, "never itself"
    assert _same_classifier(home, data.name, "ramen-clf", "tiny", 1, key) is None, "another seed"
    for other in (stage_key(data, encoder, record["max_length"], cfg, np.array([0, 1])),
                  stage_key(data, encoder, record["max_length"], cfg.model_copy(update={"seed": 1}), None),
                  stage_key(data, encoder, 8, cfg, None)):
        assert other != key
    twin = _same_classifier(home, data.name, "ramen-clf", "tiny", 0, key)
    out = home / "copied"
    with mlflow.start_run():
        folder, summary = _fit_classifier(data, encoder, record["max_length"], None, cfg, out, False, twin)
    assert summary["classifier_from_run"] == record["mlflow_run_id"] and summary["alpha"] == record["alpha"]
    source = Path(record["classifier_dir"])
    assert (folder / "fusion.json").read_text() == (source / "fusion.json").read_text()
    assert np.array_equal(np.load(folder / "weights.npy"), np.load(source / "weights.npy"))
    assert (out / "label_vectors.npy").exists()


def test_a_fused_champion_is_served_through_the_fused_search(tiny_data: XCDataset, tmp_path: Path) -> None:
    """Registered, promoted, then `xc predict`'s function: the same labels as the evaluation's search."""
    from xc_core.classifier.fusion import CLASSIFIER_INDEX, LABEL_VECTORS
    from xc_core.encoders.text import encoder_for
    from xc_core.paths import dataset_dir, index_dir
    from xc_core.profiles import get_profile
    from xc_core.serving import predict_from_champion
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.train import train_method
    from xc_core.tracking.registry import promote_if_better, register_evaluated

    tiny_data.save(dataset_dir(tmp_path, tiny_data.name))
    from xc_core.evaluation.fallback import FallbackPolicy
    from xc_core.index.ties import rankings_agree

    # alpha 0.5 served untested: the served search must be the fused one, not alpha 1's (tiny data cannot show a
    # significant gain; the fallback rule has its own tests)
    profile = get_profile("tiny")
    untested = {"alphas": (0.5,), "fallback": FallbackPolicy(enabled=False)}
    profile = profile.model_copy(update={"classifier": profile.classifier.model_copy(update=untested)})
    trained = train_method(tiny_data, "dual_encoder-clf", profile, tmp_path)
    for split in ("validation", "test"):  # the gate decides on the first, the report shows the second
        evaluate_method(tiny_data, "dual_encoder-clf", "tiny", tmp_path, split=split)
    registered = register_evaluated(tmp_path, tiny_data.name, "dual_encoder-clf", "tiny")
    assert promote_if_better(tiny_data.name, registered["version"], registered["tracking_uri"], home=tmp_path).promote
    query = tiny_data.test_texts[0]
    served = predict_from_champion(tiny_data.name, query, tmp_path, k=5)
    assert served["method"] == "dual_encoder-clf"
    folder = index_dir(tmp_path, tiny_data.name, "dual_encoder-clf", "tiny")
    fused = FusedClassifier.load(Path(trained["classifier_dir"]))
    assert fused.alpha < 1, "the classifier takes part (alpha 1 would be the encoder's index alone)"
    vector = encoder_for(Path(trained["encoder_dir"]), 16).encode([query])
    expected = fused_search(vector, LabelIndex.load(folder), LabelIndex.load(folder / CLASSIFIER_INDEX),
                            np.load(folder / LABEL_VECTORS), fused, 5, texts=[query])
    # the served encoder may run on ONNX: the same ranking up to ties (``index/ties.py``)
    label_ids = tiny_data.label_ids or [str(i) for i in range(tiny_data.n_labels)]  # what the bundle names them
    position = {label_id: i for i, label_id in enumerate(label_ids)}
    answer = (np.array([[row["score"] for row in served["labels"]]]),
              np.array([[position[row["label_id"]] for row in served["labels"]]]))
    assert rankings_agree(expected, answer).all(), (expected, served["labels"])


@pytest.mark.parametrize(("field", "value", "says"), [("select_metric", "P@10", "select_metric 'P@10'"),
                                                     ("alphas", (1.5,), "each in [0, 1]")])
def test_a_bad_classifier_setting_is_refused_with_the_field_and_the_fix(field: str, value: object, says: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=re.escape(says)):
        ClassifierConfig.model_validate({field: value})


def test_a_base_encoder_trained_with_other_settings_is_not_reused(tiny_data: XCDataset, tmp_path: Path) -> None:
    """Issue #44: the reuse check compares every training setting, overrides included (``--set``), not only the seed
    and the code: a ``-clf`` asked with another setting trains its own encoder."""
    from xc_core.stages.train import train_method

    base = train_method(tiny_data, "pretrained", "tiny", tmp_path)
    other = train_method(tiny_data, "pretrained-clf", "tiny", tmp_path, overrides={"val_k": 5})
    assert "encoder_from_run" not in other and other["train_config"] != base["train_config"]
