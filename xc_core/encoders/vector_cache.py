"""Encodings read back instead of computed again: a content-addressed store of ``TextEncoder.encode`` results.

One pipeline run encodes the same texts with the same weights many times over: every trained method's first
validation ranks the validation rows with the starting encoder; ``ramen``'s test against ``dual_encoder`` ranks them
with the weights ``dual_encoder`` served, which its own validation already encoded; a ``-clf`` method's classifier
stage and its label index encode the labels and the test queries with an encoder that is a byte copy of its base's,
whose label index encoded the same lists. A call is keyed by everything its output depends on — every weight and
buffer of the model, the tokenizer's definition, the encoder's settings, the texts in their order, torch's version,
the device and the thread count — so a key met again is the same computation, and its stored result is what it would
produce (the same list in the same order batches the same way, so the vectors are the same bit for bit).

Small calls are never stored: hashing the weights (~0.08 s for MiniLM's 90 MB on 2 cores, about what encoding 50
short texts costs) must stay a small share of the call it may save, and a server's query batches never repeat. The
store keeps at most ``limit_bytes``; the least recently read files go first. Files are written whole (a temporary
name, then a rename), so parallel workers of one home never read half a file; a file that does not load as the
expected shape is encoded again and replaced.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: calls with fewer texts are encoded, never stored (the key's weight hash costs ~10% of encoding this many)
MIN_CACHED_TEXTS = 512
#: what the store keeps at most (a 1M-label catalogue's vectors at 384 dimensions are 1.5 GB)
DEFAULT_LIMIT_BYTES = 4 << 30


def weights_digest(encoder: Any) -> str:
    """A hash of every tensor of a ``TextEncoder``'s model state and tower (names, dtypes, shapes, values) and of its
    tokenizer (typed ``Any``: ``text.py`` imports this module, never the other way round)."""
    import torch

    digest = hashlib.sha256()
    tower = getattr(encoder, "tower", None)  # the trainable tower beside the transformer (tower.py)
    state = {**encoder.model.state_dict(), **({f"xc_tower.{k}": v for k, v in tower.state_dict().items()}
                                               if tower is not None else {})}
    for name, tensor in state.items():
        value = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}\0{value.dtype}\0{tuple(value.shape)}\0".encode())
        # bf16 has no numpy dtype: its bytes are hashed as int16
        raw = value.view(torch.int16) if value.dtype == torch.bfloat16 else value
        digest.update(memoryview(raw.numpy()).cast("B"))
    backend = getattr(encoder.tokenizer, "backend_tokenizer", None)
    tokenizer = (_definition(backend.to_str()) if backend is not None
                 else repr(sorted(encoder.tokenizer.get_vocab().items())))
    digest.update(f"{type(encoder.tokenizer).__name__}\0{tokenizer}".encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=16)
def _definition(backend_json: str) -> str:
    """A fast tokenizer's definition without the truncation and padding each call sets on it: the same tokenizer
    hashes alike before and after its first call (the call's own settings are in the keys that need them). Kept
    per process: re-serialising a 30k-token vocabulary sorted took most of a small encode call's key."""
    import json

    found = json.loads(backend_json)
    found.pop("truncation", None)
    found.pop("padding", None)
    return json.dumps(found, sort_keys=True)


class VectorCache:
    """The store in ``folder``: ``<key>.npy`` per encode call."""

    def __init__(self, folder: Path, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        self.folder, self.limit_bytes = Path(folder), limit_bytes

    @staticmethod
    def key(encoder: Any, texts: list[str]) -> str:
        import torch

        digest = hashlib.sha256(weights_digest(encoder).encode())
        settings = encoder.cfg.model_dump(exclude={"model_path"})  # the folder's name is not its content
        digest.update(f"{sorted(settings.items())}\0{torch.__version__}\0{encoder.device}\0"
                      f"{torch.get_num_threads()}\0{len(texts)}\0".encode())
        for text in texts:
            digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
        return digest.hexdigest()[:32]

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.npy"

    def load(self, key: str, rows: int, dim: int) -> np.ndarray | None:
        """The stored vectors of ``key`` (their file marked as just read), or None when absent or unreadable."""
        path = self.path(key)
        try:
            vectors = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None
        if vectors.shape != (rows, dim) or vectors.dtype != np.float32:
            return None
        os.utime(path)
        return vectors

    def save(self, key: str, vectors: np.ndarray) -> None:
        """Store ``vectors`` under ``key`` (never more than the limit: larger results are not kept), then drop the
        least recently read files while the store holds more than the limit."""
        if vectors.nbytes > self.limit_bytes:
            return
        partial = self.folder / f".{key}.{os.getpid()}.partial.npy"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            np.save(partial, vectors)
            os.replace(partial, self.path(key))
        except OSError as err:  # a full or read-only disk costs the reuse, never the result
            log.warning("vector cache: could not store %s (%s): the vectors are used, not kept; check that %s is a "
                        "writable folder, or delete it", self.path(key), err, self.folder)
            with contextlib.suppress(OSError):  # no partial file, or no folder to hold one
                partial.unlink(missing_ok=True)
            return
        self._evict()

    def _evict(self) -> None:
        files = []
        for path in self.folder.glob("*.npy"):
            try:
                stat = path.stat()
            except FileNotFoundError:  # removed by a parallel worker
                continue
            files.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total <= self.limit_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
