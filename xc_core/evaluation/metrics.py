"""Extreme-classification metrics over scipy sparse matrices, with pyxclib's definitions.

The definitions are those of pyxclib's ``xclib/evaluation/xc_metrics.py`` (propensities from
Jain, Prabhu & Varma, KDD 2016), computed with array operations over CSR matrices (no per-row Python
loop). Notation for test row ``i`` of ``n``:

* ``y_i``: its positive labels, the stored non-zero entries of ``y_true`` (values are ignored);
* ``t_i1 … t_ik``: its top-k predicted labels (see *Ranking*); ``h_ij = 1`` if ``t_ij ∈ y_i`` else 0;
* ``w_l``: the inverse propensity of label ``l`` (:func:`inverse_propensity`);
  ``w*_i1 ≥ w*_i2 ≥ …``: the weights of ``y_i`` sorted in decreasing order, padded with zeros;
* ``d_j = 1 / log2(j + 1)``: the DCG discount of rank ``j``; ``IDCG(m) = Σ_{j≤m} d_j`` and
  ``I_ik = IDCG(min(|y_i|, k))``, the DCG of a ranking that puts ``min(|y_i|, k)`` positives first.

Then::

    P@k      = 1/n Σ_i Σ_{j≤k} h_ij / k
    nDCG@k   = 1/n Σ_i Σ_{j≤k} h_ij d_j / I_ik
    R@k      = 1/n Σ_i Σ_{j≤k} h_ij / |y_i|
    PSP@k    = Σ_i Σ_{j≤k} h_ij w_{t_ij}        /  Σ_i Σ_{j≤k} w*_ij
    PSnDCG@k = Σ_i Σ_{j≤k} h_ij w_{t_ij} d_j / I_ik  /  Σ_i Σ_{j≤k} w*_ij d_j / I_ik

PSP and PSnDCG are ratios of totals over all rows, not means of per-row ratios: pyxclib divides the
row mean of the weighted metric by the row mean of its best achievable value (``_precision(...) /
_precision(...)``, ``_ndcg(...) / _ndcg(...)``), and the 1/n cancels.

Rows without positives score 0 in every numerator and stay in ``n`` (pyxclib's default,
``remove_invalid=False``): they lower P, nDCG and R. For PSP and PSnDCG they add 0 to both totals,
so they change nothing. A total denominator of 0 (no positives at all) gives 0.0 (pyxclib: nan).

Ranking: every stored entry of ``y_score`` is a candidate, whatever its value (explicit zeros and
negative scores are ranked, as pyxclib's ``topk`` does); labels without an entry are never predicted.
Candidates are ordered by score, highest first, ties broken by the lower label index. pyxclib leaves
ties to numpy's ``argsort`` (lower index first in its Cython ``topk``, higher first in its numba one),
so on tied scores its numbers depend on its version; ours do not. A row with fewer than ``k``
candidates is padded with ``-1``, which is never a hit and weighs 0 (pyxclib pads with a dummy label):
the missing slots still count in ``P@k``'s ``1/k``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import DEFAULT_PSP, XCDataset

#: Inverse-propensity constants (A, B) per data-set family, as Jain et al. 2016 fit them and pyxclib
#: documents them; :func:`inverse_propensity` defaults to ``"other"``.
PROPENSITY_CONSTANTS: dict[str, tuple[float, float]] = {
    "wikipedia": (0.5, 0.4),
    "amazon": (0.6, 2.6),
    "other": DEFAULT_PSP,
}

#: Metric families in the order :func:`evaluate` reports them.
METRIC_NAMES = ("P", "nDCG", "PSP", "PSnDCG", "R")

#: Label index that pads the top-k of rows with fewer than k candidates.
PAD = -1

#: (row, rank) cells that :func:`top_k` and :func:`evaluate` hold per array at once (16 MB of int64):
#: rows go through in chunks, which bounds memory and keeps the working arrays reused.
CHUNK_CELLS = 1 << 21


@dataclass(frozen=True)
class MetricTerms:
    """Per-row terms of one metric family at ranks 1..k.

    Over a set of rows R, ``metric@j = numerator[R, j-1].sum() / denominator[R, j-1].sum()``.
    ``numerator`` is (n, k); ``denominator`` is (n, k), or (n, 1) of ones for the plain means
    (P, nDCG, R), where the total is the number of rows.
    """

    numerator: np.ndarray
    denominator: np.ndarray


def positive_labels(y_true: sp.spmatrix) -> sp.csr_matrix:
    """A canonical CSR copy of ``y_true`` with one entry of 1.0 per positive (non-zero) (row, label)."""
    positives = sp.csr_matrix(y_true, dtype=np.float64, copy=True)
    positives.sum_duplicates()
    positives.eliminate_zeros()
    positives.data[:] = 1.0
    return positives


def inverse_propensity(y_train: sp.spmatrix, A: float = DEFAULT_PSP[0], B: float = DEFAULT_PSP[1]) -> np.ndarray:
    """Inverse propensity per label, ``w_l = 1 + C (N_l + B)^-A`` with ``C = (ln N - 1)(B + 1)^A``.

    ``N`` is the number of training points (rows of ``y_train``), ``N_l`` the number of training points
    with label ``l`` among their positives. ``A``, ``B`` per data-set family: see
    :data:`PROPENSITY_CONSTANTS` (Wikipedia-like 0.5/0.4, Amazon-like 0.6/2.6, otherwise 0.55/1.5).

    Args:
        y_train: the training documents × labels matrix (a positive is any stored non-zero).
        A: the propensity model's exponent.
        B: its offset.

    Returns:
        One weight ≥ 1 per label (rarer labels weigh more).

    Raises:
        ValueError: ``y_train`` has no row.
    """
    n_points = y_train.shape[0]
    if n_points < 1:
        raise ValueError("inverse_propensity needs at least one training point")
    frequency = np.bincount(positive_labels(y_train).indices, minlength=y_train.shape[1])
    C = (np.log(n_points) - 1.0) * (B + 1.0) ** A
    return 1.0 + C * (frequency + B) ** (-A)


def propensity(dataset: XCDataset) -> np.ndarray:
    """:func:`inverse_propensity` of a data set's training labels, with its own PSP constants."""
    return inverse_propensity(dataset.y_train, *dataset.psp_constants)


