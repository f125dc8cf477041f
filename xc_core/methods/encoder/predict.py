"""How the dual-encoder methods score: a label index under the trained encoder (and, with a classifier stage,
one over its label vectors), the test queries searched, the sparse score matrix and the index measured."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.classifier.fusion import CLASSIFIER_INDEX, LABEL_VECTORS
from xc_core.datasets.container import XCDataset
from xc_core.encoders.text import TextEncoder, encoder_for
from xc_core.evaluation.metrics import to_csr
from xc_core.evaluation.record import fingerprint_test_split
from xc_core.index import (
    RANKING,
    RECALL_SAMPLE,
    ExactRanking,
    IndexConfig,
    IndexError_,
    LabelIndex,
    RankRows,
    rank_exactly,
    search_exactly,
)
from xc_core.methods.base import Predictions


def predict(dataset: XCDataset, encoder: TextEncoder, index_dir: Path, model_uri: str, k: int = 100,
            cfg: IndexConfig | None = None, progress: bool = False, classifier_dir: Path | None = None,
            inputs_key: str = "") -> Predictions:
    """Index every label with the encoder, rank the test documents exactly, and measure the index against that.

    The index, its report and the test queries' top-k are saved in ``index_dir`` (``label_index``), so the
    evaluation reuses them (:func:`load_or_predict`) instead of encoding everything a second time. With a
    classifier stage (``classifier_dir``) its vectors get their own index (``index_dir/classifier``) and the
    test queries go through the fused search. The saved ranking is exact (flat indexes); the ANN indexes are what
    ``xc predict`` serves, and their recall@10 against it is reported (``hnsw_recall@10``). ``inputs_key``
    (:func:`inputs_key`) is recorded in the report, so a later model with the same files may copy the folder."""
    fused = _load_classifier(classifier_dir)
    labels = _label_vectors(dataset, encoder, classifier_dir, progress)
    started = time.perf_counter()
    queries = encoder.encode(dataset.test_texts, progress=progress, desc="test queries")
    encode_ms = 1000 * (time.perf_counter() - started) / max(len(dataset.test_texts), 1)
    index = LabelIndex.build(labels, None, cfg or IndexConfig(kind="hnsw"), model_uri=model_uri, dataset=dataset.name)
    index.save(index_dir)
    np.save(index_dir / LABEL_VECTORS, labels)
    if fused is None:
        ranking = search_exactly(index, labels, queries, k)
    else:
        clf_index = LabelIndex.build(fused.weights, None, cfg or IndexConfig(kind="hnsw"), model_uri=model_uri,
                                     dataset=dataset.name)
        clf_index.save(index_dir / CLASSIFIER_INDEX)
        ranking = _fused_ranking(dataset, queries, labels, fused, index, clf_index, index_dir, k)
    scores, ids, recall = ranking.scores, ranking.ids, ranking.ann_recall_at_10
    ann_ms, exact_ms = ranking.ann_ms_per_query, ranking.exact_ms_per_query
    np.save(index_dir / "test_top_ids.npy", ids)
    np.save(index_dir / "test_top_scores.npy", scores)
    split = fingerprint_test_split(dataset)
    steps = {"encoder": encode_ms, "search": ann_ms}  # batched encoding of every test query, then the search
    (index_dir / "index_report.json").write_text(json.dumps(
        {"hnsw_recall@10": recall, "ms_per_query": ann_ms, "exact_ms_per_query": exact_ms, "ranking": RANKING,
         "queries": len(queries),
         "recall_sample": min(len(queries), RECALL_SAMPLE), "k": k, "model_uri": model_uri, "test_split": split,
         "steps_ms_per_query": steps, **({"inputs_key": inputs_key} if inputs_key else {})}))
    return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, split, model_uri, recall, ann_ms, exact_ms,
                       steps)


def _fused_ranking(dataset: XCDataset, queries: np.ndarray, labels: np.ndarray, fused: Any, index: LabelIndex,
                   clf_index: LabelIndex, index_dir: Path, k: int) -> ExactRanking:
    """The fused search over flat indexes of the label and classifier vectors (exact shortlists, the offline
    ranking) against the same search over the two ANN indexes (what ``xc predict`` serves); the test queries
    under each channel alone saved beside (``tradeoff.py``), ranked exactly too."""
    from xc_core.classifier.fusion import fused_search
    from xc_core.classifier.tradeoff import VARIANTS_FILE

    flat = IndexConfig(kind="flat")
    exact, clf_exact = LabelIndex.build(labels, None, flat), LabelIndex.build(fused.weights, None, flat)
    texts = list(dataset.test_texts)

    def rank(label_index: LabelIndex, classifier_index: LabelIndex) -> RankRows:
        def ranked(rows: slice, depth: int) -> tuple[np.ndarray, np.ndarray]:
            return fused_search(queries[rows], label_index, classifier_index, labels, fused, depth, texts=texts[rows])

        return ranked

    ranking = rank_exactly(rank(exact, clf_exact), rank(index, clf_index), len(queries), k)
    enc_scores, enc_ids = exact.search(queries, k)
    clf_scores, clf_ids = fused_search(queries, exact, clf_exact, labels, fused.classifier_alone(), k)
    variants = {"encoder_ids": enc_ids, "encoder_scores": enc_scores, "classifier_ids": clf_ids,
                "classifier_scores": clf_scores}
    for spec in fused.active_specs():  # each channel alone, where it has a ranking of its own
        if (alone := fused.channels[spec.name].alone(texts, queries, k)) is not None:
            variants[f"{spec.name}_scores"], variants[f"{spec.name}_ids"] = alone
    np.savez(index_dir / VARIANTS_FILE, **variants)  # type: ignore[arg-type]  # numpy stub: **dict may hold allow_pickle
    return ranking


def inputs_key(dataset: XCDataset, encoder_dir: Path, max_length: int, k: int, cfg: IndexConfig | None,
               classifier_dir: Path | None) -> str:
    """A digest of everything :func:`predict` reads: the encoder's and the classifier's files (with the label vectors
    beside it), the test split, the depth and the index settings. The index build and the search are deterministic
    in them (two builds from the same vectors write the same bytes)."""
    import hashlib

    from xc_core.classifier.stage import label_vectors_path
    from xc_core.provenance import hash_files

    digest = hashlib.sha256(json.dumps({"split": fingerprint_test_split(dataset), "k": k, "max_length": max_length,
                                        "ranking": RANKING,
                                        "cfg": (cfg or IndexConfig(kind="hnsw")).model_dump(mode="json")},
                                       sort_keys=True).encode())
    for root in [encoder_dir] + ([classifier_dir, label_vectors_path(classifier_dir)] if classifier_dir else []):
        hash_files(digest, root)
    return digest.hexdigest()[:32]


def predict_or_copy(dataset: XCDataset, encoder_dir: Path, max_length: int, index_dir: Path, model_uri: str,
                    k: int = 100, progress: bool = False, classifier_dir: Path | None = None,
                    vector_cache: Path | None = None) -> Predictions:
    """:func:`predict`, unless another method's index folder beside ``index_dir`` was built from the same files
    (``ramen`` serving the ``dual_encoder`` encoder its graph test fell back to, ``ramen-clf`` the classifier it
    copied): its folder is then copied under this model's URI, with the same rankings, and nothing is encoded.
    ``vector_cache``: where the encoder's vectors are stored (encoders/vector_cache.py)."""
    key = inputs_key(dataset, encoder_dir, max_length, k, None, classifier_dir)
    for twin in sorted(index_dir.parent.iterdir()) if index_dir.parent.is_dir() else []:
        report = twin / "index_report.json"
        if twin == index_dir or not report.is_file() or json.loads(report.read_text()).get("inputs_key") != key:
            continue
        try:
            return _copy_index(twin, index_dir, model_uri, dataset, k)
        except (OSError, ValueError, KeyError, IndexError_):  # a twin stale, corrupt or changing: build our own
            break
    return predict(dataset, encoder_for(encoder_dir, max_length, vector_cache), index_dir, model_uri, k=k,
                   progress=progress, classifier_dir=classifier_dir, inputs_key=key)


