"""Issue #32: brand / location mismatch in the top-k of branded / located queries, the offline view of the A/B
test's bad-match rates. On a simulated home the labels carry the events' brand and location and the evaluation, its
record and the HTML report show the measure; on aol-1000, wikispeedia and an XC folder (no item metadata) nothing
is added and nothing fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.mismatch import HEADLINE_K, mismatch_counts, mismatch_rows, named_values, words
from xc_core.evaluation.record import EvaluationRecord
from xc_core.paths import anchors_dir, dataset_dir, eval_dir, report_path
from xc_core.stages.evaluate import evaluate_scores
from xc_core.stages.report import build_report

PROFILE = "tiny"


def _overlap_scores(queries: list[str], labels: list[str]) -> sp.csr_matrix:
    """A real, brand-blind ranking: shared words / the label's words (what a lexical matcher scores)."""
    vocab: dict[str, int] = {}

    def incidence(texts: list[str]) -> sp.csr_matrix:
        rows, cols = [], []
        for i, text in enumerate(texts):
            for word in set(words(text)):
                rows.append(i)
                cols.append(vocab.setdefault(word, len(vocab)))
        return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(texts), 10_000))

    q, lab = incidence(queries), incidence(labels)
    shared = (q @ lab.T).tocsr()
    sizes = np.maximum(np.asarray(lab.sum(axis=1)).ravel(), 1)
    return sp.csr_matrix(shared.multiply(1.0 / sizes[None, :]))


def _evaluate(data: XCDataset, home: Path, method: str, scores: sp.spmatrix) -> EvaluationRecord:
    folder = eval_dir(home, data.name, method, PROFILE)
    evaluate_scores(data, scores, folder, {"method": method, "profile": PROFILE})
    record = EvaluationRecord.load(folder)
    assert record is not None
    return record


# -- the rule and the counts on hand-made inputs --------------------------------------------------------------------
def test_a_query_names_a_value_only_as_whole_words_in_order() -> None:
    found = named_values(["pacer running shoes", "pacers", "San-Diego plumber", "diego san", "pacer san diego"],
                         ["pacer", "san diego", "   "])
    assert found == [[0], [], [1], [], [0, 1]]


def test_rate_is_labels_carrying_another_value_over_ranked_labels_of_the_naming_queries() -> None:
    texts = ["pacer shoes", "shoes", "pacer or stride shoes", "Stride boots"]
    brands = ["pacer", "stride", None, "Nimbus"]  # label 2 is unbranded: never a mismatch
    top = np.array([[1, 0, 2], [1, 3, 0], [1, 3, 0], [0, -1, -1]])
    counts = mismatch_counts(texts, top, brands, "brand", ks=(1, 3))
    assert counts.rows.tolist() == [0, 2, 3]  # "shoes" names no brand
    # query 0: [stride ✗, pacer, none]; query 2 names pacer and stride: [stride, nimbus ✗, pacer]; query 3: [pacer ✗]
    assert counts.bad.tolist() == [[1, 1], [0, 1], [1, 1]]
    assert counts.ranked.tolist() == [[1, 3], [1, 3], [1, 1]]  # padding is not a ranked label
    assert counts.rate(1) == pytest.approx(2 / 3) and counts.rate(3) == pytest.approx(3 / 7)


def test_no_naming_query_gives_no_rate_and_the_report_rows_say_so() -> None:
    counts = mismatch_counts(["shoes"], np.array([[0]]), ["pacer"], "brand")
    assert len(counts.rows) == 0 and counts.rate(5) is None
    rows = mismatch_rows({"m": {"brand": {"queries": 0, "rate@5": None}}})
    assert rows == [{"method": "m", "attribute": "brand", "queries": 0, "mismatch@5 (%)": "–"}]


# -- a simulated home: labels carry brand and location ---------------------------------------------------------------
def test_simulated_labels_carry_the_events_brand_and_location_and_the_rule_finds_the_branded_queries(
        tiny_home: Path) -> None:
    """Measured against the world's hidden attributes (never used by the rule): the events' brand / location per
    label are the keyword's, and a test query the rule calls branded names the brand the world gave it."""
    from xc_core.stages.abtest import ground_truth

    data = XCDataset.load(anchors_dir(tiny_home, "synthetic"))  # through the anchor stage's save and load
    world = ground_truth("synthetic", tiny_home)
    assert world is not None
    assert set(data.label_attributes) == {"brand", "location"}
    keyword_rows = world.keyword_indices(data.label_ids)
    for attribute in ("brand", "location"):
        assert data.label_attributes[attribute] == world.keywords[attribute].to_numpy()[keyword_rows].tolist()
        lexicon = sorted({v for v in data.label_attributes[attribute] if v is not None})
        truth = world.queries[attribute].to_numpy()[world.query_indices(data.test_texts)]
        found = named_values(data.test_texts, lexicon)
        named = [(t, [lexicon[i] for i in f]) for t, f in zip(truth, found, strict=True) if f]
        assert named and all([t] == f for t, f in named), "the rule never names a value the query does not carry"
        carried = sum(t is not None for t in truth)
        assert len(named) >= 0.8 * carried, f"{attribute}: the rule finds {len(named)} of {carried} queries"
    validation = data.validation_view(np.arange(0, len(data.train_texts), 2), np.arange(1, len(data.train_texts), 2))
    assert validation.label_attributes == data.label_attributes


