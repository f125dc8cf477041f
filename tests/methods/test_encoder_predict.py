"""label_index computes the predictions once; offline_eval reuses them only for the same model and test
split, and never from a corrupt index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.record import fingerprint_test_split
from xc_core.index import IndexError_
from xc_core.methods.encoder.predict import load_or_predict, predict


@pytest.fixture
def encoder_dir(tiny_home: Path) -> Path:
    from xc_core.profiles import encoder_config, get_profile

    return Path(encoder_config(get_profile("tiny"), tiny_home).model_path or "")


def test_saved_predictions_are_reused_for_the_same_model_and_split(tiny_data: XCDataset, encoder_dir: Path,
                                                                  tmp_path: Path) -> None:
    from xc_core.encoders.text import encoder_for

    first = predict(tiny_data, encoder_for(encoder_dir, 16), tmp_path / "idx", "runs:/a/encoder", k=20)
    (tmp_path / "idx" / "label_vectors.npy").unlink()  # not needed for reuse: nothing is encoded again
    again = load_or_predict(tiny_data, encoder_dir, 16, tmp_path / "idx", "runs:/a/encoder", k=10)
    want = first.scores.toarray()
    got = again.scores.toarray()
    # the reused top-10 are the first 10 of the saved top-20, row by row
    for row in range(len(want)):
        assert np.isin(np.flatnonzero(got[row]), np.flatnonzero(want[row])).all()
        assert np.count_nonzero(got[row]) == min(10, np.count_nonzero(want[row]))
    assert again.index_recall_at_10 == first.index_recall_at_10


def test_another_model_or_a_corrupt_index_is_never_reused(tiny_data: XCDataset, encoder_dir: Path,
                                                         tmp_path: Path) -> None:
    import json

    from xc_core.encoders.text import encoder_for

    folder = tmp_path / "idx"
    predict(tiny_data, encoder_for(encoder_dir, 16), folder, "runs:/a/encoder", k=10)
    load_or_predict(tiny_data, encoder_dir, 16, folder, "runs:/b/encoder", k=10)  # another model: predicted anew
    report = json.loads((folder / "index_report.json").read_text())
    assert report["model_uri"] == "runs:/b/encoder" and report["test_split"] == fingerprint_test_split(tiny_data)
    with open(folder / "index.faiss", "ab") as handle:
        handle.write(b"garbage")
    with pytest.raises(IndexError_, match="checksum"):
        load_or_predict(tiny_data, encoder_dir, 16, folder, "runs:/b/encoder", k=10)


def test_a_model_with_the_same_files_copies_its_twins_index_and_another_builds_its_own(
        tiny_data: XCDataset, encoder_dir: Path, tmp_path: Path) -> None:
    """``ramen`` serving the ``dual_encoder`` encoder its graph test fell back to: its label_index copies the twin's
    folder (same rankings, its own model URI in the manifest) instead of encoding everything again; a changed
    encoder file makes it build its own."""
    import json
    import shutil

    from xc_core.index import LabelIndex
    from xc_core.methods.encoder.predict import predict_or_copy

    indexes = tmp_path / "indexes"
    first = predict_or_copy(tiny_data, encoder_dir, 16, indexes / "dual_encoder-tiny", "runs:/a/encoder", k=10)
    copied = predict_or_copy(tiny_data, encoder_dir, 16, indexes / "ramen-tiny", "runs:/b/encoder", k=10)
    report = json.loads((indexes / "ramen-tiny" / "index_report.json").read_text())
    assert report["copied_from"] == "dual_encoder-tiny" and report["model_uri"] == "runs:/b/encoder"
    assert (copied.scores != first.scores).nnz == 0
    assert LabelIndex.load(indexes / "ramen-tiny", expect_model_uri="runs:/b/encoder").count == tiny_data.n_labels

    with open(indexes / "dual_encoder-tiny" / "index.faiss", "ab") as handle:  # a corrupt twin is never copied
        handle.write(b"garbage")
    rebuilt = predict_or_copy(tiny_data, encoder_dir, 16, indexes / "auggt-tiny", "runs:/d/encoder", k=10)
    assert "copied_from" not in json.loads((indexes / "auggt-tiny" / "index_report.json").read_text())
    assert (rebuilt.scores != first.scores).nnz == 0

    changed = tmp_path / "changed"
    shutil.copytree(encoder_dir, changed)
    config = changed / "config.json"
    config.write_text(config.read_text().replace("{", '{"xc_note": "changed", ', 1))
    predict_or_copy(tiny_data, changed, 16, indexes / "other-tiny", "runs:/c/encoder", k=10)
    assert "copied_from" not in json.loads((indexes / "other-tiny" / "index_report.json").read_text())


def test_the_saved_test_ranking_is_exact_and_the_served_index_is_measured_against_it(
        tiny_data: XCDataset, encoder_dir: Path, tmp_path: Path) -> None:
    """The metrics read a brute-force ranking of every label (issue #63), not the HNSW that serves: each test query's
    top-10 is the argsort of its inner products with every label vector; the report says so and holds the served
    index's recall@10 against it."""
    import json

    from xc_core.encoders.text import encoder_for

    encoder = encoder_for(encoder_dir, 16)
    found = predict(tiny_data, encoder, tmp_path / "idx", "runs:/a/encoder", k=10)
    labels = np.load(tmp_path / "idx" / "label_vectors.npy")
    similarity = encoder.encode(tiny_data.test_texts) @ labels.T
    best = np.sort(similarity, axis=1)[:, ::-1][:, :10]
    ranked = np.load(tmp_path / "idx" / "test_top_scores.npy")
    assert np.allclose(ranked, best, atol=1e-5)
    report = json.loads((tmp_path / "idx" / "index_report.json").read_text())
    assert report["ranking"] == "exact" and 0 < report["hnsw_recall@10"] <= 1
    assert found.index_recall_at_10 == report["hnsw_recall@10"]
