"""XC-repository raw-text format: exact round trips and errors that point at the file and line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.datasets.test_container import assert_same_dataset, assert_same_matrix, small_dataset
from xc_core.datasets.container import XCDataset
from xc_core.datasets.xc_repo import (
    XCRepoFormatError,
    read_label_matrix,
    read_xc_repo,
    write_label_matrix,
    write_xc_repo,
)


def write_folder(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def plain_folder(folder: Path, **overrides: str) -> Path:
    """Two train, one test document, three labels; plain text lines, as the oldest releases ship."""
    files = {"trn_X.txt": "red shoes\nblue -> hat\n", "tst_X.txt": "green\n", "Y.txt": "a\nb\nc\n",
             "trn_X_Y.txt": "2 3\n0:1.0 2:1.0\n\n", "tst_X_Y.txt": "1 3\n1:1\n"}
    return write_folder(folder, {**files, **overrides})


# -- round trips -------------------------------------------------------------------------------
def test_write_then_read_returns_texts_ids_matrices_filters_and_anchor_sets_exactly(tmp_path: Path) -> None:
    # the format carries no novelty flags: they come back recomputed, so start from the recomputed ones
    # None asks __post_init__ to recompute them
    original = replace(small_dataset(), test_novel=None, label_novel=None, test_decile=None)  # type: ignore[arg-type]
    write_xc_repo(original, tmp_path / "tiny")
    back = read_xc_repo(tmp_path / "tiny", name="tiny", psp_A=0.5, psp_B=0.4)
    assert_same_dataset(original, back, meta=False)
    assert back.test_texts[0] == "blue -> shoes"
    assert back.meta["psp_A"] == 0.5 and back.meta["psp_B"] == 0.4


def test_round_trip_keeps_texts_with_arrows_unicode_and_edge_whitespace(tmp_path: Path) -> None:
    texts = [" lead", "trail ", "a->b", "", "tab\there", "ünïcode \u2028 sep", "%20"]
    y = sp.csr_matrix((len(texts), 1), dtype=np.float32)
    data = XCDataset(name="w", train_texts=texts, test_texts=texts, label_texts=["x"], y_train=y, y_test=y)
    write_xc_repo(data, tmp_path / "w")
    assert_same_dataset(data, read_xc_repo(tmp_path / "w"), meta=False)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.data())
def test_label_matrix_round_trip_is_exact_for_any_float32_values(tmp_path_factory: pytest.TempPathFactory,
                                                                 rows: int, cols: int, data: st.DataObject) -> None:
    values = data.draw(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False)
                                .filter(lambda v: v != 0), min_size=rows * cols, max_size=rows * cols))
    mask = data.draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols))
    dense = np.where(np.array(mask).reshape(rows, cols), np.array(values, np.float32).reshape(rows, cols), 0)
    matrix = sp.csr_matrix(dense.astype(np.float32))
    path = tmp_path_factory.mktemp("m") / "trn_X_Y.txt"
    write_label_matrix(matrix, path)
    back = read_label_matrix(path, rows, cols)
    assert_same_matrix(matrix, back)
    np.testing.assert_array_equal(back.toarray(), matrix.toarray())


def test_real_wikispeedia_survives_a_round_trip_through_the_format(tmp_path: Path) -> None:
    from xc_core.datasets.wikispeedia import build_wikispeedia
    from xc_core.paths import shared_data_dir

    source = shared_data_dir() / "wikispeedia"
    if not source.exists():
        pytest.fail(f"shared data missing: {source} (see ../shared/data/README.md)")
    original = build_wikispeedia(source, seed=0)
    write_xc_repo(original, tmp_path / "wiki")
    # the format has no test-document edges: everything else comes back
    no_test_edges = np.empty((0, 2), np.int64)
    expected = replace(original, anchor_sets={n: replace(a, test_edges=no_test_edges)
                                              for n, a in original.anchor_sets.items()})
    assert_same_dataset(expected, read_xc_repo(tmp_path / "wiki"), meta=False)


# -- reading the releases' variants -------------------------------------------------------------
def test_plain_text_lines_parse_with_default_ids(tmp_path: Path) -> None:
    data = read_xc_repo(plain_folder(tmp_path / "p"))
    assert data.train_texts == ["red shoes", "blue -> hat"]  # an arrow on one line only is text
    assert data.train_ids == ["trn0", "trn1"] and data.label_ids == ["lbl0", "lbl1", "lbl2"]
    assert data.y_train.toarray().tolist() == [[1, 0, 1], [0, 0, 0]]
    own = data.meta.pop("own_label_pairs")
    assert data.meta == {"protocol": "xc-repo", "psp_A": 0.55, "psp_B": 1.5, "source": str(tmp_path / "p")}
    assert own["train"]["pairs"] == own["test"]["pairs"] == 0 and "no filter file" in own["train"]["source"]
    assert data.name == "p" and data.anchor_sets == {} and data.filter_pairs.shape == (0, 2)


def test_id_arrow_text_lines_parse_into_ids_and_texts(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "i", **{"trn_X.txt": "B00X->red shoes\n7->a -> b\n", "tst_X.txt": "q->\n"})
    data = read_xc_repo(folder)
    assert data.train_ids == ["B00X", "7"] and data.train_texts == ["red shoes", "a -> b"]
    assert data.test_ids == ["q"] and data.test_texts == [""]


def test_label_texts_are_read_from_lbl_x_when_y_txt_is_absent(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "l")
    (folder / "Y.txt").rename(folder / "lbl_X.txt")
    (folder / "lbl_X.txt").write_text("L1->a\nL2->b\nL3->c\n")
    data = read_xc_repo(folder)
    assert data.label_ids == ["L1", "L2", "L3"] and data.label_texts == ["a", "b", "c"]


def test_both_filters_are_read_and_the_train_filter_is_what_validation_drops(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "f", **{"filter_labels_test.txt": "0 2\n\n0 1\n",
                                             "filter_labels_train.txt": "1 1\n"})
    data = read_xc_repo(folder)
    assert data.filter_pairs.tolist() == [[0, 2], [0, 1]] and data.train_filter_pairs.tolist() == [[1, 1]]
    assert data.own_label_pairs(np.array([1])).tolist() == [[0, 1]]  # validation row 0 is train document 1
    assert data.own_label_pairs(np.array([0])).tolist() == []
    assert data.meta["own_label_pairs"]["train"] == {"pairs": 1, "documents": 1, "source": "filter_labels_train.txt"}


def test_out_of_range_train_filter_pair_names_file_and_line(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "f", **{"filter_labels_train.txt": "0 1\n99 99\n"})
    with pytest.raises(XCRepoFormatError, match=r"filter_labels_train.txt:2: doc in '99 99'"):
        read_xc_repo(folder)


def test_without_filter_files_own_labels_are_found_by_normalised_text(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    # train 0 is label 1's title up to case and spaces (an own label); train 1 is label 0's title but label 0 is
    # its positive, so it stays scored; test 0 is label 2's title
    folder = plain_folder(tmp_path / "t", **{"trn_X.txt": "Blue  Hat\nred shoes\nnothing\n",
                                             "Y.txt": "red shoes\nblue hat\ngreen\n", "tst_X.txt": "GREEN\n",
                                             "trn_X_Y.txt": "3 3\n0:1\n0:1\n2:1\n"})
    with caplog.at_level("WARNING"):
        data = read_xc_repo(folder)
    assert data.train_filter_pairs.tolist() == [[0, 1]] and data.filter_pairs.tolist() == [[0, 2]]
    assert "33% of training documents have a label with the same text" in caplog.text
    assert data.summary()["filter_pairs"] == {"test": 1, "validation": 1}


def test_crlf_line_endings_are_tolerated(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "c", **{"trn_X.txt": "red shoes\r\nblue\r\n", "trn_X_Y.txt": "2 3\r\n0:1\r\n\r\n"})
    data = read_xc_repo(folder)
    assert data.train_texts == ["red shoes", "blue"] and data.y_train.nnz == 1


# -- errors ------------------------------------------------------------------------------------
def test_header_row_count_not_matching_the_lines_names_file_and_line_1(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "h", **{"trn_X_Y.txt": "3 3\n0:1\n1:1\n"})
    with pytest.raises(XCRepoFormatError, match=r"trn_X_Y.txt:1: header gives 3 rows, the data set has 2"):
        read_xc_repo(folder)


def test_header_row_count_not_matching_the_label_lines_names_the_file(tmp_path: Path) -> None:
    path = write_folder(tmp_path / "m", {"trn_X_Y.txt": "3 3\n0:1\n1:1\n"}) / "trn_X_Y.txt"
    with pytest.raises(XCRepoFormatError, match=r"trn_X_Y.txt:1: header says 3 rows but 2 lines follow"):
        read_label_matrix(path)


def test_header_label_count_not_matching_label_texts_is_an_error(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "h", **{"tst_X_Y.txt": "1 4\n1:1\n"})
    with pytest.raises(XCRepoFormatError, match=r"tst_X_Y.txt:1: header gives 4 columns, the data set has 3"):
        read_xc_repo(folder)


def test_malformed_header_is_an_error_naming_the_expected_form(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "h", **{"trn_X_Y.txt": "0:1\n1:1\n"})
    with pytest.raises(XCRepoFormatError, match=r"trn_X_Y.txt:1: header '0:1' is not 'N L'"):
        read_xc_repo(folder)


def test_out_of_range_label_names_file_and_line(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "r", **{"trn_X_Y.txt": "2 3\n0:1\n1:1 3:1.0\n"})
    with pytest.raises(XCRepoFormatError, match=r"trn_X_Y.txt:3: label index in '3:1.0' outside 0..2"):
        read_xc_repo(folder)


@pytest.mark.parametrize("token", ["x:1", "1", "1:", "1:1:1", "-1:1", "1.5:1"])
def test_malformed_label_token_names_file_line_and_token(tmp_path: Path, token: str) -> None:
    folder = plain_folder(tmp_path / "t", **{"trn_X_Y.txt": f"2 3\n0:1\n{token}\n"})
    with pytest.raises(XCRepoFormatError, match=r"trn_X_Y.txt:3: .*label"):
        read_xc_repo(folder)


def test_duplicate_label_on_a_line_is_an_error_not_a_silent_sum(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "d", **{"trn_X_Y.txt": "2 3\n0:1 0:1\n\n"})
    with pytest.raises(XCRepoFormatError, match=r"trn_X_Y.txt:2: label in '0:1' appears twice"):
        read_xc_repo(folder)


def test_out_of_range_filter_pair_names_file_and_line(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "f", **{"filter_labels_test.txt": "0 1\n1 0\n"})
    with pytest.raises(XCRepoFormatError, match=r"filter_labels_test.txt:2: doc in '1 0' is not an integer in 0..0"):
        read_xc_repo(folder)


def test_missing_label_texts_name_both_accepted_files(tmp_path: Path) -> None:
    folder = plain_folder(tmp_path / "n")
    (folder / "Y.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"Y.txt or lbl_X.txt"):
        read_xc_repo(folder)


def test_write_refuses_to_replace_a_folder_that_is_not_an_xc_repo_folder(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not an XC-repository folder"):
        write_xc_repo(small_dataset(), tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_write_rejects_a_text_with_a_line_break_naming_the_line(tmp_path: Path) -> None:
    y = sp.csr_matrix((2, 1), dtype=np.float32)
    data = XCDataset(name="b", train_texts=["ok", "two\nlines"], test_texts=["a", "b"], label_texts=["x"],
                     y_train=y, y_test=y)
    with pytest.raises(XCRepoFormatError, match=r"trn_X.txt:2: text 'two\\nlines' contains a line break"):
        write_xc_repo(data, tmp_path / "b")
