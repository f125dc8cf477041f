"""The classifier stage on a titles-are-labels XC folder (LF-style, with a train filter) of ~2,000 training
documents built from real public titles and links (Wikispeedia, ../shared/data): the out-of-fold decision serves a
fusion that gains clearly, and serves the encoder alone when the training labels carry no signal."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.paths import shared_data_dir


def _rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]


def linked_titles_folder(folder: Path, n_labels: int = 1200, n_train: int = 2000, n_test: int = 500,
                         seed: int = 0) -> Path:
    """Labels: ``n_labels`` articles among the most linked-to; documents: articles linking to at least one label
    (a label's own article among them, as in LF sets: its own label is a filter pair, never a positive); a
    document's positives are the labels it links to. Ids are not shared, so only the filter files say which label
    is a document's own."""
    source = shared_data_dir() / "wikispeedia"
    if not source.is_dir():
        pytest.fail(f"shared data missing: {source} (see ../shared/data/README.md)")
    title = {a[0]: unquote(a[0]).replace("_", " ") for a in _rows(source / "articles.tsv")}
    links = [(s, t) for s, t in _rows(source / "links.tsv") if s != t]
    indegree: dict[str, int] = {}
    for _, target in links:
        indegree[target] = indegree.get(target, 0) + 1
    rng = np.random.default_rng(seed)
    popular = sorted(indegree, key=lambda a: (-indegree[a], a))[: 2 * n_labels]
    labels = sorted(rng.choice(popular, n_labels, replace=False).tolist())
    column = {a: j for j, a in enumerate(labels)}
    positives: dict[str, set[int]] = {}
    for source_article, target in links:
        if target in column:
            positives.setdefault(source_article, set()).add(column[target])
    documents = sorted(positives)
    chosen = rng.permutation(documents)[: n_train + n_test]
    folder.mkdir(parents=True)
    (folder / "Y.txt").write_text("".join(f"L{j}->{title[a]}\n" for j, a in enumerate(labels)))
    for split, part in (("trn", chosen[:n_train]), ("tst", chosen[n_train:])):
        (folder / f"{split}_X.txt").write_text("".join(f"{split}{i}->{title[a]}\n" for i, a in enumerate(part)))
        body = "".join(" ".join(f"{j}:1" for j in sorted(positives[a])) + "\n" for a in part)
        (folder / f"{split}_X_Y.txt").write_text(f"{len(part)} {n_labels}\n{body}")
        name = "filter_labels_test.txt" if split == "tst" else "filter_labels_train.txt"
        (folder / name).write_text("".join(f"{i} {column[a]}\n" for i, a in enumerate(part) if a in column))
    return folder


@pytest.fixture(scope="module")
def linked_titles(tmp_path_factory: pytest.TempPathFactory) -> XCDataset:
    from xc_core.datasets.xc_repo import read_xc_repo

    return read_xc_repo(linked_titles_folder(tmp_path_factory.mktemp("folder") / "LF-LinkedTitles"),
                        psp_A=0.5, psp_B=0.4)


def _stage(data: XCDataset, home: Path, out: Path) -> dict:
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig
    from xc_core.classifier.stage import fit_classifier_stage
    from xc_core.profiles import encoder_config, get_profile

    encoder = Path(encoder_config(get_profile("tiny"), home).model_path or "")
    # test-sized refits, and a test-sized grid: every channel's weights still span off, a small and a large weight
    # (the selection's rules, not its resolution, are under test; the default grid is ~40× as many fusions)
    cfg = ClassifierConfig(folds=4, epochs=2, random_negatives=1024, alphas=(0.0, 0.25, 0.5, 0.75, 1.0),
                           untrained_offsets=(-0.1, 0.0, 0.1), linear_weights=(0.0, 0.2, 0.8, 3.2),
                           memory_weights=(0.0, 1.6), popularity_weights=(0.0, 0.1), name_weights=(0.0, 0.4),
                           tail_offsets=(0.0, 0.1), lexical=LexicalConfig(weights=(0.0, 0.1, 0.3)))
    fused = fit_classifier_stage(data, encoder, 16, cfg, out)
    return {"fused": fused, **fused.info["fallback_tests"]["fusion"]}


def test_a_fusion_that_gains_out_of_fold_is_served_with_its_power_printed(linked_titles: XCDataset,
                                                                         tiny_home: Path, tmp_path: Path) -> None:
    data = linked_titles
    assert len(data.train_texts) == 2000 and len(data.train_filter_pairs) > 100  # LF-style: titles are labels
    test = _stage(data, tiny_home, tmp_path / "clf")
    assert test["kept"] and test["gain"] >= 0.05 and test["low"] > 0, test["reason"]
    assert test["tested_on_rows"] == 2000 and test["folds"] == 4 and 0 < test["detectable"]["P@1"] < 0.05
    assert test["fused"].info["fold_kind"] == "documents"
    assert test["fused"].fusion.changed() != {"alpha": 1.0}, "the fusion is what is served"
    # the hybrid channel (XR-Linear on TF-IDF ⊕ the vectors) is what gains here: the tiny random encoder's vectors
    # say little, the titles' words a lot; out of fold it beats every fusion without it, and is served
    curve = test["fused"].info["alpha_curve"]
    best = {hybrid: max(r["P@1"] for r in curve if (r["linear_weight"] > 0) == hybrid) for hybrid in (False, True)}
    assert best[True] > best[False] + 0.05, best
    assert test["fused"].weight("hybrid") > 0 and test["fused"].active("hybrid") is not None
    assert test["served"]["linear_weight"] == test["fused"].weight("hybrid")
    # that the folds refit two at a time give the grid of one at a time: tests/classifier/test_folds.py


def test_training_labels_without_signal_leave_the_encoder_alone(linked_titles: XCDataset, tiny_home: Path,
                                                                tmp_path: Path) -> None:
    """The same folder with each training document's labels drawn uniformly (as many as it had): W and the lexical
    channel learn what no held-out document confirms, and the encoder alone is served. (Labels permuted across
    documents would not do: they keep each label's popularity, a real signal the fusion rightly serves, +7 P@1.)"""
    data = linked_titles
    y = sp.csr_matrix(data.y_train)
    rng = np.random.default_rng(1)
    counts = np.diff(y.indptr)
    rows = np.repeat(np.arange(y.shape[0]), counts)
    cols = np.concatenate([rng.choice(y.shape[1], c, replace=False) for c in counts])
    noise = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=y.shape)
    shuffled = dataclasses.replace(data, y_train=noise, train_filter_pairs=np.empty((0, 2), np.int64))
    test = _stage(shuffled, tiny_home, tmp_path / "noise")
    assert not test["kept"] and test["low"] <= 0, test["reason"]
    fused = test["fused"]
    assert fused.fusion.changed() == {"alpha": 1.0} and not fused.channels
