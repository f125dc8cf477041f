"""Label and query embedding as a batch job on a dask cluster: N workers, vectors in shards.

A table of texts (label texts, query texts: a list, or a column of a Parquet file such as a data set's
``labels.parquet``) is cut into contiguous row ranges, one per shard; each range is a dask task that encodes its
texts on a worker and writes its vectors as one shard file. A worker loads the encoder once per job (its first
partition of the job; the job's later partitions there reuse it). The label index is then built shard by shard
(``xc_core/index/shards.py``) without the vectors ever meeting in one process; :func:`read_shards` concatenates
them in id order where one array is wanted.

Why dask, and not Spark's ``mapInPandas`` or Ray Data:

- xc already sends work to a dask cluster (``xc run --executor dask``, ``xc_assets/distributed.py``): the same
  scheduler and the same ``dask worker ADDRESS --nthreads 1`` processes run this job, with the same requirement
  (the output folder at one path on every worker). Ray would be a third runtime that xc does not otherwise install.
- the work is Python from end to end (the tokenizer, torch): a dask task is a call in a long-lived Python worker that
  keeps the loaded encoder between a job's partitions and writes numpy files itself. ``mapInPandas`` would move every
  partition JVM → Arrow → a Python worker and the vectors back through the JVM (1.5 KB a text against its tens of
  bytes), to be written by Spark as Parquet rows rather than the float32 blocks faiss reads.
- the texts are small and already in xc's own Parquet files (the data set's), not in a Spark table; a worker reads
  its own row range of the file (:class:`ParquetTexts`), so the driver holds neither texts nor vectors. Where the
  logs live on Spark, the graph tables run there (``engines/spark.py``) and write those files.
- a local cluster starts in about a second (a JVM in about ten): the tests run a real two-worker cluster.

The engine is blind to what the texts mean and to which encoder runs (engines sit below ``encoders`` in xc's layers,
``tests/test_layering.py``): it is handed a picklable factory, ``functools.partial(encoder_for, encoder_dir)``
(``xc_core/encoders/text.py``: the same ``TextEncoder.encode`` every other stage runs), and calls it on each worker.
A dask worker's nanny sets ``OMP_NUM_THREADS=1``, so each worker encodes on one core: start one worker per core.

The output folder::

    shard-00000.npy       float32 (rows, dim), the encoder's unit vectors of the shard's texts
    shard-00000.ids.npy   int64, their ids (the texts' row positions unless the caller gives ids)
    manifest.json         written last, by the driver (rows, dimension, each shard's ids and timings): a folder
                          without it is an unfinished job, and readers refuse it

dask and distributed are the optional extra ``scale`` (``pip install -e '.[scale]'``); importing this module does not
import them (only :func:`dask_client` and :func:`embed_texts` / :func:`embed_parquet` do).
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from distributed import Client

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


class Encoder(Protocol):
    """What a worker needs of an encoder: xc's ``TextEncoder`` is one."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


#: builds the encoder on a worker; must pickle (``functools.partial(encoder_for, Path(...))`` does)
EncoderFactory = Callable[[], Encoder]


@dataclass(frozen=True)
class ParquetTexts:
    """Rows ``[start, stop)`` of one string column of a Parquet file, read where the task runs (nulls read as "")."""

    path: str
    column: str
    start: int
    stop: int

    def read(self) -> list[str]:
        import pyarrow.parquet as pq

        file = pq.ParquetFile(self.path)
        groups, first, offset = [], None, 0
        for g in range(file.metadata.num_row_groups):
            rows = file.metadata.row_group(g).num_rows
            if offset < self.stop and offset + rows > self.start:
                groups.append(g)
                first = offset if first is None else first
            offset += rows
        if not groups or first is None:
            return []
        table = file.read_row_groups(groups, columns=[self.column])
        column = table.column(self.column).slice(self.start - first, self.stop - self.start)
        return ["" if t is None else str(t) for t in column.to_pylist()]


