"""OAK, the two-stage GCN baseline (issue #16): the GCN layer convolves a query with its linked graph nodes, the
oracle linker passes exactly a test query's true neighbours (the predicted linker where it has none), training
lowers the loss, and ``oak`` / ``oak-oracle`` go train → index → evaluate → serve on the tiny synthetic home."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.methods.oak.config import OakConfig
from xc_core.methods.oak.graph import NodeTable, oracle_neighbours, train_neighbours
from xc_core.methods.oak.inference import OakModel
from xc_core.methods.oak.model import GraphConvolution
from xc_core.methods.oak.scorer import linked


def _unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


def _trained_layer(aggregation: str, dim: int = 16) -> GraphConvolution:
    torch.manual_seed(0)
    layer = GraphConvolution(dim, aggregation)  # type: ignore[arg-type]  # one of the Aggregation literals
    with torch.no_grad():  # move every parameter off its initial value, as training does
        for param in layer.parameters():
            param.add_(0.2 * torch.randn_like(param))
    return layer.eval()


# -- the GCN layer ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("aggregation", ["attention", "mean"])
def test_changing_a_linked_nodes_embedding_changes_the_query_representation(aggregation: str) -> None:
    layer = _trained_layer(aggregation)
    query, nodes = _unit(torch.randn(3, 16)), _unit(torch.randn(3, 4, 16))
    present = torch.tensor([[True, True, False, False], [True, True, True, True], [True, False, False, False]])
    with torch.no_grad():
        out = layer(query, nodes, present)
        assert torch.allclose(out.norm(dim=-1), torch.ones(3), atol=1e-5)
        moved = nodes.clone()
        moved[:, 0] = _unit(torch.randn(3, 16))  # a present neighbour of every row
        assert (layer(query, moved, present) - out).norm(dim=-1).min() > 1e-3
        padded = nodes.clone()
        padded[0, 3] = 100 * torch.randn(16)  # an absent slot holds anything
        assert torch.allclose(layer(query, padded, present), out, atol=1e-6)


@pytest.mark.parametrize("aggregation", ["attention", "mean"])
def test_with_no_neighbour_the_layer_reduces_to_its_self_term(aggregation: str) -> None:
    layer = _trained_layer(aggregation)
    query, nodes = _unit(torch.randn(4, 16)), torch.randn(4, 3, 16)
    with torch.no_grad():
        self_term = _unit(layer.self_map(query))
        none = torch.zeros(4, 3, dtype=torch.bool)
        assert torch.allclose(layer(query, nodes, none), self_term, atol=1e-6)
        assert torch.allclose(layer(query, torch.zeros(4, 0, 16), none[:, :0]), self_term, atol=1e-6)
        mixed = torch.tensor([[True, True, False], [False] * 3, [True] * 3, [False] * 3])
        out = layer(query, nodes, mixed)  # rows without neighbours inside a batch with some
        assert torch.allclose(out[[1, 3]], self_term[[1, 3]], atol=1e-6)
        assert not torch.allclose(out[[0, 2]], self_term[[0, 2]], atol=1e-3)


def test_an_untrained_layer_is_the_encoder() -> None:
    torch.manual_seed(0)
    layer = GraphConvolution(16).eval()
    query = _unit(torch.randn(3, 16))
    with torch.no_grad():
        assert torch.allclose(layer(query, torch.randn(3, 2, 16), torch.ones(3, 2, dtype=torch.bool)), query,
                              atol=1e-6)


# -- the graph and the linkers ------------------------------------------------------------------------------------

def _graph_world() -> XCDataset:
    """Two anchor sets sharing the node "shoes"; test documents 0 and 2 have true neighbours, 1 and 3 none."""
    queries = AnchorSet("queries", ["running shoes", "shoes", "cheap flights"], doc_edges=np.array([[0, 0], [1, 2]]),
                        label_edges=np.array([[0, 1]]))
    items = AnchorSet("items", ["shoes", "hotel deals", "trail runners"], doc_edges=np.array([[0, 2]]),
                      label_edges=np.empty((0, 2)))
    queries.test_edges = np.array([[0, 0], [2, 2]], dtype=np.int64)
    items.test_edges = np.array([[0, 0], [0, 2]], dtype=np.int64)
    return XCDataset("graph", ["shoes for running", "flights to rome"], ["trail shoes", "rome flights",
                                                                        "running gear", "hotel in rome"],
                     ["shoe shop", "airline"], sp.csr_matrix(np.array([[1, 0], [0, 1]])),
                     sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 0], [0, 1]])),
                     anchor_sets={"queries": queries, "items": items})


def test_equal_anchor_texts_are_one_node_and_train_documents_link_through_doc_edges() -> None:
    data = _graph_world()
    nodes = NodeTable.of(data)
    assert nodes.texts == ["running shoes", "shoes", "cheap flights", "hotel deals", "trail runners"]
    assert nodes.node_of["items"].tolist() == [1, 3, 4]
    assert train_neighbours(data, nodes).toarray().astype(int).tolist() == [[1, 0, 0, 0, 1], [0, 0, 1, 0, 0]]


def _model(node_texts: list[str], dim: int = 8, neighbours: int = 2) -> OakModel:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(node_texts), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return OakModel(GraphConvolution(dim).eval(), node_texts, vectors, OakConfig(neighbours=neighbours))


def test_the_oracle_linker_gives_exactly_the_true_neighbours_and_falls_back_to_the_predicted_one() -> None:
    data = _graph_world()
    model = _model(NodeTable.of(data).texts)
    query = np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32)
    truth = oracle_neighbours(data, model.node_texts)
    assert [sorted(truth[i].indices.tolist()) for i in range(4)] == [[0, 1, 4], [], [2], []]
    ids, served = linked(model, query, data, oracle=True)
    assert served.tolist() == [True, False, True, False]
    assert [sorted(i for i in row if i >= 0) for row in ids[served]] == [[0, 1, 4], [2]]
    predicted = model.link(query)
    for row in (1, 3):  # no true neighbour: the predicted linker's top-k
        assert [i for i in ids[row] if i >= 0] == predicted[row].tolist()
    plain, none = linked(model, query, data, oracle=False)
    assert not none.any() and (plain == predicted).all()


def test_the_predicted_linker_retrieves_the_nodes_nearest_the_query() -> None:
    model = _model(["a", "b", "c", "d"], neighbours=2)
    query = model.node_vectors[[2]] + 0.01 * model.node_vectors[[0]]
    assert model.link(query)[0, 0] == 2 and len(model.link(query)[0]) == 2


def test_a_saved_model_serves_the_linker_it_was_saved_with(tmp_path: Path) -> None:
    """The HNSW linker is saved with the model: loading links like the saved model without building a graph."""
    rng = np.random.default_rng(3)
    model = _model([f"node {i}" for i in range(300)], neighbours=3)
    model.cfg = model.cfg.model_copy(update={"linker_index_min": 100})  # 300 nodes: HNSW, not exact
    query = rng.normal(size=(20, 8)).astype(np.float32)
    before = model.link(query)
    model.save(tmp_path / "oak")
    assert (tmp_path / "oak" / "linker" / "index.faiss").exists()
    loaded = OakModel.load(tmp_path / "oak")
    assert loaded._linker is not None and loaded._linker.cfg.kind == "hnsw"
    assert (loaded.link(query) == before).all()
    (tmp_path / "oak" / "linker" / "index.faiss").unlink()
    (tmp_path / "oak" / "linker" / "manifest.json").unlink()
    (tmp_path / "oak" / "linker").rmdir()
    old = OakModel.load(tmp_path / "oak")  # saved before linkers were: built on first use
    assert old._linker is None and old.link(query).shape == before.shape


def test_a_data_set_without_test_edges_falls_back_everywhere() -> None:
    data = _graph_world()
    for aset in data.anchor_sets.values():
        aset.test_edges = np.empty((0, 2), dtype=np.int64)
    model = _model(NodeTable.of(data).texts)
    ids, served = linked(model, np.ones((4, 8), dtype=np.float32), data, oracle=True)
    assert not served.any() and (ids[:, :2] == model.link(np.ones((4, 8), dtype=np.float32))).all()


def test_no_document_has_its_own_label_or_a_heldout_document_as_a_neighbour() -> None:
    from xc_core.methods.oak.train import without_leaks

    data = _graph_world()
    queries = AnchorSet("queries", ["running shoes", "shoes", "cheap flights", "shoe shop", "flights to rome"],
                        doc_edges=np.array([[0, 0], [1, 2], [0, 3], [0, 4]]), label_edges=np.array([[0, 1]]))
    data = replace(data, anchor_sets={**data.anchor_sets, "queries": queries})
    nodes = NodeTable.of(data)
    clean = without_leaks(train_neighbours(data, nodes), data, nodes, heldout={"flights to rome"})
    # document 0's label is "shoe shop" and "flights to rome" is a held-out document: both dropped
    assert [[nodes.texts[j] for j in clean[i].indices] for i in range(2)] == [["running shoes", "trail runners"],
                                                                             ["cheap flights"]]


# -- training and the methods end to end ----------------------------------------------------------------------------

def _with_test_edges(data: XCDataset, rows: int = 10) -> XCDataset:
    """The first ``rows`` test documents given true neighbours in one anchor set, and no other test document any:
    what the oracle linker must pass them, whatever test edges the fixture's anchor sets hold."""
    name, aset = next((n, a) for n, a in data.anchor_sets.items() if len(a.texts) >= 3)
    edges = np.array([(i, (7 * i + k) % len(aset.texts)) for i in range(rows) for k in range(2)], dtype=np.int64)
    sets = {n: replace(a, test_edges=edges if n == name else np.empty((0, 2), dtype=np.int64))
            for n, a in data.anchor_sets.items()}
    return replace(data, anchor_sets=sets)


