"""``python -m xc_core.classifier.xrlinear``: compile the hybrid channel's numba kernels into numba's on-disk cache
beside their modules, as ``make install`` does.

Without it, the first fit or search in a process that finds no cache compiles them (about 8 s of CPU on the
developers' machines), and on a fresh checkout every parallel test worker that reaches the channel first does so at
once. A changed kernel invalidates its cache entry, and the next process compiles it again.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.xrlinear.config import LinearConfig
from xc_core.classifier.xrlinear.model import LinearChannel


def compile_kernels(seed: int = 0) -> float:
    """Fit and search a small channel, which compiles (or loads) both kernels for the argument types a real fit and
    search pass them; the seconds it took."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choice(words, 4)) for _ in range(64)]
    vectors = rng.normal(size=(64, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    y = sp.csr_matrix((np.ones(64, np.float32), (np.arange(64), rng.integers(0, 24, 64))), shape=(64, 24))
    # two layers (leaves of ≤ 4 labels under 2-way splits): the search's pair kernel runs on both
    channel = LinearChannel.fit(texts, vectors, y, LinearConfig(max_leaf=4, branching=2, char_min_df=1))
    channel.search(texts, vectors, 5)
    return time.perf_counter() - started


def main() -> int:
    print(f"xc: the hybrid channel's kernels are compiled and cached ({compile_kernels():.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
