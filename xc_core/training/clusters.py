"""Negative-mining-aware batching (NGAME, used by RAMEN): batch whole clusters of similar documents so
in-batch negatives are hard. Balanced k-means over document embeddings; clusters are refreshed every
``refresh_every`` epochs and their size doubles every ``grow_every`` epochs (RAMEN Table 10: 5 and 25)."""

from __future__ import annotations

import numpy as np


def balanced_kmeans(x: np.ndarray, cluster_size: int, seed: int = 0, iterations: int = 5) -> np.ndarray:
    """Cluster id per row with every cluster of (almost) exactly ``cluster_size`` rows.

    Spherical k-means whose assignment step is balanced: points are assigned greedily in order of their
    preference margin to the best centroid that still has room. Vectorised per iteration except the
    greedy fill, which is one pass over the sorted (point, centroid) preferences.
    """
    n = len(x)
    k = max(1, int(np.ceil(n / cluster_size)))
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng(seed)
    centroids = x[rng.choice(n, k, replace=False)]
    capacity = np.full(k, cluster_size)
    assign = np.zeros(n, dtype=np.int64)
    for _ in range(iterations):
        scores = x @ centroids.T
        best = np.argsort(-scores, axis=1)[:, : min(k, 8)]  # top choices per point
        order = np.argsort(-scores[np.arange(n), best[:, 0]])  # confident points first
        room = capacity.copy()
        assign[:] = -1
        for i in order:
            for c in best[i]:
                if room[c] > 0:
                    assign[i] = c
                    room[c] -= 1
                    break
        unplaced = np.flatnonzero(assign < 0)
        for i in unplaced:  # rare: all top choices full
            c = int(np.flatnonzero(room > 0)[0])
            assign[i] = c
            room[c] -= 1
        for c in range(k):
            members = x[assign == c]
            if len(members):
                mean = members.mean(axis=0)
                centroids[c] = mean / max(np.linalg.norm(mean), 1e-12)
    return assign


def cluster_batches(assign: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Batches made of whole clusters in random order, split to ``batch_size`` rows."""
    order = np.concatenate([np.flatnonzero(assign == c) for c in rng.permutation(np.unique(assign))])
    return [order[i: i + batch_size] for i in range(0, len(order), batch_size)]


def random_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(n)
    return [order[i: i + batch_size] for i in range(0, n, batch_size)]


def cluster_size_at(epoch: int, initial: int, grow_every: int, max_size: int) -> int:
    """NGAME schedule: the cluster size doubles every ``grow_every`` epochs, capped at ``max_size``."""
    return int(min(max_size, initial * 2 ** (epoch // max(grow_every, 1))))
