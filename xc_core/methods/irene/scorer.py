"""How IRENE scores and serves: an HNSW index over every label's IRENE representation (streamed keywords are
added to it later, ``stream.py``, and added back, re-represented, when the index is rebuilt), searched with the
frozen encoder's query embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from xc_core.datasets.container import XCDataset
from xc_core.methods.base import Predictions, Scorer, Served, pyfunc_index_scorer
from xc_core.methods.irene.stream import add_keywords, streamed_labels
from xc_core.tracking.served import STREAMED_FILE
from xc_core.training.record import TrainedModel


def predict(dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, reuse: bool = False,
            progress: bool = False, k: int = 100) -> Predictions:
    """Index every label's representation, search the test queries; saved like the encoder methods' index stage
    (``index_report.json``, ``test_top_ids.npy``), so the evaluation reuses it when the model is the same."""
    from xc_core.evaluation.metrics import to_csr
    from xc_core.evaluation.record import fingerprint_test_split
    from xc_core.index import RANKING, IndexConfig, LabelIndex, search_exactly
    from xc_core.methods.irene import _encoder
    from xc_core.methods.irene.fit import MODEL, IreneModel, embed

    split = fingerprint_test_split(dataset)
    report_path = index_dir / "index_report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    if (reuse and report.get("model_uri") == trained.model_uri and report.get("test_split") == split
            and report.get("ranking") == RANKING):
        ids, scores = np.load(index_dir / "test_top_ids.npy"), np.load(index_dir / "test_top_scores.npy")
        return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, split, trained.model_uri,
                           report["hnsw_recall@10"], report["ms_per_query"], report["exact_ms_per_query"])
    model = IreneModel.load(trained.folder / MODEL)
    queries = embed(dataset, _encoder(trained), trained.folder, progress)["test"]
    index = LabelIndex.build(model.label_reps, None, IndexConfig(kind="hnsw"), model_uri=trained.model_uri,
                             dataset=dataset.name)
    index_dir.mkdir(parents=True, exist_ok=True)
    streamed = streamed_labels(index_dir)  # keywords streamed into the index this one replaces
    index.save(index_dir)
    (index_dir / STREAMED_FILE).unlink(missing_ok=True)  # a fresh index holds the data set's labels only…
    ranking = search_exactly(index, model.label_reps, queries, k)  # the metrics read it exactly; the ANN serves
    scores, ids, recall = ranking.scores, ranking.ids, ranking.ann_recall_at_10
    ann_ms, exact_ms = ranking.ann_ms_per_query, ranking.exact_ms_per_query
    np.save(index_dir / "test_top_ids.npy", ids)
    np.save(index_dir / "test_top_scores.npy", scores)
    report_path.write_text(json.dumps({"hnsw_recall@10": recall, "ranking": RANKING, "ms_per_query": ann_ms,
                                       "exact_ms_per_query": exact_ms, "queries": len(queries), "k": k,
                                       "model_uri": trained.model_uri, "test_split": split}))
    _restream(dataset, trained, index_dir, streamed)  # …until the streamed keywords are added back
    return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, split, trained.model_uri, recall, ann_ms,
                       exact_ms)


def _restream(dataset: XCDataset, trained: TrainedModel, index_dir: Path, streamed: pl.DataFrame) -> None:
    """Represent the previously streamed keywords with the new model and add them to the rebuilt index (new ids
    after the data set's labels), except those that became labels of the data set (by id, or by text)."""
    if streamed.is_empty():
        return
    home = index_dir.parents[2]  # paths.index_dir: <home>/indexes/<dataset>/<method>-<profile>
    with_ids = streamed.filter(pl.col("keyword_id").is_not_null())
    texts_only = streamed.filter(pl.col("keyword_id").is_null())
    if len(with_ids):
        add_keywords(home, dataset.name, trained.profile, with_ids["text"].to_list(), with_ids["keyword_id"].to_list(),
                     index_folder=index_dir)
    if len(texts_only):
        add_keywords(home, dataset.name, trained.profile, texts_only["text"].to_list(), index_folder=index_dir)


def irene_scorer(served: Served) -> Scorer:
    """The registered model's encoder embeds the query; the IRENE index (with streamed keywords) is searched."""
    from xc_core.methods.irene import NAME

    return pyfunc_index_scorer(NAME, served)
