"""The fused search's shortlist: the union, per query, of the candidate ids each channel proposes (label index,
classifier index, lexical top labels); ``fusion.py`` and ``lexical.py`` both build on it."""

from __future__ import annotations

import numpy as np


def union_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, the ids of ``a`` ∪ ``b``; duplicates and misses become −1 (order irrelevant)."""
    ids = np.sort(np.concatenate([a, b], axis=1), axis=1)
    ids[:, 1:][ids[:, 1:] == ids[:, :-1]] = -1
    return ids