EVALUATED: dict[str, dict[str, Any]] = {}  # the evaluation summaries oak_home produced, by method


def _last_epoch_profile() -> Any:
    """The tiny profile with selection off: the last epoch is served."""
    from xc_core.profiles import get_profile

    profile = get_profile("tiny")
    return profile.model_copy(update={"train": profile.train.model_copy(update={"select_best": False})})


@pytest.fixture(scope="module")
def oak_home(tiny_home: Path) -> Path:
    """``oak`` and ``oak-oracle`` trained, indexed and evaluated on the tiny synthetic home (tiny random BERT). The
    last epoch is served (on 40 validation rows no trained epoch can show a gain, so selection would serve the
    untrained start and the trained path would go unserved); selection is tested below with ``train_oak``."""
    from xc_core.paths import anchors_dir
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.index import index_method
    from xc_core.stages.train import train_method

    data = _with_test_edges(XCDataset.load(anchors_dir(tiny_home, "synthetic")))
    for method in ("oak", "oak-oracle"):
        train_method(data, method, _last_epoch_profile(), tiny_home)
        index_method(data, method, "tiny", tiny_home)
        EVALUATED[method] = evaluate_method(data, method, "tiny", tiny_home)
    return tiny_home


def _trained(home: Path, method: str) -> Any:
    from xc_core.training.record import TrainedModel

    return TrainedModel.of(home, "synthetic", method, "tiny")


