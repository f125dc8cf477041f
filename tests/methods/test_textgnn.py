"""TextGNN (issue #16): the GAT tower and its skip layer, neighbour selection (cap, padding, no leak, test edges,
ANN proxies), training, and train → index → evaluate → serve on the tiny synthetic home."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.methods.textgnn.model import CrossingLayer, GATAggregator, Skip, Tower
from xc_core.methods.textgnn.neighbours import (
    MemoEmbed,
    heldout_doc_neighbours,
    label_neighbours,
    padded,
    pick,
    train_doc_neighbours,
)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


def _moved(module: torch.nn.Module) -> torch.nn.Module:
    """Every parameter off its initial value, as training leaves them (the output projection starts at zero)."""
    torch.manual_seed(1)
    with torch.no_grad():
        for param in module.parameters():
            param.add_(0.3 * torch.randn_like(param))
    return module.eval()


# -- towers ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("skip", ["add", "concat"])
def test_a_tower_gives_one_unit_vector_per_node_and_starts_as_the_encoder(skip: str) -> None:
    torch.manual_seed(0)
    tower = Tower(16, skip)  # type: ignore[arg-type]  # one of Skip
    centre, neighbours = _unit(torch.randn(5, 16)), _unit(torch.randn(5, 3, 16))
    present = torch.tensor([[True] * 3, [True, False, False], [False] * 3, [True, True, False], [True] * 3])
    with torch.no_grad():
        out = tower(centre, neighbours, present)
        assert out.shape == (5, 16) and torch.allclose(out.norm(dim=-1), torch.ones(5), atol=1e-5)
        assert torch.allclose(out, centre, atol=1e-6)  # untrained: the graph adds nothing yet
        moved = _moved(tower)(centre, neighbours, present)
        assert moved.shape == (5, 16) and not torch.allclose(moved, centre, atol=1e-3)
    if skip == "concat":
        assert tower.dense is not None and tower.dense.in_features == 32 and tower.dense.out_features == 16


def test_the_gat_aggregator_maps_centre_and_neighbours_to_the_encoder_width() -> None:
    gat = _moved(GATAggregator(8))
    out = gat(torch.randn(4, 8), torch.randn(4, 3, 8), torch.ones(4, 3, dtype=torch.bool))
    assert out.shape == (4, 8)
    assert CrossingLayer(8)(torch.randn(4, 8), torch.randn(4, 8)).shape == (4,)


@pytest.mark.parametrize("skip", ["add", "concat"])
def test_a_padded_slot_never_changes_the_output_whatever_it_holds(skip: str) -> None:
    tower = _moved(Tower(16, skip))  # type: ignore[arg-type]  # one of Skip
    centre, neighbours = _unit(torch.randn(3, 16)), _unit(torch.randn(3, 3, 16))
    present = torch.tensor([[True, False, False], [True, True, False], [False, False, False]])
    with torch.no_grad():
        want = tower(centre, neighbours, present)
        for garbage in (100 * torch.randn(3, 3, 16), torch.full((3, 3, 16), float("nan"))):
            changed = torch.where(present.unsqueeze(-1), neighbours, garbage)
            assert torch.allclose(tower(centre, changed, present), want, atol=1e-6)
        # and a present slot does change it
        other = neighbours.clone()
        other[1, 1] = _unit(torch.randn(16))
        assert not torch.allclose(tower(centre, other, present)[1], want[1], atol=1e-4)
        # no neighbour at all: the padded row equals the same centre alone in a 0-slot batch
        alone = tower(centre[2:], neighbours[2:, :0], present[2:, :0])
        assert torch.allclose(alone, want[2:], atol=1e-6)


# -- neighbours -----------------------------------------------------------------------------------------------

def _embed(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in encoder: words hashed into 32 dimensions, unit rows (shared words → similar)."""
    out = np.zeros((len(texts), 32), np.float32)
    for i, text in enumerate(texts):
        for word in text.split():
            out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 32] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def _graph_dataset(test_edges: np.ndarray | None) -> XCDataset:
    train = ["red shoes", "blue shoes", "green hats", "lonely query"]
    test = ["red shoes cheap", "yellow hats", "purple socks"]
    labels = ["red shoes", "shoe store", "hat shop"]
    y_train = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]], np.float32))
    y_test = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 1], [0, 0, 1]], np.float32))
    queries = ["crimson shoes", "shoe store", "red shoes", "scarlet shoes", "red sneakers", "red shoes sale",
               "woollen hats", "hat shop"]
    # train doc 0 has six co-session anchors, two of them its positive labels' texts (index 1, 2)
    doc_edges = [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 3), (2, 6), (2, 7)]
    cosession = AnchorSet("cosession_queries", queries, np.array(doc_edges), np.empty((0, 2), np.int64))
    if test_edges is not None:
        cosession.test_edges = test_edges
    clicks = AnchorSet("click_graph", ["red shoes", "blue shoes", "green hats", "lonely query"],
                       np.empty((0, 2), np.int64), np.array([(0, 0), (1, 0), (1, 1), (2, 2), (2, 3)]))
    return XCDataset("toy", train, test, labels, y_train, y_test,
                     anchor_sets={"cosession_queries": cosession, "click_graph": clicks})


