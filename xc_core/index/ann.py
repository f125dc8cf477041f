"""A label index: faiss inner-product search over L2-normalised vectors, with a manifest.

``search(queries, k)`` always returns *similarities* (inner product = cosine, higher is better) and the
caller's label ids, whatever the index type. ``add(vectors, ids)`` grows the index (IRENE streams novel
keywords in). ``save``/``load`` write the faiss index plus a manifest (model URI, data set, kind,
dimension, count, sha256 of the index file); ``load`` refuses an index whose file does not match its
manifest, or whose model URI / data set differ from what the caller expects.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import numpy as np
from pydantic import BaseModel, Field

MANIFEST_VERSION = 1


class IndexError_(RuntimeError):  # IndexError is a builtin with another meaning
    """A stale, corrupt or mismatched index: the message says which and how to rebuild it."""


class IndexConfig(BaseModel):
    kind: Literal["flat", "hnsw", "ivf"] = "hnsw"
    hnsw_m: int = Field(default=32, ge=4, description="HNSW graph degree M")
    ef_construction: int = Field(default=200, ge=8)
    ef_search: int = Field(default=128, ge=8)
    ivf_lists: int = Field(default=1024, ge=1, description="IVF cells (large label sets)")
    ivf_probe: int = Field(default=32, ge=1)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class LabelIndex:
    index: Any  # faiss.IndexIDMap2 over the configured index
    cfg: IndexConfig
    dim: int
    model_uri: str = ""
    dataset: str = ""

    @classmethod
    def build(cls, vectors: np.ndarray, ids: np.ndarray | None = None, cfg: IndexConfig | None = None,
              model_uri: str = "", dataset: str = "") -> LabelIndex:
        import faiss

        cfg = cfg or IndexConfig()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = vectors.shape[1]
        inner: faiss.Index
        if cfg.kind == "flat":
            inner = faiss.IndexFlatIP(dim)
        elif cfg.kind == "hnsw":
            hnsw = faiss.IndexHNSWFlat(dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = cfg.ef_construction
            hnsw.hnsw.efSearch = cfg.ef_search
            inner = hnsw
        else:
            quantizer = faiss.IndexFlatIP(dim)
            lists = max(1, min(cfg.ivf_lists, len(vectors) // 39))
            ivf = faiss.IndexIVFFlat(quantizer, dim, lists, faiss.METRIC_INNER_PRODUCT)
            ivf.train(vectors)
            ivf.nprobe = min(cfg.ivf_probe, lists)
            inner = ivf
        index = cls(faiss.IndexIDMap2(inner), cfg, dim, model_uri, dataset)
        index.add(vectors, np.arange(len(vectors)) if ids is None else ids)
        return index

    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape[1] != self.dim:
            raise IndexError_(f"vectors have dimension {vectors.shape[1]}, the index {self.dim}")
        self.index.add_with_ids(vectors, np.asarray(ids, dtype=np.int64))

    def set_ef_search(self, ef_search: int) -> None:
        """Trade HNSW recall for speed at query time (kept in the manifest on the next save)."""
        import faiss

        if self.cfg.kind != "hnsw":
            raise IndexError_(f"efSearch applies to HNSW indexes, this one is {self.cfg.kind}")
        # downcast_index returns the concrete class (its stub says Index): HNSW, checked above
        cast(faiss.IndexHNSW, faiss.downcast_index(self.index.index)).hnsw.efSearch = ef_search
        self.cfg = self.cfg.model_copy(update={"ef_search": ef_search})

    def set_nprobe(self, nprobe: int) -> None:
        """Trade IVF recall for speed at query time: the inverted lists searched per query (kept in the manifest
        on the next save, as ``ivf_probe``)."""
        import faiss

        if self.cfg.kind != "ivf":
            raise IndexError_(f"nprobe applies to IVF indexes, this one is {self.cfg.kind}")
        cast(faiss.IndexIVF, faiss.downcast_index(self.index.index)).nprobe = nprobe  # IVF, checked above
        self.cfg = self.cfg.model_copy(update={"ivf_probe": nprobe})

    def set_search_breadth(self, value: int) -> None:
        """The approximate search's one knob, whichever the kind: efSearch (HNSW) or nprobe (IVF)."""
        if self.cfg.kind == "ivf":
            self.set_nprobe(value)
        else:
            self.set_ef_search(value)

    @property
    def count(self) -> int:
        return int(self.index.ntotal)

    @property
    def next_id(self) -> int:
        """One above the largest id held (0 when empty): where a stream appends new items without a collision."""
        import faiss

        ids = faiss.vector_to_array(self.index.id_map)
        return int(ids.max()) + 1 if len(ids) else 0

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(similarities, label ids), best first; missing results are id -1 with similarity -inf."""
        scores, ids = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), min(k, max(self.count, 1)))
        scores = np.where(ids < 0, -np.inf, scores)
        return scores, ids

    # -- persistence ---------------------------------------------------------------------------
    def save(self, folder: Path) -> Path:
        import faiss

        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".index.faiss.tmp-{os.getpid()}"
        faiss.write_index(self.index, str(tmp))
        os.replace(tmp, folder / "index.faiss")
        manifest = {"version": MANIFEST_VERSION, "kind": self.cfg.kind, "config": self.cfg.model_dump(),
                    "dimension": self.dim, "count": self.count, "model_uri": self.model_uri, "dataset": self.dataset,
                    "sha256": _sha256(folder / "index.faiss"), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                         time.gmtime())}
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        return folder

    @classmethod
    def load(cls, folder: Path, expect_model_uri: str | None = None, expect_dataset: str | None = None) -> LabelIndex:
        import faiss

        manifest_path, index_path = folder / "manifest.json", folder / "index.faiss"
        rebuild = f"rebuild it with `xc index --dataset ... --method ...` (folder {folder})"
        if not manifest_path.exists() or not index_path.exists():
            raise IndexError_(f"{folder}: index or manifest missing; {rebuild}")
        try:
            manifest = json.loads(manifest_path.read_text())
        except json.JSONDecodeError as exc:
            raise IndexError_(f"{manifest_path}: corrupt manifest ({exc}); {rebuild}") from exc
        if manifest.get("sha256") != _sha256(index_path):
            raise IndexError_(f"{index_path}: checksum does not match its manifest (corrupt or replaced); {rebuild}")
        if expect_model_uri is not None and manifest.get("model_uri") != expect_model_uri:
            raise IndexError_(f"{folder}: stale index built for model {manifest.get('model_uri')!r}, "
                              f"not {expect_model_uri!r}; {rebuild}")
        if expect_dataset is not None and manifest.get("dataset") != expect_dataset:
            raise IndexError_(f"{folder}: index of data set {manifest.get('dataset')!r}, not {expect_dataset!r}")
        index = faiss.read_index(str(index_path))
        if index.ntotal != manifest["count"] or index.d != manifest["dimension"]:
            raise IndexError_(f"{folder}: index holds {index.ntotal}×{index.d}, manifest says "
                              f"{manifest['count']}×{manifest['dimension']}; {rebuild}")
        cfg = IndexConfig(**manifest["config"])
        inner = faiss.downcast_index(index.index) if hasattr(index, "index") else index
        if cfg.kind == "hnsw":  # downcast_index gave the concrete class (its stub says Index)
            cast(faiss.IndexHNSW, inner).hnsw.efSearch = cfg.ef_search
        elif cfg.kind == "ivf":
            cast(faiss.IndexIVF, inner).nprobe = cfg.ivf_probe
        return cls(index, cfg, manifest["dimension"], manifest["model_uri"], manifest["dataset"])


class Searcher(Protocol):
    """Anything searched as a label index is: a :class:`LabelIndex`, a ``shards.ShardedIndex``."""

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


def recall_against_exact(approx: Searcher, vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray,
                         k: int = 10) -> float:
    """Share of the exact top-k (flat search over the same vectors) that the approximate index returns."""
    exact = LabelIndex.build(vectors, ids, IndexConfig(kind="flat"))
    _, truth = exact.search(queries, k)
    _, found = approx.search(queries, k)
    return top_k_agreement(truth, found, k)


#: test queries the serving index's recall against exact and its latency are measured on
RECALL_SAMPLE = 2000

#: what an index report's ``ranking`` says of its saved test rankings: scored exactly over every label (a report
#: without it ranked through the ANN, so it is never reused for the metrics)
RANKING = "exact"

#: how deep the served path is searched when its recall is measured: ``xc predict``'s default answer
SERVED_K = 10

#: a ranking of some query rows: (scores, label ids), best first, ``k`` columns
RankRows = Callable[[slice, int], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ExactRanking:
    """Offline evaluation's ranking, scored exactly over the whole label space, with the serving (ANN) path's
    agreement beside it: evaluation compares models, not two approximate graphs."""

    scores: np.ndarray  # (queries, k) exact similarities, best first
    ids: np.ndarray  # (queries, k) label ids, −1 padded
    ann_recall_at_10: float  # share of the exact top-10 that the served (ANN) ranking returns, on the sample
    ann_ms_per_query: float  # the served ranking's ms per query, on the sample
    exact_ms_per_query: float  # the exact ranking's ms per query, on every query


def top_k_agreement(truth: np.ndarray, found: np.ndarray, k: int = 10) -> float:
    """Mean share of each row's ``truth`` top-``k`` ids (−1 pads ignored) that its ``found`` top-``k`` holds."""
    hits = [len(set(t[t >= 0]) & set(f[f >= 0])) / max(1, int((t >= 0).sum()))
            for t, f in zip(truth[:, :k], found[:, :k], strict=True)]
    return float(np.mean(hits)) if hits else 1.0


