"""The label index as shards searched as one.

Each shard is an xc :class:`LabelIndex` over one shard of the label vectors (``engines/embedding.py`` writes them,
one per worker): flat (exact), HNSW or IVF, with its own manifest and checks. A search asks every shard for its
top-k and merges the answers by similarity, ties by the lower label id, so the same shards give the same ranking
whatever order they are held or answer in.

- **Exact**: one ``IndexFlatIP`` per shard. The global top-k is inside the union of the shards' top-k, so the merge
  returns the single flat index's top-k, up to the order of labels whose scores tie (``index/ties.py``:
  ``rankings_agree`` is how the tests compare them).
- **Approximate**: HNSW (or IVF) per shard, each searched with the index's efSearch (nprobe); the merge is exact over
  the shards' answers, so a label is missed only where its own shard's graph misses it. A shard is smaller than
  the whole, so at one efSearch the sharded index recalls at least about what one index over all labels does, at
  the cost of one search per shard.

Why not ``faiss.IndexShards``: it merges by score alone (its heap decides the order of ties) and holds every shard
as one faiss object in one process; xc's shards keep ``LabelIndex``'s manifest, checksum and staleness checks, and
each could be loaded by another process. ``threads > 1`` searches the shards on a thread pool (faiss releases the
GIL): a single query's shard searches then run side by side.

Saved as ``shard-NNNNN/`` folders (``LabelIndex.save``) and ``shards.json``, written last, naming each shard's
count and checksum; ``load`` refuses a folder whose shards do not match it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xc_core.index.ann import MANIFEST_VERSION, IndexConfig, IndexError_, LabelIndex

SHARDS_MANIFEST = "shards.json"


def merge_top_k(answers: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of the shards' answers (each ``(similarities, ids)`` of shape (n, k_shard), missing results
    id -1 at -inf), best first by similarity, ties by the lower id; missing results last."""
    scores = np.concatenate([np.asarray(s, dtype=np.float32) for s, _ in answers], axis=1)
    ids = np.concatenate([np.asarray(i, dtype=np.int64) for _, i in answers], axis=1)
    scores = np.where(ids < 0, -np.inf, scores)
    missing = ids < 0  # a missing result sorts after every real one, whatever its id
    order = np.lexsort((ids, missing, -scores), axis=-1)[:, :k]
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(ids, order, axis=1)


@dataclass
class ShardedIndex:
    shards: list[LabelIndex]
    threads: int = 1  # >1: shards searched on a thread pool (made on the first search, kept)
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, parts: Iterable[tuple[np.ndarray, np.ndarray]], cfg: IndexConfig | None = None,
              model_uri: str = "", dataset: str = "", threads: int = 1) -> ShardedIndex:
        """One :class:`LabelIndex` of ``cfg`` per ``(vectors, ids)`` part (e.g. ``embedding.iter_shards(folder)``:
        one shard's vectors in memory at a time); ids must not repeat across parts."""
        cfg = cfg or IndexConfig()
        shards = [LabelIndex.build(np.asarray(vectors, dtype=np.float32), np.asarray(ids, dtype=np.int64), cfg,
                                   model_uri, dataset) for vectors, ids in parts if len(ids)]
        if not shards:
            raise IndexError_("no vectors to index: every part is empty")
        index = cls(shards, threads)
        index._check()
        return index

    def _check(self) -> None:
        import faiss

        dims = {s.dim for s in self.shards}
        if len(dims) != 1:
            raise IndexError_(f"shards of different dimensions: {sorted(dims)}")
        ids = np.concatenate([faiss.vector_to_array(s.index.id_map) for s in self.shards])
        if len(np.unique(ids)) != len(ids):
            raise IndexError_("a label id is in more than one shard: shards must split the labels")

    @property
    def dim(self) -> int:
        return self.shards[0].dim

    @property
    def cfg(self) -> IndexConfig:
        return self.shards[0].cfg

    @property
    def count(self) -> int:
        return sum(s.count for s in self.shards)

    def set_ef_search(self, ef_search: int) -> None:
        for shard in self.shards:
            shard.set_ef_search(ef_search)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(similarities, label ids), best first, as ``LabelIndex.search`` answers: min(k, count) columns."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = min(k, max(self.count, 1))
        if self.threads > 1 and len(self.shards) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(min(self.threads, len(self.shards)), thread_name_prefix="xc-shard")
            answers = list(self._pool.map(lambda s: s.search(queries, k), self.shards))
        else:
            answers = [s.search(queries, k) for s in self.shards]
        return merge_top_k(answers, k)

    # -- persistence ---------------------------------------------------------------------------
    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SHARDS_MANIFEST).unlink(missing_ok=True)  # the old set is void while the new one is written
        entries = []
        for i, shard in enumerate(self.shards):
            shard.save(folder / f"shard-{i:05d}")
            manifest = json.loads((folder / f"shard-{i:05d}" / "manifest.json").read_text())
            entries.append({"folder": f"shard-{i:05d}", "count": shard.count, "sha256": manifest["sha256"]})
        top = {"version": MANIFEST_VERSION, "kind": self.cfg.kind, "dimension": self.dim, "count": self.count,
               "model_uri": self.shards[0].model_uri, "dataset": self.shards[0].dataset, "shards": entries,
               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        tmp = folder / f".{SHARDS_MANIFEST}.tmp-{os.getpid()}"
        tmp.write_text(json.dumps(top, indent=2) + "\n")
        os.replace(tmp, folder / SHARDS_MANIFEST)
        return folder

    @classmethod
    def load(cls, folder: Path, expect_model_uri: str | None = None, expect_dataset: str | None = None,
             threads: int = 1) -> ShardedIndex:
        """Every shard through ``LabelIndex.load`` (its checksum, model and data set checked), each matching the
        count and checksum ``shards.json`` recorded for it."""
        path = folder / SHARDS_MANIFEST
        if not path.exists():
            raise IndexError_(f"{folder}: no {SHARDS_MANIFEST} (an unfinished or foreign sharded index); rebuild it")
        try:
            top = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise IndexError_(f"{path}: corrupt manifest ({exc}); rebuild it") from exc
        shards = []
        for entry in top["shards"]:
            shard = LabelIndex.load(folder / entry["folder"], expect_model_uri, expect_dataset)
            recorded = json.loads((folder / entry["folder"] / "manifest.json").read_text())["sha256"]
            if shard.count != entry["count"] or recorded != entry["sha256"]:
                raise IndexError_(f"{folder / entry['folder']}: not the shard {SHARDS_MANIFEST} names (count "
                                  f"{shard.count} vs {entry['count']}, or another file); rebuild the index")
            shards.append(shard)
        index = cls(shards, threads)
        if index.count != top["count"]:
            raise IndexError_(f"{folder}: shards hold {index.count} labels, {SHARDS_MANIFEST} says {top['count']}")
        return index