def test_selection_caps_at_k_pads_and_never_gives_a_train_query_its_own_labels() -> None:
    data = _graph_dataset(None)
    docs, pool, pool_vecs = train_doc_neighbours(data, _embed, k=3, limit=8, min_impressions=1, search=16)
    assert pool == sorted(set(data.anchor_sets["cosession_queries"].texts))
    own = [{"red shoes", "shoe store"}, {"blue shoes", "shoe store"}, {"green hats", "hat shop"},
           {"lonely query", "hat shop"}]
    for texts, forbidden in zip(docs.texts, own, strict=True):
        assert not set(texts) & forbidden
    assert len(docs.texts[0]) == 4 and not docs.proxy[0]  # six anchors, two are its labels: four candidates left
    assert docs.texts[2] == ["woollen hats"] and not docs.proxy[2]  # "hat shop" is its label
    assert docs.proxy[3] and len(docs.texts[3]) == 3  # no graph neighbour: ANN proxies
    rows = [t[:3] for t in docs.texts]
    flat, present = padded(rows, 3)
    assert len(flat) == 12 and present.sum(axis=1).tolist() == [3, 1, 1, 3]
    assert flat[3:6] == ["scarlet shoes", "", ""]
    assert pick(["a", "b", "c", "d", "e"], {"b"}, 3) == ["a", "c", "d"]


def test_a_label_never_has_its_own_text_and_a_pair_drops_its_query_from_the_labels_neighbours() -> None:
    data = _graph_dataset(None)
    labels = label_neighbours(data, _embed, k=3, limit=8, min_impressions=1, search=16)
    # label 0's only click is by its own text: no graph neighbour is left, so its neighbours are ANN proxies
    assert labels.proxy[0] and "red shoes" not in labels.texts[0] and len(labels.texts[0]) == 3
    assert set(labels.texts[1]) == {"red shoes", "blue shoes"} and not labels.proxy[1]
    assert "blue shoes" not in pick(labels.texts[1], {"blue shoes"}, 3)  # the training pair (blue shoes, label 1)


def test_test_queries_use_their_test_edges_and_otherwise_ann_proxies() -> None:
    data = _graph_dataset(np.array([[0, 4], [0, 0], [0, 5], [0, 3], [1, 6]], np.int64))
    _, pool, pool_vecs = train_doc_neighbours(data, _embed, 3, 8, 1, 16)
    found = heldout_doc_neighbours(data, _embed(data.test_texts), pool, pool_vecs, k=3, search=16)
    assert len(found.texts[0]) == 3 and set(found.texts[0]) <= {"red sneakers", "crimson shoes", "red shoes sale",
                                                               "scarlet shoes"}
    assert found.texts[1] == ["woollen hats"] and not found.proxy[1]
    assert found.proxy.tolist() == [False, False, True] and len(found.texts[2]) == 3
    assert found.counts() == {"graph": 2, "proxy": 1, "none": 0}
    without = heldout_doc_neighbours(_graph_dataset(None), _embed(data.test_texts), pool, pool_vecs, 3, 16)
    assert without.proxy.all()  # no test_edges: every test query is served by proxies
    empty = heldout_doc_neighbours(_graph_dataset(np.empty((0, 2), np.int64)), _embed(data.test_texts), pool,
                                pool_vecs, 3, 16)
    assert empty.proxy.all()


def test_the_positive_control_hands_each_row_its_own_answers_and_nothing_else() -> None:
    from xc_core.methods.textgnn.neighbours import answer_neighbours

    y = sp.csr_matrix(np.array([[0, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]]))
    found = answer_neighbours(y, ["a", "b", "c", "d", "e"], k=3)
    assert found.texts == [["b", "c", "d"], [], ["a"]] and not found.proxy.any()