def _score_digits(values: np.ndarray) -> list[np.ndarray]:
    """32-bit digits (int64 in [0, 2^32), most significant first) ordering scores highest first.

    Comparing the digit lists lexicographically is comparing the scores, descending; equal scores
    (including -0.0 and 0.0) get equal digits. float32 (and narrower) scores give one digit, others are
    compared as float64 and give two.
    """
    narrow = values.dtype.kind == "f" and values.dtype.itemsize <= 4
    values = values.astype(np.float32 if narrow else np.float64) + 0  # -0.0 + 0 is +0.0: the zeros tie
    bits, int_type = (values.view(np.int32), np.int32) if narrow else (values.view(np.int64), np.int64)
    # IEEE-754 bit patterns order like the floats once the magnitude bits of negatives are flipped; ~ reverses.
    width = 8 * values.dtype.itemsize
    descending = ~(bits ^ ((bits >> (width - 1)) & int_type(np.iinfo(int_type).max)))
    if narrow:
        return [descending.astype(np.int64) + (1 << 31)]
    unsigned = descending.view(np.uint64) ^ np.uint64(1 << 63)
    return [(unsigned >> np.uint64(32)).astype(np.int64), (unsigned & np.uint64(0xFFFFFFFF)).astype(np.int64)]


def _sort_rows(digits: list[np.ndarray], valid: np.ndarray) -> np.ndarray:
    """(r, w) positions ordering each row by its digits, then position; invalid slots last.

    An LSD radix sort with one dense row-wise sort per digit, least significant first. Each key packs
    ``digit << position_bits | current position``: keys are unique, so the fast unstable ``np.sort``
    behaves like a stable sort and equal scores keep their position order (the label order).
    """
    width = valid.shape[1]
    position_bits = max(1, (width - 1).bit_length())
    mask, pad = (1 << position_bits) - 1, 1 << (32 + position_bits)  # pads sort after any digit
    slots = np.arange(width, dtype=np.int64)
    order: np.ndarray | None = None
    for digit in reversed(digits):
        current = digit if order is None else np.take_along_axis(digit, order, axis=1)
        key = np.where(valid, current << position_bits, pad) | slots
        key.sort(axis=1)
        key &= mask
        order = key if order is None else np.take_along_axis(order, key, axis=1)
    assert order is not None  # _score_digits gives one or two digits
    return order


