"""The hybrid channel (classifier/xrlinear/): liblinear's solver, PECOS's label tree and beam search, plain-array
storage, and its place in the fused search."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.classifier.xrlinear import HYBRID_DIR, LinearChannel, LinearConfig, label_tree
from xc_core.classifier.xrlinear.solver import solve_all
from xc_core.datasets.container import XCDataset


def _objective(x: np.ndarray, signs: np.ndarray, w: np.ndarray, b: float, cost: float = 1.0) -> float:
    margins = signs * (x @ w + b)
    return float(0.5 * (w @ w + b * b) + cost * np.sum(np.maximum(0.0, 1.0 - margins) ** 2))


def test_the_solver_reaches_liblinears_optimum() -> None:
    """Same objective (L2-regularised squared hinge, bias as a feature) as scikit-learn's liblinear LinearSVC."""
    from sklearn.svm import LinearSVC

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 20)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    signs = np.where(rng.random(300) < 0.2, 1.0, -1.0).astype(np.float32)
    empty = (np.zeros(301, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    _, _, _, dense, bias = solve_all(np.array([0, 300], np.int64), np.arange(300, dtype=np.int64), signs, *empty,
                                      x, 0, 1.0, 1.0, 100, 1e-6, 0.0, 0)
    ours = _objective(x, signs, dense[0].astype(np.float64), float(bias[0]))
    svc = LinearSVC(C=1.0, loss="squared_hinge", dual=True, tol=1e-8, max_iter=100_000).fit(x, signs)
    theirs = _objective(x, signs, svc.coef_[0], float(svc.intercept_[0]))
    assert ours == pytest.approx(theirs, rel=1e-4)


def test_the_label_tree_is_balanced_with_layers_of_sixteen_way_splits() -> None:
    emb = np.random.default_rng(0).normal(size=(3000, 8)).astype(np.float32)
    layers = label_tree(emb / np.linalg.norm(emb, axis=1, keepdims=True), max_leaf=100, branching=16, seed=0)
    # ceil(log2(3000 / 100)) = 5 binary levels: 16 nodes after 4, 32 leaves after 5, then the labels
    assert [len(np.unique(a)) for a in layers] == [16, 32, 3000]
    sizes = np.bincount(layers[1])
    assert sizes.max() - sizes.min() <= 1 and sizes.max() <= 100
    assert np.array_equal(layers[1] >> 1, layers[0]), "each leaf cluster lies inside one top-layer node"


def _channel(data: XCDataset, features: Literal["hybrid", "sparse", "dense"]
             ) -> tuple[LinearChannel, np.ndarray, np.ndarray]:
    from xc_core.classifier.xrlinear import HybridFeatures

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(data.train_texts), 16)).astype(np.float32)  # noise: the text must carry it
    y = sp.csr_matrix(data.y_train)
    cfg = LinearConfig(features=features, max_leaf=20)
    channel = LinearChannel.fit(list(data.train_texts), vectors, y, cfg)
    assert isinstance(channel.features, HybridFeatures)
    return channel, vectors, np.flatnonzero(np.diff(y.indptr) > 0)


def test_the_channel_ranks_training_documents_own_labels_first(tiny_data: XCDataset) -> None:
    """On noise vectors the hybrid channel still finds a document's labels from its words: the sparse block works."""
    channel, vectors, labelled = _channel(tiny_data, "hybrid")
    rows = labelled[:200]
    scores, ids = channel.search([tiny_data.train_texts[i] for i in rows], vectors[rows], 5)
    y = sp.csr_matrix(tiny_data.y_train)
    hits = np.asarray(y[rows[:, None], np.maximum(ids[:, :1], 0)].todense()).ravel()
    chance = float(np.mean(np.diff(y.indptr)[rows])) / y.shape[1]
    assert hits.mean() > 0.5 and hits.mean() > 20 * chance
    assert np.all(np.diff(scores, axis=1) <= 1e-7) and np.all((scores >= 0) & (scores <= 1))
    assert len(channel.layers) >= 2 and channel.info["labels_trained"] == len(channel.labels)


def test_the_channel_is_stored_as_plain_arrays_and_scores_the_same_after_loading(tiny_data: XCDataset,
                                                                                tmp_path: Path) -> None:
    channel, vectors, labelled = _channel(tiny_data, "hybrid")
    folder = channel.save(tmp_path / HYBRID_DIR)
    for layer_file in folder.glob("layer*.npz"):
        with np.load(layer_file, allow_pickle=False) as arrays:  # raises on any pickled object
            assert "dense" in arrays
    loaded = LinearChannel.load(folder)
    texts = [tiny_data.train_texts[i] for i in labelled[:50]]
    before, after = channel.search(texts, vectors[labelled[:50]], 10), loaded.search(texts, vectors[labelled[:50]], 10)
    assert np.array_equal(before[1], after[1]) and np.allclose(before[0], after[0])