def shard_bounds(rows: int, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous row ranges covering ``[0, rows)``, sizes differing by at most one (none empty)."""
    shards = max(1, min(shards, rows)) if rows else 1
    edges = np.linspace(0, rows, shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def shard_name(shard: int) -> str:
    return f"shard-{shard:05d}"


# -- on a worker ---------------------------------------------------------------------------------------------

_LOADED: dict[tuple[str, bytes], Encoder] = {}  # this worker process's encoder for one job (one kept)
_LOCK = threading.Lock()


def _encoder(make_encoder: EncoderFactory, job: str) -> tuple[Encoder, float]:
    """The factory's encoder, built once per job on each worker process and reused by the job's later partitions
    there; the seconds the build took (0 when reused). Never kept from one job to the next: a model folder saved
    again in place (a retrained encoder) is read afresh. A factory that does not pickle is built for each partition."""
    try:
        key = (job, pickle.dumps(make_encoder))
    except (pickle.PicklingError, TypeError, AttributeError):
        started = time.perf_counter()
        return make_encoder(), time.perf_counter() - started
    with _LOCK:
        if key not in _LOADED:
            _LOADED.clear()  # the last job's encoder is freed before this one loads
            started = time.perf_counter()
            _LOADED[key] = make_encoder()
            return _LOADED[key], time.perf_counter() - started
        return _LOADED[key], 0.0


def _save(path: Path, array: np.ndarray) -> None:
    """Whole or absent: written beside its name, then renamed (a killed task leaves no half shard)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


def embed_shard(shard: int, texts: Sequence[str] | ParquetTexts, ids: np.ndarray | None,
                make_encoder: EncoderFactory, out: str, job: str = "") -> dict[str, Any]:
    """One partition, on a worker: its texts encoded by the job's encoder on this worker (loaded by its first
    partition here) and written as ``shard-NNNNN.npy`` and ``shard-NNNNN.ids.npy`` under ``out``. ``ids`` None: the
    Parquet rows' positions. What was done, for the manifest."""
    started = time.perf_counter()
    if isinstance(texts, ParquetTexts):
        ids = np.arange(texts.start, texts.stop, dtype=np.int64) if ids is None else ids
        texts = texts.read()
    if ids is None or len(ids) != len(texts):
        raise ValueError(f"shard {shard}: {len(texts)} texts, {None if ids is None else len(ids)} ids")
    encoder, load_seconds = _encoder(make_encoder, job or f"{os.getpid()}-{time.time_ns()}")
    began = time.perf_counter()
    vectors = np.ascontiguousarray(encoder.encode(list(texts)), dtype=np.float32)
    encode_seconds = time.perf_counter() - began
    folder, name = Path(out), shard_name(shard)
    _save(folder / f"{name}.npy", vectors)
    _save(folder / f"{name}.ids.npy", np.asarray(ids, dtype=np.int64))
    return {"shard": shard, "file": f"{name}.npy", "ids_file": f"{name}.ids.npy", "rows": len(texts),
            "dim": int(vectors.shape[1]) if vectors.ndim == 2 else 0,
            "first_id": int(ids[0]) if len(ids) else None, "last_id": int(ids[-1]) if len(ids) else None,
            "load_seconds": round(load_seconds, 3), "encode_seconds": round(encode_seconds, 3),
            "seconds": round(time.perf_counter() - started, 3),
            "texts_per_s": round(len(texts) / encode_seconds, 1) if encode_seconds > 0 else None,
            "worker": f"{socket.gethostname()}:{os.getpid()}"}


# -- the driver ----------------------------------------------------------------------------------------------


@contextmanager
def dask_client(address: str | None = None, workers: int = 2) -> Iterator[Client]:
    """The caller's current dask client if there is one (left running); else a client of the scheduler at
    ``address`` (``tcp://host:8786``; closed on exit, the cluster left running); else a local cluster of ``workers``
    processes with one thread each, bound to 127.0.0.1 (the scheduler's HTTP endpoint too, on a free port),
    stopped on exit."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("sharded embedding needs dask and distributed: pip install -e '.[scale]'") from None
    try:
        current = Client.current()
    except ValueError:
        current = None
    if current is not None:
        yield current
        return
    if address:
        with Client(address, timeout=60) as client:
            yield client
        return
    import logging

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    with cluster, Client(cluster) as client:
        yield client


def _clear(out: Path) -> None:
    """A previous job's manifest and shards go first: a rerun with fewer shards leaves none of the old ones."""
    (out / MANIFEST).unlink(missing_ok=True)
    for old in out.glob("shard-*.npy"):
        old.unlink()


def _run(client: Client, tasks: list[tuple[int, Any, np.ndarray | None]], make_encoder: EncoderFactory, out: Path,
         rows: int, source: str) -> dict[str, Any]:
    """The tasks on the cluster (each partition's texts scattered to a worker first); the manifest, written last."""
    out.mkdir(parents=True, exist_ok=True)
    _clear(out)
    started, job = time.perf_counter(), f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}"
    # spread over the workers rather than in the task graph; hash=False: a rerun on the same texts must not reuse
    # the key of the last run's data, which the scheduler may be releasing (its task then fails, "lost dependencies")
    payloads = client.scatter([texts for _, texts, _ in tasks], hash=False)
    futures = [client.submit(embed_shard, shard, payload, ids, make_encoder, str(out), job, pure=False,
                             key=f"xc-embed-{shard_name(shard)}-{job}")
               for (shard, _, ids), payload in zip(tasks, payloads, strict=True)]
    done = sorted(client.gather(futures), key=lambda s: s["shard"])
    dims = {s["dim"] for s in done if s["rows"]}
    if len(dims) > 1:
        raise RuntimeError(f"shards of different dimensions {sorted(dims)}: the workers loaded different encoders")
    manifest = {"version": MANIFEST_VERSION, "rows": rows, "dim": dims.pop() if dims else 0, "source": source,
                "encoder": repr(make_encoder), "workers": len(client.scheduler_info()["workers"]),
                "seconds": round(time.perf_counter() - started, 3), "shards": done,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = out / f".{MANIFEST}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, out / MANIFEST)
    return manifest


def embed_texts(texts: Sequence[str], make_encoder: EncoderFactory, out: Path, client: Client,
                shards: int | None = None, ids: Sequence[int] | np.ndarray | None = None) -> dict[str, Any]:
    """``texts`` encoded on the cluster as ``shards`` shards (default: one per worker thread) under ``out``; their
    ids are ``ids`` (default: positions). The manifest (also written as ``out/manifest.json``)."""
    texts = list(texts)
    id_array = np.arange(len(texts), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    if len(id_array) != len(texts) or len(np.unique(id_array)) != len(id_array):
        raise ValueError(f"{len(texts)} texts need as many distinct ids, got {len(id_array)}")
    count = shards or sum(client.nthreads().values())
    tasks: list[tuple[int, Any, np.ndarray | None]] = [
        (i, texts[a:b], id_array[a:b]) for i, (a, b) in enumerate(shard_bounds(len(texts), count))]
    return _run(client, tasks, make_encoder, out, len(texts), "texts")


def embed_parquet(path: Path, column: str, make_encoder: EncoderFactory, out: Path, client: Client,
                  shards: int | None = None) -> dict[str, Any]:
    """The ``column`` of the Parquet file at ``path`` encoded on the cluster, each worker reading its own rows of
    the file (at the same path on every worker); ids are row positions (a data set's label index)."""
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(path).metadata.num_rows
    count = shards or sum(client.nthreads().values())
    tasks: list[tuple[int, Any, np.ndarray | None]] = [
        (i, ParquetTexts(str(path), column, a, b), None) for i, (a, b) in enumerate(shard_bounds(rows, count))]
    return _run(client, tasks, make_encoder, out, rows, f"parquet:{path}#{column}")


# -- reading the shards --------------------------------------------------------------------------------------


def shard_manifest(folder: Path) -> dict[str, Any]:
    """The job's manifest, checked: every shard file present, the rows adding up."""
    path = folder / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{folder}: no {MANIFEST}: not a finished embedding job (run it again)")
    manifest = json.loads(path.read_text())
    missing = [s[key] for s in manifest["shards"] for key in ("file", "ids_file") if not (folder / s[key]).exists()]
    if missing:
        raise FileNotFoundError(f"{folder}: shard files missing: {', '.join(missing)}")
    if sum(s["rows"] for s in manifest["shards"]) != manifest["rows"]:
        raise ValueError(f"{folder}: shards hold {sum(s['rows'] for s in manifest['shards'])} rows, the manifest "
                         f"says {manifest['rows']}")
    return manifest


def iter_shards(folder: Path, mmap: bool = True) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each shard's (vectors, ids), in shard order, memory-mapped unless ``mmap`` is False: what the sharded
    index builds from, one shard in memory at a time."""
    for shard in shard_manifest(folder)["shards"]:
        vectors = np.load(folder / shard["file"], mmap_mode="r" if mmap else None)
        ids = np.load(folder / shard["ids_file"])
        if len(vectors) != len(ids) or len(ids) != shard["rows"]:
            raise ValueError(f"{folder / shard['file']}: {len(vectors)} vectors, {len(ids)} ids, manifest "
                             f"{shard['rows']}")
        yield vectors, ids


def read_shards(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every shard's vectors as one float32 array in ascending id order, and those ids."""
    parts = list(iter_shards(folder, mmap=False))
    if not parts:
        return np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.int64)
    ids = np.concatenate([i for _, i in parts])
    order = np.argsort(ids, kind="stable")
    if len(ids) > 1 and (np.diff(ids[order]) == 0).any():
        raise ValueError(f"{folder}: an id occurs in more than one row")
    return np.concatenate([v for v, _ in parts])[order], ids[order]