def _row_buckets(lengths: np.ndarray) -> list[np.ndarray]:
    """Non-empty rows grouped by the bit length of their entry count (lengths within a factor 2)."""
    bucket = np.frexp(lengths)[1]  # the bit length: 0 for empty rows
    order = np.argsort(bucket, kind="stable")
    edges = np.flatnonzero(np.diff(bucket[order])) + 1
    return [rows for rows in np.split(order, edges) if len(rows) and bucket[rows[0]] > 0]


def top_k(y_score: sp.spmatrix, k: int) -> np.ndarray:
    """The k best-scored labels of each row, best first: an (n, k) int64 array padded with -1.

    Ties go to the lower label index; only stored entries are candidates (see the module docstring).
    Rows are sorted as dense blocks of rows with similar entry counts (one block per power of two,
    so padding at most doubles the work), not one Python iteration per row.

    Args:
        y_score: (rows, labels) scores; duplicates are summed, explicit zeros are candidates.
        k: labels per row, at least 1.

    Returns:
        (rows, k) label indices, best first, -1 where a row has fewer than k stored entries.

    Raises:
        ValueError: ``k < 1`` or a score is NaN.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    scores = sp.csr_matrix(y_score)
    if not scores.has_canonical_format:
        scores = scores.copy()
        scores.sum_duplicates()
    if np.isnan(scores.data).any():
        raise ValueError("y_score holds NaN scores")
    lengths = np.diff(scores.indptr)
    top = np.full((scores.shape[0], k), PAD, dtype=np.int64)
    for bucket in _row_buckets(lengths):
        width = int(lengths[bucket].max())
        for rows in np.array_split(bucket, -(-len(bucket) * width // CHUNK_CELLS)):
            _top_k_block(scores, rows, width, top)
    return top


def _top_k_block(scores: sp.csr_matrix, rows: np.ndarray, width: int, top: np.ndarray) -> None:
    """Fill ``top[rows]`` from a dense (rows, width) block of their entries (width ≥ each row's length)."""
    valid = np.arange(width) < np.diff(scores.indptr)[rows, None]
    entry = np.minimum(scores.indptr[rows, None] + np.arange(width), scores.nnz - 1)
    order = _sort_rows(_score_digits(scores.data[entry]), valid)[:, :top.shape[1]]
    best = np.take_along_axis(entry, order, axis=1)
    top[rows, :order.shape[1]] = np.where(np.take_along_axis(valid, order, axis=1), scores.indices[best], PAD)


def filter_predictions(y_score: sp.spmatrix, pairs: np.ndarray) -> sp.csr_matrix:
    """``y_score`` without the stored entries at the given (row, label) pairs.

    The Extreme Classification Repository's ``filter_labels_test.txt`` convention: reciprocal pairs
    (a test point whose own article is a label) are removed from the predictions before scoring.
    ``pairs`` is (m, 2) of (row, label); pairs without a stored entry are ignored. The entries are
    removed from the structure (not set to zero), so they can never be ranked.
    """
    scores = sp.csr_matrix(y_score)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    n_rows, n_labels = scores.shape
    if len(pairs) and (pairs.min() < 0 or pairs[:, 0].max() >= n_rows or pairs[:, 1].max() >= n_labels):
        raise ValueError(f"filter pairs point outside the {scores.shape} score matrix")
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(scores.indptr))
    keep = ~np.isin(rows * n_labels + scores.indices, pairs[:, 0] * n_labels + pairs[:, 1])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=n_rows))])
    return sp.csr_matrix((scores.data[keep], scores.indices[keep], indptr), shape=scores.shape)