def test_the_fused_search_adds_the_hybrid_channel_and_needs_the_texts(tiny_data: XCDataset, tmp_path: Path) -> None:
    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.fusion import FusedClassifier, fused_search
    from xc_core.index import IndexConfig, LabelIndex

    channel, vectors, labelled = _channel(tiny_data, "hybrid")
    label_vecs = np.random.default_rng(1).normal(size=(tiny_data.n_labels, 16)).astype(np.float32)
    label_vecs /= np.linalg.norm(label_vecs, axis=1, keepdims=True)
    fused = FusedClassifier(label_vecs, Fusion(linear_weight=10.0), search_k=20, channels={"hybrid": channel})
    folder = fused.save(tmp_path / "classifier")
    assert (folder / HYBRID_DIR / "linear.json").exists()
    loaded = FusedClassifier.load(folder)
    assert loaded.active("hybrid") is not None and loaded.uses_texts
    index = LabelIndex.build(label_vecs, None, IndexConfig(kind="flat"))
    rows = labelled[:100]
    texts = [tiny_data.train_texts[i] for i in rows]
    with pytest.raises(ValueError, match="query texts"):
        fused_search(vectors[rows], index, index, label_vecs, loaded, 5)
    _, ids = fused_search(vectors[rows], index, index, label_vecs, loaded, 5, texts=texts)
    _, alone = fused_search(vectors[rows], index, index, label_vecs, loaded.with_fusion(linear_weight=0.0), 5)
    y = sp.csr_matrix(tiny_data.y_train)
    hit = np.asarray(y[rows[:, None], np.maximum(ids[:, :1], 0)].todense()).mean()
    hit_alone = np.asarray(y[rows[:, None], np.maximum(alone[:, :1], 0)].todense()).mean()
    assert hit > hit_alone + 0.3, "random label vectors alone find nothing; the hybrid channel's words do"


def test_the_costs_count_the_hybrid_channels_weights_not_its_index_arrays(tiny_data: XCDataset,
                                                                          tmp_path: Path) -> None:
    from xc_core.evaluation.costs import count_parameters

    channel, _, _ = _channel(tiny_data, "hybrid")
    folder = channel.save(tmp_path / HYBRID_DIR)
    expected = sum(layer.sparse_weights.nnz + layer.dense_weights.size + layer.biases.size for layer in channel.layers)
    assert count_parameters([folder]) == expected > 0


def test_the_pair_kernel_adds_what_the_sparse_product_adds_to_the_bit_by_either_walk() -> None:
    """The beam scores a node by ``x · w``; the kernel walks either the listed nodes' weights or the query's columns,
    whichever is cheaper, and either way must give the CSR product's float32 sums exactly (the served ranking and
    the evaluated one are the same ranking)."""
    from xc_core.classifier.xrlinear.model import sparse_pairs

    rng = np.random.default_rng(0)
    weights = sp.random(400, 3000, density=0.02, format="csr", dtype=np.float32, random_state=1)
    weights.data = rng.normal(size=weights.nnz).astype(np.float32)
    weights = sp.csr_matrix(weights[:, rng.permutation(3000)])  # indices unsorted, as the solver may leave them
    weights.sort_indices()
    x = sp.random(5, 3000, density=0.05, format="csr", dtype=np.float32, random_state=2)
    x.data = rng.normal(size=x.nnz).astype(np.float32)
    x = sp.csr_matrix(sp.diags(np.array([1, 1, 1, 0, 1], np.float32)) @ x)  # query 3: no known n-gram, scores 0
    x.eliminate_zeros()
    x.sort_indices()
    expected = (x @ weights.T).toarray()
    few = rng.integers(0, 400, size=(5, 3))  # a beam's few nodes: the node walk is the cheaper
    every = np.tile(np.arange(400), (5, 1))  # a small layer listed whole: the column walk is the cheaper
    for nodes in (few, every):
        got = sparse_pairs(x, weights, sp.csr_matrix(weights.T), nodes)
        assert np.array_equal(got.view(np.int32), np.take_along_axis(expected, nodes, axis=1).view(np.int32))
    assert not np.any(sparse_pairs(x, weights, sp.csr_matrix(weights.T), few)[3])


def test_the_tfidf_rows_are_scikit_learns_to_the_bit(tiny_data: XCDataset) -> None:
    """The hybrid features build TF-IDF rows without scikit-learn's per-call validation (most of a served query's
    cost there); fitted vectorizers given the same vocabulary and idf must give the same float32 values."""
    from sklearn.preprocessing import normalize

    from xc_core.classifier.xrlinear import HybridFeatures
    from xc_core.classifier.xrlinear.features import _vectorizers

    cfg = LinearConfig(features="hybrid")
    features = HybridFeatures.fit(list(tiny_data.train_texts), cfg)
    word, char = _vectorizers(cfg, (features.word_vocabulary, features.char_vocabulary))
    word.idf_, char.idf_ = features.word_idf, features.char_idf
    texts = [*tiny_data.test_texts, *tiny_data.label_texts, "", "Ünïcode straße 42", "zzzz qqqq"]
    expected = normalize(sp.hstack([word.transform(texts), char.transform(texts)], format="csr", dtype=np.float32))
    got = features.sparse(texts)
    assert got.shape == expected.shape and got.nnz > len(texts)
    assert np.array_equal(got.indptr, expected.indptr) and np.array_equal(got.indices, expected.indices)
    assert np.array_equal(got.data.view(np.int32), expected.data.view(np.int32))


def test_the_install_step_compiles_both_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    """``make install`` runs ``python -m xc_core.classifier.xrlinear``: its small fit and search reach the solver and
    the pair kernel, so both are compiled (or loaded from numba's cache) for the types a real fit passes them."""
    from xc_core.classifier.xrlinear.__main__ import main
    from xc_core.classifier.xrlinear.model import _pairs_kernel
    from xc_core.classifier.xrlinear.solver import _kernels

    assert main() == 0
    assert "kernels are compiled and cached" in capsys.readouterr().out
    compiled = [getattr(kernel, "signatures", ()) for kernel in (_kernels()["solve"], _pairs_kernel())]
    assert all(compiled), compiled  # numba dispatchers: the signatures each was compiled (or loaded) for