def rank_exactly(exact: RankRows, served: RankRows, n_queries: int, k: int,
                 sample: int = RECALL_SAMPLE) -> ExactRanking:
    """Every query ranked by ``exact`` (flat inner products), the first ``sample`` also by ``served`` (the ANN path a
    deployment answers with, asked for its top 10 as ``xc predict`` is: a deeper search would read a larger HNSW
    beam), timed apart: the exact ranking is what the metrics read, the served one's recall@10 against it is
    reported beside them."""
    started = time.perf_counter()
    scores, ids = exact(slice(0, n_queries), k)
    exact_ms = 1000 * (time.perf_counter() - started) / max(n_queries, 1)
    shown = min(n_queries, sample)
    started = time.perf_counter()
    _, served_ids = served(slice(0, shown), SERVED_K)
    ann_ms = 1000 * (time.perf_counter() - started) / max(shown, 1)
    return ExactRanking(scores, ids, top_k_agreement(ids[:shown], served_ids), ann_ms, exact_ms)


def search_exactly(approx: Searcher, vectors: np.ndarray, queries: np.ndarray, k: int,
                   sample: int = RECALL_SAMPLE) -> ExactRanking:
    """:func:`rank_exactly` for a plain label index: a flat index over the same ``vectors`` (ids = row numbers, as
    ``approx`` was built) against ``approx``."""
    exact = LabelIndex.build(vectors, None, IndexConfig(kind="flat"))
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    return rank_exactly(lambda rows, depth: exact.search(queries[rows], depth),
                        lambda rows, depth: approx.search(queries[rows], depth), len(queries), k, sample)