def to_csr(scores: np.ndarray, ids: np.ndarray, n_labels: int) -> sp.csr_matrix:
    """(n, k) similarities and ids (−1 = none) as a CSR matrix of the same scores (a search's top-k, scorable)."""
    rows = np.repeat(np.arange(len(ids)), ids.shape[1])
    keep = ids.ravel() >= 0
    return sp.csr_matrix((scores.ravel()[keep].astype(np.float32), (rows[keep], ids.ravel()[keep])),
                         shape=(len(ids), n_labels))


def _hits(positives: sp.csr_matrix, top: np.ndarray) -> np.ndarray:
    """(n, k) bool: ``top[i, j]`` is a positive of row ``i`` (``positives`` canonical)."""
    return PositiveKeys(positives).hits(top)


class PositiveKeys:
    """Each (row, label) positive of a canonical CSR truth as one sorted key, so that any ranking's hits are one
    ``searchsorted``: built once, it serves every ranking of the same rows."""

    def __init__(self, positives: sp.csr_matrix) -> None:
        self.n_rows, self.n_labels = positives.shape
        rows = np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(positives.indptr))
        self.keys = rows * self.n_labels + positives.indices  # increasing: canonical CSR is sorted by (row, label)

    def hits(self, top: np.ndarray) -> np.ndarray:
        """(n, k) bool: ``top[i, j]`` (−1: none) is a positive of row ``i``."""
        if top.shape[0] != self.n_rows:
            raise ValueError(f"top has {top.shape[0]} rows, y_true {self.n_rows}")
        if len(self.keys) == 0:
            return np.zeros(top.shape, dtype=bool)
        query = np.arange(self.n_rows, dtype=np.int64)[:, None] * self.n_labels + top
        found = np.minimum(np.searchsorted(self.keys, query), len(self.keys) - 1)
        return (top >= 0) & (self.keys[found] == query)


def hit_matrix(y_true: sp.spmatrix, top: np.ndarray) -> np.ndarray:
    """(n, k) bool: whether each of the top-k predicted labels (from :func:`top_k`) is a positive."""
    return _hits(positive_labels(y_true), top)


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0."""
    numerator, denominator = np.broadcast_arrays(numerator, denominator)
    return np.divide(numerator, denominator, out=np.zeros(numerator.shape), where=denominator > 0)


def _ideal_dcg(n_positives: np.ndarray, k: int) -> np.ndarray:
    """(n, k): ``I_ij = IDCG(min(|y_i|, j))`` for j = 1..k, 0 for rows without positives."""
    cumulative = np.cumsum(1.0 / np.log2(np.arange(1, k + 1) + 1.0))
    cut = np.minimum(n_positives[:, None], np.arange(1, k + 1)[None, :])
    return np.where(cut > 0, cumulative[np.maximum(cut - 1, 0)], 0.0)


def _best_weights(positives: sp.csr_matrix, inv_propensity: np.ndarray, k: int) -> np.ndarray:
    """(n, k): ``w*_ij``, each row's positive weights in decreasing order, zero-padded."""
    weighted = sp.csr_matrix((inv_propensity[positives.indices], positives.indices, positives.indptr),
                             shape=positives.shape)
    return np.append(inv_propensity, 0.0)[top_k(weighted, k)]


def _check_propensity(inv_propensity: np.ndarray, n_labels: int) -> np.ndarray:
    weights = np.asarray(inv_propensity, dtype=np.float64).ravel()
    if len(weights) != n_labels:
        raise ValueError(f"inv_propensity has {len(weights)} entries, expected one per label ({n_labels})")
    return weights