def test_counts_match_a_per_query_reference_on_a_real_ranking(tiny_home: Path) -> None:
    from xc_core.evaluation import top_k

    data = XCDataset.load(dataset_dir(tiny_home, "synthetic"))
    top = top_k(_overlap_scores(data.test_texts, data.label_texts), 10)
    for attribute, values in data.label_attributes.items():
        lexicon = {v.lower() for v in values if v is not None}
        counts = mismatch_counts(data.test_texts, top, values, attribute, ks=(1, 5, 10))
        bad, ranked, rows = [], [], []
        for i, text in enumerate(data.test_texts):  # the obvious way: substring search on padded words
            named = {v for v in lexicon if f" {v} " in f" {' '.join(words(text))} "}
            if not named:
                continue
            rows.append(i)
            labels = [j for j in top[i] if j >= 0]
            carried = [values[j] for j in labels]
            bad.append([sum(c is not None and c.lower() not in named for c in carried[:k]) for k in (1, 5, 10)])
            ranked.append([len(labels[:k]) for k in (1, 5, 10)])
        assert counts.rows.tolist() == rows and len(rows) > 0
        assert counts.bad.tolist() == bad and counts.ranked.tolist() == ranked


def test_evaluation_record_and_report_carry_the_mismatch_where_labels_have_item_metadata(
        tiny_home: Path, tmp_path: Path) -> None:
    data = XCDataset.load(dataset_dir(tiny_home, "synthetic"))
    blind = _overlap_scores(data.test_texts, data.label_texts)
    # the same ranking with every label naming another brand than the query moved below the rest
    lexicon = sorted({v for v in data.label_attributes["brand"] if v is not None})
    named = named_values(data.test_texts, lexicon)
    brands = np.array([lexicon.index(v) if v is not None else -1 for v in data.label_attributes["brand"]])
    demoted = blind.tolil()
    for i, found in enumerate(named):
        for j in np.flatnonzero((brands >= 0) & ~np.isin(brands, found) if found else np.zeros(len(brands), bool)):
            if demoted[i, j] != 0:
                demoted[i, j] = demoted[i, j] - 10.0
    records = {m: _evaluate(data, tmp_path, m, s) for m, s in (("pretrained", blind), ("dual_encoder", demoted))}
    rates = {}
    for method, record in records.items():
        entry = record.mismatch()
        assert entry is not None and set(entry) == {"brand", "location"}
        assert entry["brand"]["queries"] == sum(bool(f) for f in named) > 0
        low, high = entry["brand"][f"ci@{HEADLINE_K}"]
        assert low <= entry["brand"][f"rate@{HEADLINE_K}"] <= high
        rates[method] = entry["brand"]["rate@10"]
    assert rates["dual_encoder"] < rates["pretrained"], rates
    build_report(data, PROFILE, tmp_path)
    text = report_path(tmp_path, data.name, PROFILE).read_text()
    assert "Brand / location mismatch" in text and f"mismatch@{HEADLINE_K} (%)" in text


# -- data sets without item metadata: nothing added, nothing fails ---------------------------------------------------
def _assert_absent(data: XCDataset, home: Path) -> None:
    assert data.label_attributes == {}
    record = _evaluate(data, home, "pretrained", sp.csr_matrix(data.y_test))
    assert "mismatch" not in record.summary and record.mismatch() is None
    build_report(data, PROFILE, home)
    assert "Brand / location mismatch" not in report_path(home, data.name, PROFILE).read_text()


def test_nothing_on_aol_1000(aol_slice: Path, tmp_path: Path) -> None:
    from xc_core.datasets.definitions import builtin_definitions
    from xc_core.datasets.events import build_events_dataset
    from xc_core.logs.ingest import Source, ingest
    from xc_core.logs.store import EventStore

    ingest([Source("aol", aol_slice)], tmp_path, progress=False)
    built = build_events_dataset(EventStore(tmp_path), tmp_path / "graphs",
                                 builtin_definitions()["aol-1000"].events_config(None))
    _assert_absent(XCDataset.load(built.save(tmp_path / "aol")), tmp_path)


def test_nothing_on_wikispeedia(tmp_path: Path) -> None:
    from tests.datasets.test_wikispeedia import real_dir
    from xc_core.datasets.wikispeedia import build_wikispeedia

    _assert_absent(build_wikispeedia(real_dir(), seed=0), tmp_path)


def test_nothing_on_an_xc_repository_folder(tmp_path: Path) -> None:
    from tests.datasets.test_xc_repo import plain_folder
    from xc_core.datasets.xc_repo import read_xc_repo

    _assert_absent(read_xc_repo(plain_folder(tmp_path / "xc")), tmp_path)


# -- the container keeps item metadata -------------------------------------------------------------------------------
def test_label_attributes_survive_save_and_load_and_a_folder_without_them_loads_none(tmp_path: Path) -> None:
    from dataclasses import replace

    from tests.datasets.test_container import small_dataset

    plain = small_dataset()
    assert XCDataset.load(plain.save(tmp_path / "plain")).label_attributes == {}
    attributes = {"brand": ["pacer", None, "Stride", None], "location": [None, None, None, "san diego"]}
    loaded = XCDataset.load(replace(plain, label_attributes=attributes).save(tmp_path / "meta"))
    assert loaded.label_attributes == attributes
    assert loaded.summary()["label_attributes"] == {"brand": 2, "location": 1}
    with pytest.raises(ValueError, match="label attribute 'brand' has 1 entries"):
        replace(plain, label_attributes={"brand": ["pacer"]})
    with pytest.raises(ValueError, match="may not be named"):
        replace(plain, label_attributes={"text": [None] * 4})