def _copy_index(twin: Path, index_dir: Path, model_uri: str, dataset: XCDataset, k: int) -> Predictions:
    """``twin``'s index folder as ``index_dir``, its manifests and report naming ``model_uri``."""
    import shutil

    from xc_core.classifier.fusion import CLASSIFIER_INDEX

    index_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(twin, index_dir, dirs_exist_ok=True)
    for folder in (index_dir, index_dir / CLASSIFIER_INDEX):
        if (folder / "manifest.json").is_file():
            index = LabelIndex.load(folder, expect_dataset=dataset.name)
            index.model_uri = model_uri
            index.save(folder)
    report = {**json.loads((twin / "index_report.json").read_text()), "model_uri": model_uri,
              "copied_from": twin.name}
    (index_dir / "index_report.json").write_text(json.dumps(report))
    return _saved_predictions(dataset, index_dir, model_uri, report, k)


def _saved_predictions(dataset: XCDataset, index_dir: Path, model_uri: str, report: dict[str, Any],
                       k: int) -> Predictions:
    """The test predictions saved in ``index_dir`` (its index checked against ``model_uri`` and the data set)."""
    LabelIndex.load(index_dir, expect_model_uri=model_uri, expect_dataset=dataset.name)  # raises when stale/corrupt
    ids = np.load(index_dir / "test_top_ids.npy")[:, :k]
    scores = np.load(index_dir / "test_top_scores.npy")[:, :k]
    return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, fingerprint_test_split(dataset), model_uri,
                       float(report["hnsw_recall@10"]), float(report["ms_per_query"]),
                       float(report["exact_ms_per_query"]), dict(report.get("steps_ms_per_query", {})))