def ideal_weights(y_true: sp.spmatrix, inv_propensity: np.ndarray, k: int) -> np.ndarray:
    """(n, k): each row's positive weights ``w*_ij`` in decreasing order, zero-padded — the propensity-scored
    metrics' best reachable gains. They depend on the truth alone, so a caller scoring many rankings of the same rows
    (the fusion grid) computes them once and passes them to :func:`metric_terms`."""
    positives = positive_labels(y_true)
    return _best_weights(positives, _check_propensity(inv_propensity, positives.shape[1]), k)


def metric_terms(y_true: sp.spmatrix, top: np.ndarray, inv_propensity: np.ndarray | None = None,
                 best_gains: np.ndarray | None = None) -> dict[str, MetricTerms]:
    """Per-row terms of every metric family at ranks 1..k, k = ``top.shape[1]``.

    Keys: "P", "nDCG", "R", and "PSP", "PSnDCG" when ``inv_propensity`` is given. Aggregate them with
    :func:`aggregate` (definitions in the module docstring). ``best_gains``: :func:`ideal_weights` of the same rows
    and propensities at depth ≥ k, when the caller has them (else they are computed here).
    """
    positives = positive_labels(y_true)
    k = top.shape[1]
    hits = _hits(positives, top).astype(np.float64)
    n_positives = np.diff(positives.indptr)
    discount = 1.0 / np.log2(np.arange(1, k + 1) + 1.0)
    ideal = _ideal_dcg(n_positives, k)
    rows = np.ones((top.shape[0], 1))
    terms = {
        "P": MetricTerms(np.cumsum(hits, axis=1) / np.arange(1, k + 1), rows),
        "nDCG": MetricTerms(_safe_divide(np.cumsum(hits * discount, axis=1), ideal), rows),
        "R": MetricTerms(np.cumsum(hits, axis=1) / np.maximum(n_positives, 1)[:, None], rows),
    }
    if inv_propensity is not None:
        weights = _check_propensity(inv_propensity, positives.shape[1])
        gained = hits * np.append(weights, 0.0)[top]
        best = (best_gains[:, :k] if best_gains is not None and best_gains.shape[1] >= k
                else _best_weights(positives, weights, k))
        terms["PSP"] = MetricTerms(np.cumsum(gained, axis=1), np.cumsum(best, axis=1))
        terms["PSnDCG"] = MetricTerms(_safe_divide(np.cumsum(gained * discount, axis=1), ideal),
                                      _safe_divide(np.cumsum(best * discount, axis=1), ideal))
    return terms


