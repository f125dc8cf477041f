"""The wikispeedia protocol: back-step resolution, the seeded split, no test leakage, filter pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.datasets.test_container import assert_same_dataset
from xc_core.datasets.container import XCDataset
from xc_core.datasets.wikispeedia import (
    WikispeediaFormatError,
    build_wikispeedia,
    category_text,
    decode_title,
    navigation_pairs,
    read_paths,
    read_tsv,
    split_test_mask,
)
from xc_core.paths import shared_data_dir

HEADER = "# A comment block, as in the release.\n# FORMAT:   columns\n\n"


def real_dir() -> Path:
    path = shared_data_dir() / "wikispeedia"
    if not (path / "paths_unfinished.tsv").exists():
        pytest.fail(f"shared data missing: {path} (see ../shared/data/README.md)")
    return path


@pytest.fixture(scope="module")
def built() -> XCDataset:
    return build_wikispeedia(real_dir(), seed=0)


def reference_pairs(path: str) -> list[tuple[str, str]]:
    """The back-step rule written the obvious way: a history stack, one step at a time."""
    stack: list[str] = []
    pairs = []
    for step in path.split(";"):
        if step == "<":
            stack.pop()
            continue
        if stack:
            pairs.append((stack[-1], step))
        stack.append(step)
    return pairs


def pairs_of(paths: list[str]) -> list[tuple[str, str]]:
    frame = navigation_pairs(pl.DataFrame({"path": paths}))
    return list(zip(frame.get_column("source").to_list(), frame.get_column("target").to_list(), strict=True))


def write_tiny(folder: Path, paths: list[str]) -> Path:
    """A complete Wikispeedia-format folder over articles A..F, comment headers included."""
    folder.mkdir()
    (folder / "articles.tsv").write_text(HEADER + "".join(f"{a}\n" for a in "ABCDEF"))
    (folder / "links.tsv").write_text(HEADER + "A\tB\nA\tC\nB\tC\nC\tA\nD\tE\nE\tF\nF\tA\n")
    categories = "".join(f"{a}\tsubject.Science.Biology.Animals\n" for a in "ABCDEF")
    (folder / "categories.tsv").write_text(HEADER + categories)
    rows = "".join(f"ip\t1\t2\t{p}\tZ\ttimeout\n" for p in paths)
    (folder / "paths_unfinished.tsv").write_text(HEADER + rows)
    return folder


# -- back-steps ---------------------------------------------------------------------------------
def test_back_step_returns_to_previous_article_so_next_move_departs_from_it() -> None:
    assert pairs_of(["A;B;<;C"]) == [("A", "B"), ("A", "C")]


def test_consecutive_back_steps_pop_the_history_stack_twice() -> None:
    assert pairs_of(["A;B;C;<;<;D;E;<;F"]) == [("A", "B"), ("B", "C"), ("A", "D"), ("D", "E"), ("D", "F")]


def test_paths_do_not_chain_into_each_other() -> None:
    assert pairs_of(["A;B", "C;D"]) == [("A", "B"), ("C", "D")]


@st.composite
def paths_with_back_steps(draw: st.DrawFn) -> str:
    steps, depth = [], 0
    for _ in range(draw(st.integers(1, 25))):
        if depth > 1 and draw(st.booleans()):
            steps.append("<")
            depth -= 1
        else:
            steps.append(draw(st.sampled_from("ABCDEFG")))
            depth += 1
    return ";".join(steps)


@settings(max_examples=150, deadline=None)
@given(st.lists(paths_with_back_steps(), min_size=1, max_size=6))
def test_vectorised_back_step_resolution_matches_a_history_stack(paths: list[str]) -> None:
    assert pairs_of(paths) == [p for path in paths for p in reference_pairs(path)]


def test_back_step_with_nothing_to_return_to_names_the_file_line() -> None:
    paths = pl.DataFrame({"line": [17, 18], "path": ["A;B", "A;<;C"]})
    with pytest.raises(WikispeediaFormatError, match=r"paths:18: back-step '<' at step 2"):
        navigation_pairs(paths)


def test_tiny_fixture_builds_labels_from_resolved_moves_only(tmp_path: Path) -> None:
    data = build_wikispeedia(write_tiny(tmp_path / "w", ["A;B;<;C", "D;E;<;F;F"]), seed=0, test_fraction=0.5)
    ids = data.train_ids + data.test_ids
    y = [data.y_train, data.y_test]
    moves = {(ids[i], data.label_ids[j]) for part, offset in ((0, 0), (1, len(data.train_ids)))
             for i, j in zip(*(y[part].nonzero()[0] + offset, y[part].nonzero()[1]), strict=True)}
    assert moves == {("A", "B"), ("A", "C"), ("D", "E"), ("D", "F")}  # never B→C, E→F, nor the F→F self-loop
    assert sorted(ids) == ["A", "D"] and data.label_ids == ["B", "C", "E", "F"]


# -- reading -----------------------------------------------------------------------------------
def test_comment_and_blank_lines_are_skipped_but_line_numbers_kept(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path / "w", ["A;B", "C;D"])
    frame = read_paths(folder / "paths_unfinished.tsv")
    assert frame.get_column("line").to_list() == [4, 5]


def test_a_row_with_missing_fields_names_file_line_and_expected_columns(tmp_path: Path) -> None:
    path = tmp_path / "links.tsv"
    path.write_text(HEADER + "A\tB\nA C\n")
    with pytest.raises(WikispeediaFormatError, match=r"links.tsv:5: 1 tab-separated fields, expected 2 \(source"):
        read_tsv(path, ("source", "target"))


def test_titles_are_url_decoded_with_underscores_as_spaces() -> None:
    assert decode_title("%C3%89douard_Manet") == "Édouard Manet"
    assert decode_title("Stock_car_%28rail%29") == "Stock car (rail)"


def test_category_text_is_the_last_two_parts_below_the_root_with_spaces() -> None:
    assert category_text("subject.Science.Biology.Animals") == "Biology Animals"
    assert category_text("subject.People.Historical_figures") == "People Historical figures"
    assert category_text("subject.Countries") == "Countries"


# -- split -------------------------------------------------------------------------------------
def test_split_draws_the_requested_fraction_and_depends_on_the_seed() -> None:
    a, b = split_test_mask(1000, 0, 0.2), split_test_mask(1000, 1, 0.2)
    assert a.sum() == b.sum() == 200
    assert np.array_equal(a, split_test_mask(1000, 0, 0.2)) and not np.array_equal(a, b)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 0.0001])
def test_split_rejects_a_fraction_that_leaves_a_side_empty(fraction: float) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        split_test_mask(100, 0, fraction)


# -- the real data -----------------------------------------------------------------------------
def test_real_build_is_deterministic_for_a_seed(built: XCDataset) -> None:
    assert_same_dataset(built, build_wikispeedia(real_dir(), seed=0))


def test_real_build_with_another_seed_splits_differently_over_the_same_documents(built: XCDataset) -> None:
    other = build_wikispeedia(real_dir(), seed=1)
    assert set(other.test_ids) != set(built.test_ids)
    assert set(other.train_ids + other.test_ids) == set(built.train_ids + built.test_ids)
    assert other.label_ids == built.label_ids
    assert other.meta["seed"] == 1 and built.meta["seed"] == 0


def test_real_split_is_80_20_of_documents_with_labels(built: XCDataset) -> None:
    n = len(built.train_ids) + len(built.test_ids)
    assert len(built.test_ids) == round(0.2 * n)
    assert not set(built.train_ids) & set(built.test_ids)
    assert (np.diff(built.y_train.indptr) > 0).all() and (np.diff(built.y_test.indptr) > 0).all()


def test_real_labels_equal_the_back_step_resolved_moves_of_the_paths_file(built: XCDataset) -> None:
    paths = read_paths(real_dir() / "paths_unfinished.tsv").get_column("path").to_list()
    articles = set(read_tsv(real_dir() / "articles.tsv", ("article",)).get_column("article").to_list())
    expected = {(s, t) for p in paths for s, t in reference_pairs(p) if s != t and {s, t} <= articles}
    found = set()
    for ids, y in ((built.train_ids, built.y_train), (built.test_ids, built.y_test)):
        rows, cols = y.nonzero()
        found |= {(ids[r], built.label_ids[c]) for r, c in zip(rows, cols, strict=True)}
    assert found == expected


def test_no_test_document_is_a_node_of_any_anchor_set(built: XCDataset) -> None:
    test_ids, test_titles = set(built.test_ids), set(built.test_texts)
    test_label_rows = [i for i, lid in enumerate(built.label_ids) if lid in test_ids]
    assert test_label_rows, "some test articles are labels: the check below must have something to check"
    for anchor_set in built.anchor_sets.values():
        assert anchor_set.doc_edges[:, 0].max() < len(built.train_ids)
        assert not np.isin(anchor_set.label_edges[:, 0], test_label_rows).any()
        assert not set(anchor_set.texts) & test_titles
    links = built.anchor_sets["links"]
    train_docs_linking = {built.train_ids[d] for d in np.unique(links.doc_edges[:, 0])}
    assert not train_docs_linking & test_ids


def test_real_anchor_edges_are_the_files_edges_between_train_articles(built: XCDataset) -> None:
    links = read_tsv(real_dir() / "links.tsv", ("source", "target"))
    allowed = {(s, t) for s, t in links.select("source", "target").iter_rows()}
    names = read_tsv(real_dir() / "articles.tsv", ("article",)).get_column("article").to_list()
    title_to_id = {decode_title(a): a for a in names}
    anchor_ids = [title_to_id[t] for t in built.anchor_sets["links"].texts]
    doc_edges = {(built.train_ids[d], anchor_ids[a]) for d, a in built.anchor_sets["links"].doc_edges}
    label_edges = {(built.label_ids[j], anchor_ids[a]) for j, a in built.anchor_sets["links"].label_edges}
    assert doc_edges and doc_edges <= allowed
    assert label_edges and label_edges <= allowed
    assert not {t for _, t in doc_edges | label_edges} & set(built.test_ids)


def test_real_category_anchor_texts_follow_the_rule(built: XCDataset) -> None:
    texts = set(built.anchor_sets["categories"].texts)
    assert {"Biology Mammals", "Countries", "People Historical figures"} <= texts
    assert not any("_" in t or "subject" in t for t in texts)


def test_filter_pairs_hold_each_test_document_whose_own_article_is_a_label(built: XCDataset) -> None:
    label_of = {lid: j for j, lid in enumerate(built.label_ids)}
    expected = {(i, label_of[tid]) for i, tid in enumerate(built.test_ids) if tid in label_of}
    assert expected and {tuple(p) for p in built.filter_pairs.tolist()} == expected


def test_no_document_is_its_own_label(built: XCDataset) -> None:
    for ids, y in ((built.train_ids, built.y_train), (built.test_ids, built.y_test)):
        rows, cols = y.nonzero()
        assert not any(ids[r] == built.label_ids[c] for r, c in zip(rows, cols, strict=True))


def test_meta_records_protocol_psp_constants_and_seed(built: XCDataset) -> None:
    assert built.meta == {"protocol": "wikispeedia", "psp_A": 0.5, "psp_B": 0.4, "seed": 0,
                          "source": "West & Leskovec WWW 2012; West, Pineau & Precup IJCAI 2009"}
    assert built.label_novel.tolist() == (np.asarray(built.y_train.sum(axis=0)).ravel() == 0).tolist()


def test_a_validation_documents_own_article_is_never_scored_as_the_test_filter_removes_a_test_ones(
        built: XCDataset) -> None:
    """Validation rows are training articles: the rule that builds the test filter (a test article's own label)
    gives every training article whose article is a label the same pair, so no validation ranking scores it."""
    label_of = {article: j for j, article in enumerate(built.label_ids)}
    expected_test = {(i, label_of[a]) for i, a in enumerate(built.test_ids) if a in label_of}
    assert {tuple(p) for p in built.filter_pairs.tolist()} == expected_test and expected_test
    rows = np.arange(0, len(built.train_texts), 7)  # any validation rows
    own = {tuple(p) for p in built.own_label_pairs(rows).tolist()}
    expected = {(r, label_of[built.train_ids[i]]) for r, i in enumerate(rows) if built.train_ids[i] in label_of}
    assert own == expected and expected
