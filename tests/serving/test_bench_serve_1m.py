"""A grown catalogue (``xc_core.serving.catalogue``, what benchmarks/bench_serve_1m.py runs at a million) at 2,000
labels: generated ad texts, their vectors cached, an HNSW index swept
against exact search, registered the way `xc promote` registers, served by `xc serve --version N`, and the served
answers' recall@10 against exact search over HTTP.

Slow (19 s on 2 quiet cores, a minute or more while other work loads them): packaging the tiny profile's encoder,
the ONNX export that registration always makes (``log_served``) and ``xc serve``'s start take most of it; the 2,000
labels' own steps take seconds."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xc_core.serving import catalogue as bench
from xc_core.serving.load import ServeProcess
from xc_core.simulate.ad_texts import ad_texts

SERVED_AS = bench.DATASET  # xc serve serves known data sets only
#: the recall the sweep must reach on its tuning queries (the benchmark's goal)
GOAL_RECALL = 0.95


def _trained_home(tiny_home: Path, tmp_path: Path, method: str) -> tuple[Path, Any, Any, Any]:
    """(a copy of the tiny home's data set, the data set, ``method`` trained there at tiny, its served encoder)."""
    from xc_core.datasets.container import XCDataset
    from xc_core.paths import dataset_dir
    from xc_core.stages.train import train_method
    from xc_core.training.record import TrainedModel

    home = tmp_path / "home"
    shutil.copytree(tiny_home, home, ignore=shutil.ignore_patterns("events", "simulate", "graphs", "mlflow",
                                                                    "models", "indexes", "eval", "serving"))
    data = XCDataset.load(dataset_dir(home, bench.DATASET))
    train_method(data, method, "tiny", home)
    trained = TrainedModel.of(home, bench.DATASET, method, "tiny")
    return home, data, trained, bench.served_encoder(trained, tmp_path, onnx=False)


@pytest.mark.slow
def test_an_approximate_index_is_registered_served_and_recalls(tiny_home: Path, tmp_path: Path) -> None:
    from xc_core.index import IndexConfig

    home, data, trained, encoder = _trained_home(tiny_home, tmp_path, bench.METHOD)

    texts = ad_texts(2000, 0)
    vectors, facts = bench.cached_vectors(texts, encoder, tmp_path)
    assert facts["encoded_now"] == 2000 and vectors.shape == (2000, encoder.dim)
    assert bench.cached_vectors(texts, encoder, tmp_path)[1]["encoded_now"] == 0  # encoded once, then read

    tune_texts, held_texts = bench.query_sets(data, 64, 0)
    assert not set(tune_texts) & set(held_texts)
    tune_q, held_q = encoder.encode(tune_texts), encoder.encode(held_texts)
    truth = bench.exact_top_k(vectors, np.concatenate([tune_q, held_q]))
    tune, held = (tune_q, truth[: len(tune_q)]), (held_q, truth[len(tune_q):])

    cfg = IndexConfig(kind="hnsw", hnsw_m=8, ef_construction=40)
    index, build = bench.build_index(vectors, cfg, trained.model_uri, SERVED_AS)
    assert build["build_seconds"] >= 0
    from xc_core.measure import reset_peak_rss

    if reset_peak_rss():  # where the kernel lets a peak be reset, the build's own peak is read
        assert build["peak_rss_during_build_mb"] is not None and build["peak_rss_during_build_mb"] > 0, build
    rows = bench.sweep(index, "hnsw", [8, 64], tune, held)
    chosen = bench.choose(rows, GOAL_RECALL)
    assert chosen["value"] in (8, 64) and chosen["recall_at_10_tuning"] >= GOAL_RECALL
    index.set_search_breadth(chosen["value"])
    registered = bench.register_index(home, trained, index.save(tmp_path / "index"), texts, SERVED_AS,
                                      {"kind": "hnsw", "efSearch": chosen["value"]})

    with ServeProcess(home, SERVED_AS, registered["version"], ready_timeout_s=120) as server:
        assert server.facts["labels_in_index"] == 2000
        served = bench.served_recall(server.port, held_texts, held[1])
    # the served answers are the chosen index's: xc serve loads its efSearch from the manifest
    assert served["recall_at_10"] == pytest.approx(chosen["recall_at_10_held_out"], abs=0.02)


@pytest.mark.slow
def test_a_grown_classifier_catalogue_is_served_through_the_fused_search(tiny_home: Path, tmp_path: Path) -> None:
    """The -clf case: the data set's labels and 1,000 generated ads with no click, two HNSW indexes swept against
    the exact fused search, the grown classifier registered and served; the HTTP answers recall as measured."""
    from xc_core.classifier.fusion import CLASSIFIER_INDEX, LABEL_VECTORS
    from xc_core.index import IndexConfig

    home, data, trained, encoder = _trained_home(tiny_home, tmp_path, bench.FUSED_METHOD)

    generated = ad_texts(1000 + data.n_labels, 0)
    ids, texts, added = bench.catalogue(data, generated, data.n_labels + 1000)
    assert ids[: data.n_labels] == list(data.label_ids) and len(texts) == len(set(ids)) == data.n_labels + 1000
    new = texts[data.n_labels:]
    assert len(set(new)) == 1000 and not set(new) & set(data.label_texts), "added ads are new texts"
    vectors = np.concatenate([encoder.encode(list(data.label_texts)), encoder.encode([generated[i] for i in added])])
    fused = bench.grown_classifier(trained, vectors[data.n_labels:])
    assert fused.weights.shape == vectors.shape

    tune_texts, held_texts = bench.query_sets(data, 64, 0)
    tune_q, held_q = encoder.encode(tune_texts), encoder.encode(held_texts)
    truth = bench.exact_fused(vectors, fused, np.concatenate([tune_q, held_q]), [*tune_texts, *held_texts])
    cfg = IndexConfig(kind="hnsw", hnsw_m=8, ef_construction=40)
    indexes = (bench.build_index(vectors, cfg, trained.model_uri, SERVED_AS)[0],
               bench.build_index(fused.weights, cfg, trained.model_uri, SERVED_AS)[0])
    rows = bench.fused_sweep(indexes, vectors, fused, [16, 256], (tune_q, tune_texts, truth[: len(tune_q)]),
                             (held_q, held_texts, truth[len(tune_q):]))
    chosen = bench.choose(rows, GOAL_RECALL)
    for index in indexes:
        index.set_ef_search(chosen["value"])
    folder = indexes[0].save(tmp_path / "index")
    indexes[1].save(folder / CLASSIFIER_INDEX)
    np.save(folder / LABEL_VECTORS, vectors)
    grown_uri = bench.log_grown_model(trained, fused, tmp_path)
    registered = bench.register_index(home, trained, folder, texts, SERVED_AS, {"efSearch": chosen["value"]},
                                      ids=ids, model_uri=grown_uri)

    with ServeProcess(home, SERVED_AS, registered["version"], ready_timeout_s=120) as server:
        assert server.facts["labels_in_index"] == len(texts)
        served = bench.served_recall(server.port, held_texts, truth[len(tune_q):], ids=ids)
    # what xc serve answers is the fused search the sweep measured (ties aside)
    assert served["recall_at_10"] == pytest.approx(chosen["recall_at_10_held_out"], abs=0.02)
