"""Label and query embedding sharded over a real two-worker dask cluster (127.0.0.1, started and stopped by this
module), and the label index built from its shards (issue #42, item 3): on the tiny synthetic data set's label
texts (38 of them duplicated: exact ties) and 3,000 generated ad texts, with a tiny random BERT through xc's own
encoder (``encoder_for``),

(a) the shards read back in id order equal the single-process embedding, both workers did the work, and each loaded
    the encoder once per job;
(b) the exact sharded index ranks the data set's queries as one flat index does (``rankings_agree``: up to ties);
(c) the HNSW sharded index recalls ≥ 0.99 of the exact top-10."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from xc_core.encoders.text import encoder_for
from xc_core.encoders.tiny import build_tiny_bert
from xc_core.engines.embedding import (
    dask_client,
    embed_parquet,
    embed_texts,
    iter_shards,
    read_shards,
    shard_bounds,
    shard_manifest,
)
from xc_core.index import IndexConfig, LabelIndex, ShardedIndex, recall_against_exact
from xc_core.index.ties import rankings_agree
from xc_core.simulate.ad_texts import ad_texts

pytest.importorskip("distributed", reason="sharded embedding runs on dask: the optional extra `scale`")



@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """Two worker processes, one thread each, on loopback: one cluster for the module (about a second to start;
    each worker's first task imports torch)."""
    with dask_client(workers=2) as c:
        yield c


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert") / "bert", seed=3)


@pytest.fixture(scope="module")
def texts(tiny_home: Path) -> dict[str, list[str]]:
    from xc_core.datasets.container import XCDataset
    from xc_core.paths import dataset_dir

    data = XCDataset.load(dataset_dir(tiny_home, "synthetic"))
    labels = list(data.label_texts) + ad_texts(3000, 0)
    return {"labels": labels, "queries": sorted(set(data.train_texts) | set(data.test_texts))}


@pytest.fixture(scope="module")
def single(encoder_dir: Path, texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
    """The single-process embedding: xc's encoder in this process, as every other stage runs it."""
    encoder = encoder_for(encoder_dir)
    return {name: encoder.encode(values) for name, values in texts.items()}


@pytest.fixture(scope="module")
def sharded(client: Any, encoder_dir: Path, texts: dict[str, list[str]],
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("shards")
    factory = partial(encoder_for, encoder_dir)
    for name, values in texts.items():  # the labels as 4 shards: each worker runs two
        embed_texts(values, factory, out / name, client, shards=4 if name == "labels" else 2)
    return {name: out / name for name in texts}


def test_sharded_embedding_over_two_workers_equals_the_single_process_one(
        sharded: dict[str, Path], single: dict[str, np.ndarray], texts: dict[str, list[str]]) -> None:
    for name, folder in sharded.items():
        vectors, ids = read_shards(folder)
        assert ids.tolist() == list(range(len(texts[name])))
        np.testing.assert_allclose(vectors, single[name], rtol=0, atol=1e-5)
        shards = shard_manifest(folder)["shards"]
        assert [s["rows"] for s in shards] == [b - a for a, b in shard_bounds(len(ids), len(shards))]
        workers = {s["worker"].rsplit(":", 1)[1] for s in shards}
        assert len(workers) == 2 and str(os.getpid()) not in workers, "the shards ran on both worker processes"
        loads = [s["load_seconds"] for s in shards]
        assert sum(1 for s in loads if s > 0) == len(workers), f"the encoder loaded once per worker and job: {loads}"


def test_a_parquet_column_is_read_by_each_worker_in_row_ranges(client: Any, encoder_dir: Path, tiny_home: Path,
                                                              single: dict[str, np.ndarray], tmp_path: Path) -> None:
    from xc_core.paths import dataset_dir

    labels = pl.read_parquet(dataset_dir(tiny_home, "synthetic") / "labels.parquet")
    path = tmp_path / "labels.parquet"
    labels.write_parquet(path, row_group_size=50)  # ranges that start and end inside row groups
    embed_parquet(path, "text", partial(encoder_for, encoder_dir), tmp_path / "shards", client, shards=3)
    vectors, ids = read_shards(tmp_path / "shards")
    assert ids.tolist() == list(range(labels.height))
    np.testing.assert_allclose(vectors, single["labels"][: labels.height], rtol=0, atol=1e-5)


def test_an_unfinished_or_damaged_job_is_refused(sharded: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    copy = Path(shutil.copytree(sharded["queries"], tmp_path / "queries"))
    (copy / "shard-00001.ids.npy").unlink()
    with pytest.raises(FileNotFoundError, match="shard files missing: shard-00001.ids.npy"):
        read_shards(copy)
    (copy / "manifest.json").unlink()
    with pytest.raises(FileNotFoundError, match="not a finished embedding job"):
        list(iter_shards(copy))


def test_sharded_exact_index_ranks_as_the_single_flat_index(sharded: dict[str, Path],
                                                            single: dict[str, np.ndarray]) -> None:
    queries = single["queries"]
    reference = LabelIndex.build(single["labels"], None, IndexConfig(kind="flat")).search(queries, 10)
    index = ShardedIndex.build(iter_shards(sharded["labels"]), IndexConfig(kind="flat"))
    assert len(index.shards) == 4 and index.count == len(single["labels"])
    found = index.search(read_shards(sharded["queries"])[0], 10)
    agree = rankings_agree(reference, found)
    assert agree.all(), f"{(~agree).sum()} of {len(agree)} queries ranked otherwise"
    ties = np.isclose(reference[0][:, :-1], reference[0][:, 1:], atol=1e-6, rtol=0).any(axis=1)
    assert ties.any(), "no query meets a tie: the comparison up to ties proves less than it says"


def test_sharded_hnsw_index_recalls_the_exact_top_10(sharded: dict[str, Path], single: dict[str, np.ndarray]) -> None:
    vectors, ids = read_shards(sharded["labels"])
    index = ShardedIndex.build(iter_shards(sharded["labels"]), IndexConfig(kind="hnsw"))
    assert recall_against_exact(index, vectors, ids, single["queries"], k=10) >= 0.99


def test_the_default_path_imports_no_engine() -> None:
    """The engine module and the sharded index import dask (the extra `scale`) only when a job runs."""
    import subprocess

    code = ("import sys, xc_core.index, xc_core.engines.embedding; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed', 'pyspark', 'torch'}))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"