def test_the_neighbour_step_encodes_each_distinct_text_once_and_finds_the_same_neighbours() -> None:
    data, asked = _graph_dataset(None), []

    def counting(texts: list[str]) -> np.ndarray:
        asked.extend(texts)
        return _embed(texts)

    memo = MemoEmbed(counting)
    docs, pool, pool_vecs = train_doc_neighbours(data, memo, 3, 8, 1, 16)
    labels = label_neighbours(data, memo, 3, 8, 1, 16)
    assert len(asked) == len(set(asked)) and set(pool) <= set(asked)  # anchors: tie-break and proxy pool, once
    plain_docs, plain_pool, plain_vecs = train_doc_neighbours(data, _embed, 3, 8, 1, 16)
    assert docs.texts == plain_docs.texts and pool == plain_pool and np.allclose(pool_vecs, plain_vecs)
    assert labels.texts == label_neighbours(data, _embed, 3, 8, 1, 16).texts
    assert memo([]).shape == (0, pool_vecs.shape[1]) and np.allclose(memo(["hat shop"] * 2), _embed(["hat shop"] * 2))


# -- training and the method end to end -----------------------------------------------------------------------

def _fit(data: XCDataset, home: Path, skip: Skip = "add", **overrides: Any) -> tuple[Any, Any, Any]:
    """(Fit, encoder, heads) of TextGNN trained on ``data`` with the tiny profile and ``overrides`` (TrainConfig's
    or TextGNNConfig's fields)."""
    from xc_core.encoders.text import TextEncoder
    from xc_core.methods.textgnn.config import TextGNNConfig
    from xc_core.methods.textgnn.model import TextGNNHeads
    from xc_core.methods.textgnn.train import train_textgnn
    from xc_core.profiles import encoder_config, get_profile, train_settings

    profile = get_profile("tiny")
    cfg = train_settings(profile)
    cfg = cfg.model_copy(update={k: v for k, v in overrides.items() if k in type(cfg).model_fields})
    tg = TextGNNConfig(skip=skip, **{k: v for k, v in overrides.items() if k in TextGNNConfig.model_fields})
    encoder = TextEncoder(encoder_config(profile, home))
    docs, labels = _neighbours(data, encoder)
    torch.manual_seed(cfg.seed)  # the heads' start, seeded as the method seeds it (else it follows earlier tests)
    heads = TextGNNHeads(encoder.dim, skip)
    return train_textgnn(data, encoder, heads, docs, labels, cfg, tg), encoder, heads


def test_training_lowers_the_loss_on_a_tiny_data_set(tiny_data: XCDataset, tiny_home: Path) -> None:
    # learning itself is under test: the last epoch is served (selection has its own tests below)
    fit, _, _ = _fit(tiny_data, tiny_home, skip="concat", select_best=False)
    assert fit.loss_after < 0.7 * fit.loss_before
    assert [h["epoch"] for h in fit.history] == [0, 1, 2] and fit.steps > 0
    assert fit.selection["selected_epoch"] == 2 and fit.selection["val_recall@10"] == fit.history[2]["val_recall@10"]


def test_validation_documents_are_the_trainers_and_never_trained_on(tiny_data: XCDataset) -> None:
    from xc_core.profiles import get_profile, train_settings
    from xc_core.training.selection import split
    from xc_core.training.validation import split_validation

    cfg = train_settings(get_profile("tiny")).model_copy(update={"val_split": "documents"})
    found = split(tiny_data, cfg)
    train, val = found.train_rows, found.val_rows
    assert (val == split_validation(len(tiny_data.train_texts), cfg)[1]).all()
    assert len(val) and not set(train.tolist()) & set(val.tolist())


def test_updates_that_hurt_validation_leave_the_untrained_start(tiny_data: XCDataset, tiny_home: Path) -> None:
    """An absurd learning rate: every epoch's validation recall falls below the start's, so the start is kept."""
    from xc_core.methods.textgnn.config import TextGNNConfig
    from xc_core.methods.textgnn.train import Steps
    from xc_core.profiles import get_profile, train_settings

    fit, encoder, heads = _fit(tiny_data, tiny_home, lr=1.0, lr_heads=1.0)
    history = fit.history
    assert [h["epoch"] for h in history] == [0, 1, 2]
    assert all(h["val_recall@10"] < history[0]["val_recall@10"] for h in history[1:])
    assert fit.selection["selected_epoch"] == 0 and not fit.selection["fallback_test"]["kept"]
    assert fit.selection["val_recall@10"] == history[0]["val_recall@10"]
    assert fit.loss_after == fit.loss_before  # the untrained weights are back
    steps = Steps(tiny_data, encoder, heads, *_neighbours(tiny_data, encoder), train_settings(get_profile("tiny")),
                  TextGNNConfig())  # a fresh validation of the weights the run ended with
    assert steps.validate(0, float("nan"))["val_recall@10"] == history[0]["val_recall@10"]
    kept, _, _ = _fit(tiny_data, tiny_home, lr=1.0, lr_heads=1.0, select_best=False)
    assert kept.selection["selected_epoch"] == 2 and kept.selection["val_recall@10"] == history[2]["val_recall@10"]


