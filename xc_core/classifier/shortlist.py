"""The fused search's shortlist: the union, per query, of the candidate ids each channel proposes (label index,
classifier index, lexical top labels); ``fusion.py`` and ``lexical.py`` both build on it."""

from __future__ import annotations

import numpy as np


def union_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, the ids of ``a`` ∪ ``b``; duplicates and misses become −1 (order irrelevant)."""
    ids = np.sort(np.concatenate([a, b], axis=1), axis=1)
    ids[:, 1:][ids[:, 1:] == ids[:, :-1]] = -1
    return ids


def scores_on(ids: np.ndarray, scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """A channel's ``scores`` of its own top ``ids`` looked up for every ``candidates`` entry (0 where the channel
    did not list it, and on −1 pads): (rows, candidates)."""
    out = np.zeros(candidates.shape, np.float32)
    for row in range(len(candidates)):
        found = ids[row] >= 0
        own, values = ids[row][found], scores[row][found]
        if not len(own):
            continue
        order = np.argsort(own, kind="stable")
        own, values = own[order], values[order]
        at = np.minimum(np.searchsorted(own, candidates[row]), len(own) - 1)
        out[row] = np.where((candidates[row] >= 0) & (own[at] == candidates[row]), values[at], 0.0)
    return out