def _totals(terms: dict[str, MetricTerms], rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per family, a (2, k) array: total numerator and total denominator over ``rows`` (default all)."""
    out = {}
    for name, term in terms.items():
        numerator, denominator = term.numerator, np.broadcast_to(term.denominator, term.numerator.shape)
        if rows is not None:
            numerator, denominator = numerator[rows], denominator[rows]
        out[name] = np.stack([numerator.sum(axis=0), denominator.sum(axis=0)])
    return out


def _ratios(totals: dict[str, np.ndarray]) -> dict[str, float]:
    """``{"P@1": …}`` from the totals, in :data:`METRIC_NAMES` order; 0.0 where a total is 0."""
    out: dict[str, float] = {}
    for name in (name for name in METRIC_NAMES if name in totals):
        values = np.clip(_safe_divide(totals[name][0], totals[name][1]), 0.0, 1.0)  # clip: rounding only
        out.update({f"{name}@{j}": float(v) for j, v in enumerate(values, start=1)})
    return out


def aggregate(terms: dict[str, MetricTerms], rows: np.ndarray | None = None) -> dict[str, float]:
    """``{"P@1": …, …}`` over all rows, or over ``rows`` (bool mask or indices); values in [0, 1].

    Each value is the total numerator over the total denominator of :class:`MetricTerms`; an empty set
    of rows or a zero total gives 0.0.
    """
    return _ratios(_totals(terms, rows))


def evaluate(y_true: sp.csr_matrix, y_score: sp.csr_matrix, k: int = 5,
             inv_propensity: np.ndarray | None = None) -> dict[str, float]:
    """P@1..k, nDCG@1..k, PSP@1..k, PSnDCG@1..k and R@1..k as fractions in [0, 1].

    The PS keys are present exactly when ``inv_propensity`` (one weight per label, e.g. from
    :func:`inverse_propensity` on the train labels) is given. Definitions, empty rows, ties: module
    docstring. Filter reciprocal pairs first with :func:`filter_predictions` where the data has them.
    Rows are summed in chunks of :data:`CHUNK_CELLS` cells; totals add up, so chunking changes nothing.

    Args:
        y_true: (queries, labels) positives; any stored non-zero entry is a positive.
        y_score: (queries, labels) scores of the same shape; only stored entries are candidates.
        k: the deepest rank scored (keys ``@1`` .. ``@k``).
        inv_propensity: one inverse propensity per label, or None for no PS metrics.

    Returns:
        ``{"P@1": …, "nDCG@1": …, "R@1": …, ["PSP@1": …, "PSnDCG@1": …]}`` for ranks 1..k, each in [0, 1].

    Raises:
        ValueError: the two matrices differ in shape, a score is NaN, or ``inv_propensity`` is not one weight
            per label.
    """
    if y_true.shape != y_score.shape:
        raise ValueError(f"y_true {y_true.shape} and y_score {y_score.shape} differ in shape")
    top, positives = top_k(y_score, k), positive_labels(y_true)
    step = max(1, CHUNK_CELLS // k)
    chunks = [_totals(metric_terms(positives[start:start + step], top[start:start + step], inv_propensity))
              for start in range(0, max(len(top), 1), step)]
    # chunks is never empty, so each sum is an array (not sum's start, 0)
    return _ratios({name: cast(np.ndarray, sum(chunk[name] for chunk in chunks)) for name in chunks[0]})


def _column(terms: MetricTerms, k: int) -> tuple[np.ndarray, np.ndarray]:
    return terms.numerator[:, k - 1], np.broadcast_to(terms.denominator, terms.numerator.shape)[:, k - 1]


def _first(top: np.ndarray, k: int) -> np.ndarray:
    if not 1 <= k <= top.shape[1]:
        raise ValueError(f"k={k} outside 1..{top.shape[1]} (columns of top)")
    return top[:, :k]


def precision_per_row(y_true: sp.spmatrix, top: np.ndarray, k: int) -> np.ndarray:
    """Per row: hits in the top k / k (the row mean is P@k)."""
    return _column(metric_terms(y_true, _first(top, k))["P"], k)[0]


def recall_per_row(y_true: sp.spmatrix, top: np.ndarray, k: int) -> np.ndarray:
    """Per row: hits in the top k / |y_i|, 0 without positives (the row mean is R@k)."""
    return _column(metric_terms(y_true, _first(top, k))["R"], k)[0]


def ndcg_per_row(y_true: sp.spmatrix, top: np.ndarray, k: int) -> np.ndarray:
    """Per row: DCG@k / IDCG(min(|y_i|, k)), 0 without positives (the row mean is nDCG@k)."""
    return _column(metric_terms(y_true, _first(top, k))["nDCG"], k)[0]


def psp_per_row(y_true: sp.spmatrix, top: np.ndarray, inv_propensity: np.ndarray,
                k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (propensity-weighted hits in the top k, best achievable weighted top k).

    PSP@k over any set of rows is the sum of the first over the sum of the second.
    """
    return _column(metric_terms(y_true, _first(top, k), inv_propensity)["PSP"], k)


def psp_numerator_per_row(y_true: sp.spmatrix, top: np.ndarray, inv_propensity: np.ndarray,
                          k: int) -> np.ndarray:
    """Per row: ``Σ_{j≤k} h_ij w_{t_ij}``, the propensity-weighted hits in the top k."""
    return psp_per_row(y_true, top, inv_propensity, k)[0]


def psp_denominator_per_row(y_true: sp.spmatrix, inv_propensity: np.ndarray, k: int) -> np.ndarray:
    """Per row: ``Σ_{j≤k} w*_ij``, the largest weighted top k any ranking can reach."""
    return ideal_weights(y_true, inv_propensity, k).sum(axis=1)