def test_training_lowers_the_loss_on_fixed_training_batches(oak_home: Path) -> None:
    summary = _trained(oak_home, "oak").summary
    assert summary["loss_after"] < summary["loss_before"]
    assert summary["epochs"] == 2 and summary["steps"] > 0 and summary["train_seconds"] > 0
    assert summary["seconds_per_epoch"] > 0 and [h["epoch"] for h in summary["history"]] == [0, 1, 2]
    assert summary["selected_epoch"] == 2 and "fallback_test" not in summary  # selection off: the last epoch
    assert summary["val_recall@10"] == summary["history"][2]["val_recall@10"]


def test_updates_that_hurt_validation_leave_the_untrained_start(tiny_data: XCDataset, tiny_home: Path,
                                                                tmp_path: Path) -> None:
    """An absurd learning rate: every epoch's validation recall falls below the start's, so the start is kept."""
    from xc_core.methods.oak.train import train_oak
    from xc_core.profiles import encoder_config, get_profile, train_settings

    profile = get_profile("tiny")
    runs = {best: train_oak(tiny_data, encoder_config(profile, tiny_home),
                            train_settings(profile).model_copy(update={"lr": 1.0, "select_best": best}),
                            OakConfig(gcn_lr=1.0), tmp_path / str(best)) for best in (True, False)}
    history = runs[True].history
    assert [h["epoch"] for h in history] == [0, 1, 2]
    assert all(h["val_recall@10"] < history[0]["val_recall@10"] for h in history[1:])
    assert runs[True].selection["selected_epoch"] == 0 and not runs[True].selection["fallback_test"]["kept"]
    assert runs[True].selection["val_recall@10"] == history[0]["val_recall@10"]
    assert runs[True].loss_after == runs[True].loss_before  # the untrained weights are back
    untrained = GraphConvolution(runs[True].model.gcn.self_map.in_features)
    for a, b in zip(runs[True].model.gcn.state_dict().values(), untrained.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert runs[False].selection["selected_epoch"] == 2  # selection off: the last epoch
    assert runs[False].selection["val_recall@10"] == runs[False].history[2]["val_recall@10"]


def test_the_record_counts_every_parameter_inference_uses(oak_home: Path) -> None:
    summary = _trained(oak_home, "oak").summary
    model = OakModel.load(Path(_trained(oak_home, "oak").folder) / "oak")
    dim = model.node_vectors.shape[1]
    assert summary["parameters"] == (summary["parameters_encoder"] + summary["parameters_gcn"]
                                     + summary["parameters_node_table"])
    assert summary["parameters_gcn"] == 3 * dim * dim  # W_self, W_nbr, W_att
    assert summary["parameters_node_table"] == model.node_vectors.size == summary["graph_nodes"] * dim > 0


def test_both_linkers_train_the_same_model_and_only_the_oracle_serves_true_neighbours(oak_home: Path) -> None:
    import json

    from xc_core.paths import index_dir

    plain, oracle = (OakModel.load(Path(_trained(oak_home, m).folder) / "oak") for m in ("oak", "oak-oracle"))
    for a, b in zip(plain.gcn.state_dict().values(), oracle.gcn.state_dict().values(), strict=True):
        assert torch.equal(a, b)  # same seed, same training: the report's difference is the linker's
    reports = {m: json.loads((index_dir(oak_home, "synthetic", m, "tiny") / "index_report.json").read_text())
               for m in ("oak", "oak-oracle")}
    n_test = reports["oak"]["queries"]
    assert reports["oak"]["oracle_share"] == 0.0
    assert reports["oak-oracle"]["oracle_share"] == pytest.approx(round(10 / n_test, 4))
    for report in reports.values():
        parts = [report[k] for k in ("ms_per_query_encoder", "ms_per_query_linker_gcn", "ms_per_query_search")]
        assert all(p >= 0 for p in parts) and report["ms_per_query_total"] == pytest.approx(sum(parts), abs=1e-3)
    assert EVALUATED["oak-oracle"]["oracle_share"] == reports["oak-oracle"]["oracle_share"]
    assert EVALUATED["oak"]["ms_per_query_linker_gcn"] == reports["oak"]["ms_per_query_linker_gcn"]


def test_the_scorer_serves_the_registered_model_through_the_predicted_linker(oak_home: Path) -> None:
    """The scorer and the served model registration bundles rank as the evaluation's search (encoder → predicted
    linker → GCN → the method's index), up to ties (``index/ties.py``): the tiny labels repeat texts, so copies may
    swap places, and the bundle may run its encoder on ONNX. Another linker input is a divergence it catches."""
    import mlflow

    from xc_core.encoders.text import encoder_for
    from xc_core.index import LabelIndex
    from xc_core.index.ties import rankings_agree
    from xc_core.methods import get_method
    from xc_core.methods.base import Served
    from xc_core.paths import anchors_dir, index_dir
    from xc_core.tracking.registry import served_model
    from xc_core.tracking.store import activate, tracking_uri

    activate(tracking_uri(oak_home))
    trained = _trained(oak_home, "oak")
    texts = list(XCDataset.load(anchors_dir(oak_home, "synthetic")).test_texts[:10])
    scores, ids = get_method("oak").scorer(Served(trained.model_uri, oak_home, "synthetic", "tiny"))(texts, 5)
    assert ids.shape == (10, 5) and (ids >= 0).all() and (np.diff(scores, axis=1) <= 1e-6).all()
    model = OakModel.load(Path(trained.folder) / "oak")
    query = encoder_for(Path(trained.summary["encoder_dir"]), int(trained.summary["max_length"])).encode(texts)
    reps = model.represent(query, model.link(query))  # encoder → predicted linker → GCN, as a live query gets
    assert not np.allclose(reps, query, atol=1e-4)  # the trained layer uses the graph
    index = LabelIndex.load(index_dir(oak_home, "synthetic", "oak", "tiny"))
    expected = index.search(reps, 5)
    assert rankings_agree(expected, (scores, ids)).all(), (expected, scores, ids)
    elsewhere = index.search(model.represent(query, np.roll(model.link(query), 1, axis=0)), 5)
    assert not rankings_agree(expected, elsewhere).any()  # each query fed the next one's neighbours: caught
    # what registration logs answers by itself (encoder, linker, GCN and the index inside), as the scorer does
    logged = served_model(oak_home, "synthetic", "oak", "tiny", trained, "test")
    bundled = mlflow.pyfunc.load_model(logged.model_uri).unwrap_python_model().model
    answer = bundled.search(texts, 5)
    assert rankings_agree(expected, answer).all(), (bundled.info.get("onnx"), expected, answer)


def test_oak_oracle_reuses_oaks_model_and_trains_the_same_one_without_it(oak_home: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Last: it retrains ``oak-oracle`` in the shared home (ending, as before, with ``oak``'s model)."""
    import xc_core.methods.oak as oak_method
    import xc_core.methods.oak.train as oak_train
    from xc_core.paths import anchors_dir
    from xc_core.stages.train import train_method

    plain, reused = _trained(oak_home, "oak").summary, _trained(oak_home, "oak-oracle").summary
    assert reused["reused_model_from"] == "oak" and reused["train_seconds"] == 0.0
    assert reused["model_from_run"] == plain["mlflow_run_id"] and reused["linker"] == "oracle"
    assert reused["selected_epoch"] == plain["selected_epoch"] and reused["history"] == plain["history"]
    data = _with_test_edges(XCDataset.load(anchors_dir(oak_home, "synthetic")))
    with monkeypatch.context() as patch:  # no oak model to take: oak-oracle trains, and trains oak's model
        patch.setattr(oak_method, "reusable_oak", lambda job, fingerprint: None)
        trained = train_method(data, "oak-oracle", _last_epoch_profile(), oak_home)
    assert "reused_model_from" not in trained and trained["train_seconds"] > 0
    assert trained["val_recall@10"] == plain["val_recall@10"] and _timeless(trained) == _timeless(plain)
    _assert_same_weights(oak_home)

    def no_training(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("oak-oracle trained although oak's model was there")

    monkeypatch.setattr(oak_train, "train_oak", no_training)
    assert train_method(data, "oak-oracle", _last_epoch_profile(), oak_home)["reused_model_from"] == "oak"
    _assert_same_weights(oak_home)


def _timeless(summary: dict[str, Any]) -> list[dict[str, float]]:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in summary["history"]]


def _assert_same_weights(home: Path) -> None:
    from safetensors.torch import load_file

    folders = [Path(_trained(home, m).folder) for m in ("oak", "oak-oracle")]
    plain, oracle = (OakModel.load(f / "oak") for f in folders)
    for a, b in zip(plain.gcn.state_dict().values(), oracle.gcn.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert np.array_equal(plain.node_vectors, oracle.node_vectors)
    encoders = [load_file(str(f / "encoder" / "model.safetensors")) for f in folders]
    assert encoders[0].keys() == encoders[1].keys()
    assert all(torch.equal(encoders[0][k], encoders[1][k]) for k in encoders[0])


def test_on_a_stage_one_it_starts_where_stage_one_ended_and_trains_only_the_light_tower_and_layer(
        tower_home: Path) -> None:
    """OAK on `dual_encoder`'s tower (the CPU recipe): the GCN layer starts as the identity on the encoder, so epoch
    0 is stage I; stage I's transformer kept, its light tower trained on, stage I recorded, other rows refused."""
    from tests.conftest import TOWER_RECIPE
    from tests.methods.stage_one import assert_trained_on_from_stage_one

    assert_trained_on_from_stage_one(tower_home, "oak", TOWER_RECIPE)