def _load_classifier(classifier_dir: Path | None) -> Any:
    from xc_core.classifier.fusion import FusedClassifier

    return FusedClassifier.load(classifier_dir) if classifier_dir is not None else None


def _label_vectors(dataset: XCDataset, encoder: TextEncoder, classifier_dir: Path | None,
                   progress: bool) -> np.ndarray:
    """The label embeddings: cached by the classifier stage (same encoder) when it ran, else encoded now."""
    if classifier_dir is not None:
        from xc_core.classifier.stage import label_vectors_path

        cached = label_vectors_path(classifier_dir)
        if cached.exists():
            vectors = np.load(cached)
            if vectors.shape[0] == len(dataset.label_texts):
                return vectors
    return encoder.encode(dataset.label_texts, progress=progress, desc="labels")


def load_or_predict(dataset: XCDataset, encoder_dir: Path, max_length: int, index_dir: Path, model_uri: str,
                    k: int = 100, progress: bool = False, classifier_dir: Path | None = None,
                    vector_cache: Path | None = None) -> Predictions:
    """The predictions ``label_index`` saved for this model and this test split, else :func:`predict_or_copy` anew.

    Reused only when the report names the same model URI and test-split fingerprint and the index passes
    its manifest checks (checksum, model, data set), so a stale or corrupt folder is never trusted."""
    report_path = index_dir / "index_report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    split = fingerprint_test_split(dataset)
    fresh = (report.get("model_uri") == model_uri and report.get("test_split") == split
             and report.get("ranking") == RANKING and report.get("k", 0) >= k
             and (index_dir / "test_top_ids.npy").exists())
    if not fresh:
        return predict_or_copy(dataset, encoder_dir, max_length, index_dir, model_uri, k=k, progress=progress,
                               classifier_dir=classifier_dir, vector_cache=vector_cache)
    return _saved_predictions(dataset, index_dir, model_uri, report, k)
