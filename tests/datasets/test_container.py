"""XCDataset / AnchorSet: persistence is lossless and validation catches edges outside their spaces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset


def assert_same_matrix(a: sp.csr_matrix, b: sp.csr_matrix) -> None:
    assert a.shape == b.shape
    assert a.dtype == b.dtype
    diff = (sp.csr_matrix(a) != sp.csr_matrix(b))
    assert diff.nnz == 0
    assert a.nnz == b.nnz


def assert_same_anchor_set(a: AnchorSet, b: AnchorSet) -> None:
    assert a.name == b.name
    assert a.texts == b.texts
    np.testing.assert_array_equal(a.doc_edges, b.doc_edges)
    np.testing.assert_array_equal(a.label_edges, b.label_edges)
    np.testing.assert_array_equal(np.asarray(a.doc_proxy, bool), np.asarray(b.doc_proxy, bool))
    np.testing.assert_array_equal(np.asarray(a.label_proxy, bool), np.asarray(b.label_proxy, bool))
    np.testing.assert_array_equal(a.test_edges, b.test_edges)


def assert_same_dataset(a: XCDataset, b: XCDataset, *, meta: bool = True) -> None:
    """Field-by-field equality; ``meta=False`` for formats that do not carry it."""
    assert (a.train_texts, a.test_texts, a.label_texts) == (b.train_texts, b.test_texts, b.label_texts)
    assert (a.train_ids, a.test_ids, a.label_ids) == (b.train_ids, b.test_ids, b.label_ids)
    assert_same_matrix(a.y_train, b.y_train)
    assert_same_matrix(a.y_test, b.y_test)
    np.testing.assert_array_equal(a.filter_pairs, b.filter_pairs)
    np.testing.assert_array_equal(a.train_filter_pairs, b.train_filter_pairs)
    np.testing.assert_array_equal(a.test_novel, b.test_novel)
    np.testing.assert_array_equal(a.label_novel, b.label_novel)
    assert a.label_attributes == b.label_attributes
    assert list(a.anchor_sets) == list(b.anchor_sets)
    for name in a.anchor_sets:
        assert_same_anchor_set(a.anchor_sets[name], b.anchor_sets[name])
    if meta:
        assert a.name == b.name
        assert a.meta == b.meta


def small_dataset() -> XCDataset:
    """Every optional part set, with values that would expose a lossy write (novel flags overridden)."""
    y_train = sp.csr_matrix(np.array([[1, 0, 0, 0.5], [0, 2.5, 0, 0], [0, 0, 0, 0]], dtype=np.float32))
    y_test = sp.csr_matrix(np.array([[0, 0, 1, 0], [1, 1, 0, 0]], dtype=np.float32))
    links = AnchorSet("links", ["alpha", "beta γ"], doc_edges=np.array([[0, 1], [2, 0]]),
                      label_edges=np.array([[3, 1]]), doc_proxy=np.array([False, True]))
    empty = AnchorSet("empty", [], doc_edges=np.empty((0, 2)), label_edges=np.empty((0, 2)))
    return XCDataset(
        name="tiny", train_texts=["red shoes", "Édouard Manet", ""], test_texts=["blue -> shoes", "red shoes"],
        label_texts=["a", "b", "c", "d"], y_train=y_train, y_test=y_test,
        train_ids=["t0", "t1", "t2"], test_ids=["q0", "q1"], label_ids=["L0", "L1", "L2", "L3"],
        anchor_sets={"links": links, "empty": empty}, filter_pairs=np.array([[0, 2], [1, 0]]),
        train_filter_pairs=np.array([[1, 3]]), test_novel=np.array([True, True]),
        label_novel=np.array([False, False, True, True]),
        test_decile=np.array([0, 9]), meta={"protocol": "unit", "psp_A": 0.5, "psp_B": 0.4, "seed": 3},
    )


def test_save_then_load_returns_every_field_unchanged(tmp_path: Path) -> None:
    original = small_dataset()
    loaded = XCDataset.load(original.save(tmp_path / "tiny"))
    assert_same_dataset(original, loaded)
    np.testing.assert_array_equal(loaded.test_decile, [0, 9])
    assert loaded.anchor_sets["links"].doc_proxy.tolist() == [False, True]


def test_save_replaces_an_existing_data_set_without_leftover_anchor_sets(tmp_path: Path) -> None:
    first = small_dataset()
    first.save(tmp_path / "ds")
    second = small_dataset()
    second.anchor_sets = {}
    loaded = XCDataset.load(second.save(tmp_path / "ds"))
    assert loaded.anchor_sets == {}
    assert not (tmp_path / "ds" / "anchors").exists()


def test_label_novel_defaults_to_labels_without_a_train_positive() -> None:
    d = small_dataset()
    rebuilt = XCDataset(name="x", train_texts=d.train_texts, test_texts=d.test_texts, label_texts=d.label_texts,
                        y_train=d.y_train, y_test=d.y_test)
    assert rebuilt.label_novel.tolist() == [False, False, True, False]
    assert rebuilt.test_novel.tolist() == [True, False]


@pytest.mark.parametrize("side,edges", [("doc_edges", [[3, 0]]), ("doc_edges", [[0, 2]]),
                                        ("label_edges", [[4, 0]]), ("label_edges", [[0, -1]])])
def test_validate_rejects_an_anchor_edge_outside_its_index_space(side: str, edges: list[list[int]]) -> None:
    d = small_dataset()
    setattr(d.anchor_sets["links"], side, np.array(edges, dtype=np.int64))
    with pytest.raises(ValueError, match=f"anchor set 'links' {side}"):
        d.validate()


def test_load_of_a_folder_without_meta_names_the_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no meta.json"):
        XCDataset.load(tmp_path)