def _neighbours(data: XCDataset, encoder: Any) -> tuple[Any, Any]:
    docs, _, _ = train_doc_neighbours(data, encoder.encode, 3, 8, 1, 32)
    return docs, label_neighbours(data, encoder.encode, 3, 8, 1, 32)


@pytest.fixture(scope="module")
def textgnn_home(tiny_home: Path) -> Path:
    """textgnn trained on the tiny home with the last epoch served (on 40 validation rows no trained epoch can show a
    gain, so selection would serve the untrained start and the trained path would go unserved)."""
    from xc_core.paths import anchors_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.train import train_method

    profile = get_profile("tiny")
    profile = profile.model_copy(update={"train": profile.train.model_copy(update={"select_best": False})})
    train_method(XCDataset.load(anchors_dir(tiny_home, "synthetic")), "textgnn", profile, tiny_home)
    return tiny_home


def test_train_index_evaluate_and_serve_on_the_tiny_synthetic_home(textgnn_home: Path) -> None:
    from xc_core.methods import Served, get_method
    from xc_core.paths import anchors_dir
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.index import index_method
    from xc_core.training.record import TrainedModel

    data = XCDataset.load(anchors_dir(textgnn_home, "synthetic"))
    trained = TrainedModel.of(textgnn_home, "synthetic", "textgnn", "tiny")
    summary = trained.summary
    assert summary["epochs"] == 2 and summary["train_seconds"] > 0 and summary["seconds_per_epoch"] > 0
    assert summary["parameters"] > summary["encoder_parameters"] > 0
    assert summary["loss_after"] < summary["loss_before"]
    assert [h["epoch"] for h in summary["history"]] == [0, 1, 2] and summary["val_documents"] > 0
    assert summary["selected_epoch"] == 2 and summary["val_recall@10"] == summary["history"][2]["val_recall@10"]
    preds = index_method(data, "textgnn", "tiny", textgnn_home)
    assert preds.scores.shape == (len(data.test_texts), data.n_labels)
    assert (np.diff(preds.scores.indptr) > 0).all()
    result = evaluate_method(data, "textgnn", "tiny", textgnn_home)
    assert 0.0 < result["P@1"] <= 1.0
    found = result["textgnn"]
    served = found["test_neighbours"]
    assert served["graph"] + served["proxy"] == len(data.test_texts)
    assert set(found["ms_per_query_steps"]) == {"encoder", "graph", "search"}
    relevance = found["relevance"]
    assert 0.5 < relevance["textgnn"]["auc"] <= 1.0 and 0.5 < relevance["encoder only"]["auc"] <= 1.0
    method = get_method("textgnn")
    elsewhere = method.analyse(replace(data, name="not-simulated"), trained, preds, textgnn_home / "tmp-analyse")
    assert elsewhere["textgnn"]["relevance"]["applicable"] is False
    again = method.analyse(data, trained, preds, textgnn_home / "tmp-again")  # a second seed's evaluation, same process
    assert again["textgnn"]["relevance"]["textgnn"]["auc"] == relevance["textgnn"]["auc"]
    score = method.scorer(Served(trained.model_uri, textgnn_home, "synthetic", "tiny"))
    texts = [data.train_texts[0], "a query nobody typed"]
    scores, ids = score(texts, 5)
    assert ids.shape == (2, 5) and (ids >= 0).all()
    assert np.all(np.diff(scores, axis=1) <= 1e-6)
    import mlflow

    from xc_core.index.ties import rankings_agree
    from xc_core.tracking.registry import served_model

    # what registration logs answers by itself (query tower + neighbours + its index inside), as the scorer does:
    # the same ranking up to ties (``index/ties.py``: copies of a repeated label text may swap places)
    logged = served_model(textgnn_home, "synthetic", "textgnn", "tiny", trained, "test")
    bundled = mlflow.pyfunc.load_model(logged.model_uri).unwrap_python_model().model
    answer = bundled.search(texts, 5)
    assert rankings_agree((scores, ids), answer).all(), (scores, ids, answer)
    assert bundled.info["search"] == "index"


# -- on a stage I: the trained encoder's light tower under the GAT towers -------------------------------------

def test_on_a_stage_one_it_starts_where_stage_one_ended_and_trains_only_the_light_tower_and_heads(
        tower_home: Path) -> None:
    """TextGNN on `dual_encoder`'s tower (the CPU recipe): epoch 0 is stage I's encoder (the GAT's output starts at
    zero), so its validation recall is stage I's; the transformer stays stage I's bit for bit, the light tower and
    the heads train; the record names stage I. A run whose validation rows would differ from stage I's is refused."""
    from tests.conftest import TOWER_RECIPE
    from tests.methods.stage_one import assert_trained_on_from_stage_one

    assert_trained_on_from_stage_one(tower_home, "textgnn", TOWER_RECIPE)
