"""IRENE (issue #14): the combiner, the association refinement, stage II's losses, the evaluation settings, and
novel keywords streamed into the serving index — retrievable by the next query, from the library, the ``xc`` CLI,
``xc predict``, the Dagster asset and the landing sensor."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
import torch

from xc_core.classifier.folds import Fold
from xc_core.datasets.container import XCDataset
from xc_core.index import LabelIndex
from xc_core.logs.errors import IngestError
from xc_core.methods.irene.associations import refine, seen_associations
from xc_core.methods.irene.config import IreneConfig
from xc_core.methods.irene.fit import IreneModel, choose, irene_folds
from xc_core.methods.irene.model import Combiner
from xc_core.methods.irene.settings import reveal, setting_truths
from xc_core.methods.irene.stream import add_keywords, read_keywords
from xc_core.methods.irene.train import train_stage_two

POOLINGS = ("attention", "sum", "max", "weighted_sum")


def _unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


# -- the combiner ---------------------------------------------------------------------------------------------

def _text_only(combiner: Combiner, text: torch.Tensor) -> torch.Tensor:
    """What each pooling must reduce to with no association: an affine map of E(z) alone, normalised."""
    if combiner.pooling == "attention":  # one key (the text token): the attention output is its value, projected
        d = text.shape[1]
        att = combiner.attention
        value = (text + combiner.t_enc) @ att.in_proj_weight[2 * d:].T + att.in_proj_bias[2 * d:]
        pooled = text + att.out_proj(value)
    elif combiner.pooling == "weighted_sum":
        pooled = torch.softmax(combiner.position, dim=0)[0] * text
    else:
        pooled = text
    return _unit(combiner.out(pooled))


@pytest.mark.parametrize("pooling", POOLINGS)
def test_the_combiner_gives_unit_vectors_and_with_no_association_a_map_of_the_text_alone(pooling: str) -> None:
    torch.manual_seed(0)
    combiner = Combiner(16, pooling, heads=4, slots=3)  # type: ignore[arg-type]  # one of POOLINGS
    with torch.no_grad():  # move every parameter off its initial value, as training does
        for param in combiner.parameters():
            param.add_(0.1 * torch.randn_like(param))
    combiner.eval()
    text, associated = _unit(torch.randn(5, 16)), torch.randn(5, 3, 16)
    present = torch.tensor([[True, True, True], [True, False, False], [False, True, False], [False] * 3,
                            [True, True, False]])
    with torch.no_grad():
        out = combiner(text, associated, present)
        assert out.shape == (5, 16) and torch.allclose(out.norm(dim=-1), torch.ones(5), atol=1e-5)
        absent = torch.zeros(5, 3, dtype=torch.bool)
        want = _text_only(combiner, text)
        # absent slots are ignored whatever they hold, and no slot at all (|S| = 0 configured) gives the same
        assert torch.allclose(combiner(text, associated, absent), want, atol=1e-5)
        assert torch.allclose(combiner(text, 100 * torch.randn(5, 3, 16), absent), want, atol=1e-5)
        assert torch.allclose(combiner(text, torch.zeros(5, 0, 16), absent[:, :0]), want, atol=1e-5)
        assert torch.allclose(out[3], want[3], atol=1e-5)  # the row without associations, inside a mixed batch


def test_an_untrained_attention_combiner_is_the_encoder() -> None:
    torch.manual_seed(0)
    combiner = Combiner(16, "attention", heads=4, slots=3).eval()
    text = _unit(torch.randn(4, 16))
    with torch.no_grad():
        alone = combiner(text, torch.randn(4, 3, 16), torch.zeros(4, 3, dtype=torch.bool))
        assert torch.allclose(alone, _unit(combiner.out(text)), atol=1e-6)
        assert torch.allclose(alone, text, atol=1e-6)  # out starts as the identity
        assert torch.allclose(combiner(text, torch.randn(4, 3, 16), torch.ones(4, 3, dtype=torch.bool)), text,
                              atol=1e-6)  # the attention's output projection starts at zero


# -- associations -----------------------------------------------------------------------------------------------

def test_refinement_keeps_classifiers_above_tau0_best_first_and_one_shot_votes_put_both_thresholds_first() -> None:
    weights = np.array([[0.9, 0.436], [0.5, 0.866], [0.95, 0.312], [-1.0, 0.0]], dtype=np.float32)
    weights /= np.linalg.norm(weights, axis=1, keepdims=True)
    novel = np.array([[1.0, 0.0]], dtype=np.float32)  # w·E(z): 0.90, 0.50, 0.95, -1.0
    candidates = np.array([[3, 1, 0, 2, -1]])  # the shortlist's order, with a pad
    assert refine(candidates, novel, weights, tau0=0.6, k=3).tolist() == [[2, 0, -1]]  # 1 and 3 below τ0
    assert refine(candidates, novel, weights, tau0=0.6, k=1).tolist() == [[2]]
    assert refine(candidates, novel, weights, tau0=0.99, k=2).tolist() == [[-1, -1]]
    assert refine(candidates[:, :2], novel, weights, tau0=0.0, k=3).tolist() == [[1, -1, -1]]  # K < k: padded
    query = np.array([[0.3, 0.954]], dtype=np.float32)  # w·E(x): 0.69, 0.98, 0.58, -0.3
    # 0 passes τ0 and τ1, so it leads although 2 scores higher on the text; 1 passes τ1 only and stays out
    assert refine(candidates, novel, weights, tau0=0.6, k=3, query_vecs=query, tau1=0.65).tolist() == [[0, 2, -1]]


def test_seen_labels_borrow_from_co_clicked_seen_labels_most_text_similar_first() -> None:
    y = sp.csr_matrix(np.array([[1, 1, 1, 0], [1, 0, 0, 1]], dtype=np.float32))
    vecs = np.eye(4, dtype=np.float32)
    vecs[2] = [0.8, 0.0, 0.6, 0.0]  # label 2 is closer to label 0 than 1 and 3 are
    table = seen_associations(y, vecs, np.arange(4), k=2)
    assert table[0].tolist() == [2, 1] and table[1].tolist() == [0, 2] and table[3].tolist() == [0, -1]


# -- stage II -----------------------------------------------------------------------------------------------------

def _labelled_world(text_noise: float, n_labels: int = 40, n_docs: int = 240, dim: int = 16,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
    """(documents, the labels' text embeddings, clicks): each document near its label's true direction, a third
    clicking a second label too; the text embedding is the true direction plus ``text_noise``."""
    rng = np.random.default_rng(seed)

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    truth = unit(rng.normal(size=(n_labels, dim)))
    label_text = unit(truth + text_noise * rng.normal(size=truth.shape))
    positive = rng.integers(0, n_labels, n_docs)
    docs = unit(truth[positive] + 0.3 * rng.normal(size=(n_docs, dim)))
    second = (positive + 1) % n_labels
    rows = np.concatenate([np.arange(n_docs), np.arange(0, n_docs, 3)])
    cols = np.concatenate([positive, second[::3]])
    return docs, label_text, sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                                           shape=(n_docs, n_labels))


@pytest.mark.parametrize("loss", ["triplet", "softmax"])
def test_stage_two_lowers_both_losses(loss: str) -> None:
    docs, label_text, y = _labelled_world(text_noise=0.8)  # a weak text embedding of each label
    seen = np.arange(y.shape[1])
    cfg = IreneConfig(epochs=8, batch_size=32, lr_classifiers=1e-2, lr_combiner=2e-3)
    stage = train_stage_two(docs, label_text, y, seen, seen_associations(y, label_text, seen, 3), cfg, loss)
    first, last = stage.history[0], stage.history[-1]
    assert last["loss/classifiers"] < 0.7 * first["loss/classifiers"]
    assert last["loss/combiner"] < 0.7 * first["loss/combiner"]
    assert np.allclose(np.linalg.norm(stage.weights, axis=1), 1.0, atol=1e-5)


def _document_folds(y: sp.csr_matrix, k: int = 4) -> list[Fold]:
    """``k`` interleaved folds of every document: each scored by a stage II refit on the others."""
    rows = np.arange(y.shape[0])
    return [Fold(f"fold {i + 1}/{k}", np.setdiff1d(rows, rows[i::k]), y, rows[i::k], y[rows[i::k]])
            for i in range(k)]


def test_the_out_of_fold_choice_serves_the_encoder_unless_the_combiner_ranks_better() -> None:
    cfg = IreneConfig(epochs=6, batch_size=32, lr_classifiers=1e-2, lr_combiner=2e-3, tau0_grid=(0.2,),
                      validation_labels=0.2)
    # text embeddings that are the labels' true directions: nothing to learn, the encoder alone serves (3 epochs of
    # stage II here, 6 below: what is under test is the choice, and no setting has anything to learn in this world)
    docs, label_text, y = _labelled_world(text_noise=0.0, n_labels=150, n_docs=600)
    choice, curve, test = choose({"train": docs, "labels": label_text}, _document_folds(y), np.arange(150),
                                 cfg.model_copy(update={"epochs": 3}))
    assert choice.serves == "encoder" and not test["kept"] and test["low"] <= 0
    assert len(curve) == 1 + 2 * 2 * 2  # the encoder, then 2 losses × 2 ways of associating × (no τ0, 0.2)
    # every document is scored once, by the stage II refit without it: the test runs on all 600, cross-fitted
    # over the 4 refits (each fold ranked by the setting the other three pick)
    assert test["tested_on_rows"] == 600 and test["folds"] == 4
    assert [f["scored_rows"] for f in test["folds_refit"]] == [150] * 4
    # weak text embeddings: the classifiers learnt from clicks rank the scored queries' labels better, by a
    # margin the cross-fitted test on 1,200 out-of-fold queries shows
    docs, label_text, y = _labelled_world(text_noise=2.0, n_labels=150, n_docs=1200)
    choice, curve, test = choose({"train": docs, "labels": label_text}, _document_folds(y), np.arange(150), cfg)
    best = max(row["R@10"] for row in curve if row["serves"] == "irene")
    assert choice.serves == "irene" and best > next(row for row in curve if row["serves"] == "encoder")["R@10"]
    assert test["kept"] and test["low"] > 0, "the combiner's gain holds on the queries it was not picked on"
    assert test["tested_on_rows"] == 1200
    assert choice.combiner_loss in cfg.combiner_loss and choice.seen_mode in cfg.seen_associations


def test_irene_folds_never_score_a_query_stage_one_trained_on(tiny_data: XCDataset) -> None:
    cfg = IreneConfig(folds=3, time_blocks=3)
    n = len(tiny_data.train_texts)
    val_rows = np.arange(0, n, 7)
    trained = np.setdiff1d(np.arange(n), val_rows)[: n // 2]
    folds = irene_folds(tiny_data, cfg, val_rows, trained)
    scored = np.concatenate([f.score_rows for f in folds])
    assert len(scored) >= len(val_rows) and not np.isin(scored, trained).any()
    # stage I trained on every query but its validation ones: one refit without them scores them
    everything_else = np.setdiff1d(np.arange(n), val_rows)
    (only,) = irene_folds(tiny_data, cfg, val_rows, everything_else)
    assert np.array_equal(only.score_rows, val_rows) and not np.isin(val_rows, only.fit_rows).any()


# -- evaluation settings ----------------------------------------------------------------------------------------

def test_one_shot_reveals_a_clicking_query_per_novel_label_and_removes_it_from_every_test_set(
        tiny_data: XCDataset) -> None:
    novel = np.flatnonzero(tiny_data.label_novel)
    y = tiny_data.y_test.tocsr()
    revealed, removed = reveal(tiny_data, seed=0)
    assert len(revealed) == len(novel) and (revealed >= 0).any()
    for label, row in zip(novel, revealed, strict=True):
        if row >= 0:
            assert y[row, label] == 1 and removed[row]  # it clicked its novel label, and is out of the test sets
        else:
            assert y[:, label].nnz == 0  # only a label no test query clicked has nothing to reveal
    assert removed.sum() == len(set(revealed[revealed >= 0].tolist()))
    zero = setting_truths(tiny_data, np.ones(len(removed), dtype=bool))
    one = setting_truths(tiny_data, ~removed)
    for truths in (zero, one):
        assert truths["novel-only"].shape[1] == len(novel)  # ranked among the novel labels only
        novel_positives = truths["generalised: novel positives"].tocoo()
        assert tiny_data.label_novel[novel_positives.col].all()
        assert (truths["novel-only"] != truths["generalised"].tocsc()[:, novel]).nnz == 0
    assert (zero["generalised"] != y).nnz == 0
    evaluated = np.flatnonzero(np.diff(one["generalised"].indptr) > 0)
    assert not removed[evaluated].any()  # the revealed queries are never scored
    assert set(np.flatnonzero(np.diff(one["novel-only"].indptr) > 0)) == set(
        np.flatnonzero((np.diff(y.tocsc()[:, novel].tocsr().indptr) > 0) & ~removed))


# -- stage I: named by config, recorded on the model ---------------------------------------------------------

@pytest.fixture(scope="module")
def stage_one_home(tiny_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home of its own (its registry gets a champion) with two trained encoders: ``pretrained`` and
    ``dual_encoder``, the latter the data set's champion."""
    from xc_core.paths import anchors_dir
    from xc_core.stages.train import train_method
    from xc_core.tracking.registry import CHAMPION, model_name, register
    from xc_core.tracking.store import tracking_uri
    from xc_core.training.record import TrainedModel

    home = tmp_path_factory.mktemp("stage-one")
    data = XCDataset.load(anchors_dir(tiny_home, "synthetic"))
    for method in ("pretrained", "dual_encoder"):
        train_method(data, method, "tiny", home)
    champion = TrainedModel.of(home, "synthetic", "dual_encoder", "tiny")
    version = register(champion.model_uri, "synthetic", {"method": "dual_encoder", "profile": "tiny"},
                       tracking_uri(home))
    mlflow.MlflowClient(tracking_uri(home)).set_registered_model_alias(model_name("synthetic"), CHAMPION, version)
    return home


def test_irene_requires_the_stage_one_its_config_names() -> None:
    from xc_core.methods import get_method, requirements
    from xc_core.methods.irene import IRENE

    assert get_method("irene").requires.methods == (IreneConfig().stage_one,) == ("ramen",)
    assert replace(IRENE, cfg=IreneConfig(stage_one="dual_encoder")).requires.methods == ("dual_encoder",)
    assert requirements("irene") == ["dual_encoder", "ramen"]  # ramen's own fallback comes first


def test_stage_one_is_the_configured_method_recorded_on_the_model_not_the_champion(
        stage_one_home: Path, tiny_data: XCDataset) -> None:
    from xc_core.methods.irene.fit import MODEL
    from xc_core.stages.train import train_method
    from xc_core.tracking.registry import champion_version
    from xc_core.tracking.store import tracking_uri
    from xc_core.training.record import TrainedModel

    champion = champion_version("synthetic", tracking_uri(stage_one_home))
    assert champion is not None and champion.tags["method"] == "dual_encoder"
    record = train_method(tiny_data, "irene", "tiny", stage_one_home, overrides={"stage_one": "pretrained"})
    base = TrainedModel.of(stage_one_home, "synthetic", "pretrained", "tiny")
    assert record["stage_one"] == "pretrained" and record["encoder_dir"] == base.summary["encoder_dir"]
    assert record["depends_on_run_id"] == base.mlflow_run_id and record["stage_one_model_uri"] == base.model_uri
    params = mlflow.MlflowClient(tracking_uri(stage_one_home)).get_run(record["mlflow_run_id"]).data.params
    assert params["stage_one"] == params["irene.stage_one"] == "pretrained"
    assert params["stage_one_run_id"] == base.mlflow_run_id
    saved = IreneModel.load(TrainedModel.of(stage_one_home, "synthetic", "irene", "tiny").folder / MODEL)
    assert saved.cfg.stage_one == "pretrained"


def test_a_stage_one_not_trained_in_the_home_names_the_command_that_trains_it(
        stage_one_home: Path, tiny_data: XCDataset, capsys: pytest.CaptureFixture[str]) -> None:
    """The default stage I (``ramen``) is not trained here: no fallback to the champion or another encoder."""
    from xc_core.cli import main
    from xc_core.paths import dataset_dir
    from xc_core.stages.train import train_method

    with pytest.raises(FileNotFoundError, match="xc train --dataset synthetic --method ramen --profile tiny"):
        train_method(tiny_data, "irene", "tiny", stage_one_home)
    tiny_data.save(dataset_dir(stage_one_home, tiny_data.name))
    capsys.readouterr()
    code = main(["train", "--dataset", "synthetic", "--method", "irene", "--profile", "tiny",
                 "--home", str(stage_one_home), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "stage I is ramen's trained encoder" in err[0]
    # the command names another stage I (trained here), and the model records it
    assert main(["train", "--dataset", "synthetic", "--method", "irene", "--profile", "tiny", "--set",
                 "stage_one=pretrained", "--home", str(stage_one_home), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["stage_one"] == "pretrained"


# -- streaming novel keywords -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def irene_home(tiny_home: Path) -> Path:
    """IRENE trained and indexed on the tiny home, stage I the untrained encoder (``pretrained``: the tiny random
    BERT), trained here unless the session already did."""
    from xc_core.paths import anchors_dir, model_dir
    from xc_core.stages.index import index_method
    from xc_core.stages.train import train_method
    from xc_core.training.record import SUMMARY

    data = XCDataset.load(anchors_dir(tiny_home, "synthetic"))
    if not (model_dir(tiny_home, "synthetic", "pretrained", "tiny") / SUMMARY).exists():
        train_method(data, "pretrained", "tiny", tiny_home)
    train_method(data, "irene", "tiny", tiny_home, overrides={"stage_one": "pretrained"})
    index_method(data, "irene", "tiny", tiny_home)
    return tiny_home


def _served(home: Path) -> tuple[Any, IreneModel, LabelIndex]:
    """The encoder, the model and the index as a fresh server loads them from disk."""
    from xc_core.methods.irene import _encoder
    from xc_core.methods.irene.fit import MODEL
    from xc_core.paths import index_dir
    from xc_core.training.record import TrainedModel

    trained = TrainedModel.of(home, "synthetic", "irene", "tiny")
    return (_encoder(trained), IreneModel.load(trained.folder / MODEL),
            LabelIndex.load(index_dir(home, "synthetic", "irene", "tiny")))


def test_a_streamed_keyword_is_retrievable_by_its_own_text_at_once(irene_home: Path) -> None:
    from xc_core.methods.irene.stream import streamed_labels
    from xc_core.paths import index_dir

    encoder, model, before = _served(irene_home)
    texts = ["zorblax quantum kazoo repair", "glimmerfang velvet snorkel"]
    result = add_keywords(irene_home, "synthetic", "tiny", texts, ["new-1", "new-2"])
    assert result["added"] == 2 and result["skipped"] == 0 and result["index_count"] == before.count + 2
    assert set(result["steps_ms_per_item"]) == {"encode", "shortlist", "refine", "combine", "add"}
    assert result["ms_per_item"] == pytest.approx(sum(result["steps_ms_per_item"].values()), abs=1e-3)
    new_ids = [result["first_id"], result["first_id"] + 1]
    assert result["first_id"] == before.next_id
    _, _, after = _served(irene_home)  # what a fresh server loads from disk
    _, found = after.search(encoder.encode(texts), 5)
    assert all(new_id in row for new_id, row in zip(new_ids, found.tolist(), strict=True))
    # represented exactly as IRENE represents a novel label at training time
    stored = np.stack([after.index.reconstruct(i) for i in new_ids])
    assert np.allclose(stored, model.represent_novel(encoder.encode(texts)), atol=1e-5)
    table = streamed_labels(index_dir(irene_home, "synthetic", "irene", "tiny"))
    assert table.filter(pl.col("keyword_id").is_in(["new-1", "new-2"])).get_column("id").to_list() == new_ids
    # the same ids again (and a data-set label's id) are skipped; a repeat within a call is added once
    label_id = XCDataset.load(irene_home / "datasets" / "synthetic").label_ids[0]
    again = add_keywords(irene_home, "synthetic", "tiny", [*texts, "running shoes", "fresh", "fresh"],
                         ["new-1", "new-2", label_id, "new-3", "new-3"])
    assert (again["added"], again["skipped"]) == (1, 4) and again["first_id"] == new_ids[-1] + 1


def test_irene_records_the_parameters_it_serves_with(irene_home: Path) -> None:
    """The costs table's size: the encoder plus the seen classifiers (n_seen × D) plus the combiner."""
    from xc_core.training.record import TrainedModel

    encoder, model, _ = _served(irene_home)
    summary = TrainedModel.of(irene_home, "synthetic", "irene", "tiny").summary
    combiner = sum(int(p.numel()) for p in model.combiner.parameters())
    assert model.weights.shape[0] == len(model.seen_rows) and combiner > 0
    assert summary["parameters"] == encoder.parameter_count() + model.weights.size + combiner


def test_rebuilding_the_index_adds_the_streamed_keywords_back(irene_home: Path) -> None:
    from xc_core.methods.irene.stream import streamed_labels
    from xc_core.paths import anchors_dir, index_dir
    from xc_core.stages.index import index_method

    add_keywords(irene_home, "synthetic", "tiny", ["quillwort lantern rental"], ["rebuild-1"])
    before = streamed_labels(index_dir(irene_home, "synthetic", "irene", "tiny"))
    index_method(XCDataset.load(anchors_dir(irene_home, "synthetic")), "irene", "tiny", irene_home)  # a rebuild
    after = streamed_labels(index_dir(irene_home, "synthetic", "irene", "tiny"))
    assert set(after.get_column("keyword_id").drop_nulls()) == set(before.get_column("keyword_id").drop_nulls())
    encoder, _, index = _served(irene_home)
    new_id = after.filter(pl.col("keyword_id") == "rebuild-1").get_column("id").item()
    assert new_id in index.search(encoder.encode(["quillwort lantern rental"]), 5)[1][0].tolist()


def test_without_tau0_a_streamed_keyword_is_its_text_through_the_combiner(irene_home: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from xc_core.paths import index_dir

    encoder, model, _ = _served(irene_home)
    model.choice = replace(model.choice, tau0=None, serves="irene")  # validation found no association worth making
    monkeypatch.setattr(IreneModel, "load", classmethod(lambda cls, folder: model))
    folder = tmp_path / "index"
    shutil.copytree(index_dir(irene_home, "synthetic", "irene", "tiny"), folder)
    result = add_keywords(irene_home, "synthetic", "tiny", ["plumbus deluxe"], index_folder=folder)
    assert result["associated_mean"] == 0 and result["steps_ms_per_item"]["shortlist"] == 0
    vec = encoder.encode(["plumbus deluxe"])
    want = model.represent_novel(vec)
    assert np.allclose(want, model.combiner(torch.from_numpy(vec), torch.zeros(1, 3, vec.shape[1]),
                                            torch.zeros(1, 3, dtype=torch.bool)).detach().numpy(), atol=1e-6)
    assert np.allclose(LabelIndex.load(folder).index.reconstruct(result["first_id"]), want[0], atol=1e-5)
    # without ids a keyword is known by its text: a data-set label's text is not streamed again
    assert add_keywords(irene_home, "synthetic", "tiny", ["running shoes", "plumbus deluxe"],
                        index_folder=folder)["skipped"] == 2


def test_when_the_encoder_serves_a_streamed_keyword_is_its_text_embedding(irene_home: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from xc_core.paths import index_dir

    encoder, model, _ = _served(irene_home)
    model.choice = replace(model.choice, serves="encoder", tau0=0.2)  # validation: the combiner ranked worse
    monkeypatch.setattr(IreneModel, "load", classmethod(lambda cls, folder: model))
    folder = tmp_path / "index"
    shutil.copytree(index_dir(irene_home, "synthetic", "irene", "tiny"), folder)
    result = add_keywords(irene_home, "synthetic", "tiny", ["snorkel umbrella"], index_folder=folder)
    assert result["associated_mean"] == 0 and result["steps_ms_per_item"]["shortlist"] == 0
    vec = encoder.encode(["snorkel umbrella"])[0]
    assert np.allclose(LabelIndex.load(folder).index.reconstruct(result["first_id"]), vec / np.linalg.norm(vec),
                       atol=1e-5)


def test_streaming_without_a_model_or_an_index_names_the_command_that_makes_it(irene_home: Path,
                                                                               tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="xc train --dataset synthetic --method irene --profile tiny"):
        add_keywords(tmp_path, "synthetic", "tiny", ["anything"])
    with pytest.raises(FileNotFoundError, match="xc index --dataset synthetic --method irene --profile tiny"):
        add_keywords(irene_home, "synthetic", "tiny", ["anything"], index_folder=tmp_path / "no-index")


def test_keyword_files_are_read_from_csv_or_parquet_and_rejected_whole_with_the_rows_at_fault(tmp_path: Path) -> None:
    csv = tmp_path / "k.csv"
    csv.write_text("keyword_id,keyword_text\n007,red shoes \n8,blue hats\n")
    assert read_keywords(csv) == (["red shoes", "blue hats"], ["007", "8"])
    parquet = tmp_path / "k.parquet"
    pl.DataFrame({"keyword_text": ["a b", "c"]}).write_parquet(parquet)
    assert read_keywords(parquet) == (["a b", "c"], None)
    (tmp_path / "bad.csv").write_text("text\nred shoes\n")
    with pytest.raises(IngestError, match=r"bad\.csv: no 'keyword_text' column \(columns: text\)"):
        read_keywords(tmp_path / "bad.csv")
    (tmp_path / "blank.csv").write_text('keyword_text\nred shoes\n"  "\nok\n""\n')
    with pytest.raises(IngestError, match=r"blank\.csv: empty 'keyword_text' in row\(s\) 2, 4"):
        read_keywords(tmp_path / "blank.csv")
    with pytest.raises(IngestError, match="unsupported file type '.txt'"):
        read_keywords(tmp_path / "k.txt")


def test_xc_add_keywords_prints_one_json_line(irene_home: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "new.csv"
    csv.write_text("keyword_id,keyword_text\ncli-1,wobbly trampoline insurance\ncli-2,neon cactus lamp\n")
    # in this process, as the CLI's other commands here (a fresh process's clean output: tests/test_cli.py)
    from xc_core.cli import main

    capsys.readouterr()
    assert main(["add-keywords", str(csv), "--dataset", "synthetic", "--profile", "tiny", "--home", str(irene_home),
                 "--quiet"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(line)
    assert summary["added"] == 2 and summary["ms_per_item"] > 0 and summary["file"] == str(csv)
    # a missing file: exit 2 and one line naming it
    assert main(["add-keywords", str(tmp_path / "none.csv"), "--profile", "tiny", "--home", str(irene_home),
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "none.csv" in err and "Traceback" not in err


def test_keywords_streamed_after_the_registration_are_served_without_a_restart(irene_home: Path,
                                                                              tmp_path: Path) -> None:
    """IRENE champion: `xc predict` and a running `xc serve` (its live model) answer a keyword streamed into the
    home's index after the version was registered — no re-registration, no restart."""
    import mlflow

    from xc_core.serving import predict_from_champion
    from xc_core.serving.live import LiveModel
    from xc_core.tracking.registry import CHAMPION, model_name, register, served_model
    from xc_core.tracking.store import tracking_uri
    from xc_core.training.record import TrainedModel

    home = tmp_path / "home"  # a copy: the session's home keeps no champion
    shutil.copytree(irene_home, home, ignore=shutil.ignore_patterns("events", "simulate", "graphs"))
    trained = TrainedModel.of(home, "synthetic", "irene", "tiny")
    logged = served_model(home, "synthetic", "irene", "tiny", trained, "test")
    version = register(logged.model_uri, "synthetic", {"method": "irene", "profile": "tiny"}, tracking_uri(home))
    mlflow.MlflowClient(tracking_uri(home)).set_registered_model_alias(model_name("synthetic"), CHAMPION, version)
    live = LiveModel("synthetic", home, tmp_path / "cache")
    assert live.refresh() and live.current is not None and live.current.method == "irene"
    before = live.current
    added = add_keywords(home, "synthetic", "tiny", ["quizzical marmalade drone"], ["kw-drone"])
    answer = predict_from_champion("synthetic", "quizzical marmalade drone", home, k=5)
    assert answer["method"] == "irene"
    streamed = [row for row in answer["labels"] if row.get("streamed")]
    assert {"label": "quizzical marmalade drone", "label_id": "kw-drone"}.items() <= streamed[0].items()
    assert added["first_id"] >= XCDataset.load(home / "datasets" / "synthetic").n_labels
    assert not before.model.answer(["quizzical marmalade drone"], 5)[0]["labels"][0].get("streamed")
    assert live.refresh(), "the live model picks the streamed keyword up at its next look"
    assert live.current.version == before.version  # the same version, over the home's grown index
    served = live.current.model.answer(["quizzical marmalade drone"], 5)[0]["labels"]
    assert served[0]["label_id"] == "kw-drone" and served[0]["streamed"]
    assert not live.refresh(), "nothing new: no swap"


# -- Dagster -----------------------------------------------------------------------------------------------------

def test_the_streamed_keywords_asset_adds_a_landed_csv_and_reports_it(irene_home: Path, tmp_path: Path) -> None:
    import dagster as dg

    from xc_assets.defs.family import family
    from xc_assets.defs.resources import XcHome

    asset = family("synthetic", events=True).streamed_keywords
    csv = tmp_path / "landed.csv"
    csv.write_text("keyword_text\nspindle harp tuning kit\nmoss terrarium starter\n")
    with dg.instance_for_test() as instance:
        result = dg.materialize([asset], instance=instance, resources={"xc_home": XcHome(home=str(irene_home))},
                                run_config={"ops": {"synthetic__streamed_keywords": {
                                    "config": {"paths": [str(csv)], "profile": "tiny"}}}})
    assert result.success
    meta = result.get_asset_materialization_events()[0].step_materialization_data.materialization.metadata
    assert meta["added"].value == 2 and meta["skipped"].value == 0
    summary = str(meta["summary"].value)
    assert "| landed.csv | 2 | 0 |" in summary and "shortlist" in summary


def test_the_keyword_landing_sensor_waits_for_an_index_then_requests_each_file_once(
        irene_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dagster as dg

    from xc_assets.defs.sensors import file_run_key, keyword_landing_sensor

    monkeypatch.setenv("XC_HOME", str(irene_home))
    monkeypatch.setenv("XC_KEYWORD_LANDING", str(tmp_path))
    (tmp_path / "day1.csv").write_text("keyword_text\nsolar kettle\n")
    (tmp_path / "notes.md").write_text("not keywords")
    with dg.instance_for_test() as instance:
        monkeypatch.setenv("XC_KEYWORD_PROFILE", "full")  # IRENE not indexed at this profile
        waiting = keyword_landing_sensor(dg.build_sensor_context(instance=instance))
        assert isinstance(waiting, dg.SensorResult) and not waiting.run_requests
        assert waiting.skip_reason is not None and "--method irene --profile full" in str(waiting.skip_reason)
        monkeypatch.setenv("XC_KEYWORD_PROFILE", "tiny")
        first = keyword_landing_sensor(dg.build_sensor_context(instance=instance, cursor=waiting.cursor))
        assert isinstance(first, dg.SensorResult) and first.run_requests is not None
        (request,) = first.run_requests
        assert request.run_key == file_run_key(tmp_path / "day1.csv")
        assert request.run_config["ops"]["synthetic__streamed_keywords"]["config"] == {
            "paths": [str(tmp_path / "day1.csv")], "profile": "tiny"}
        again = keyword_landing_sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
        assert isinstance(again, dg.SensorResult) and not again.run_requests
