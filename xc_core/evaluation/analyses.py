"""Analyses behind the papers' tables: bootstrap intervals, label-frequency quantiles, FN@k, subsets.

* Bootstrap (percentile) confidence intervals over test rows, for plain means (P@k, R@k) and for
  ratios of totals (PSP@k), and a paired bootstrap for champion–challenger differences.
* Equi-voluminous label quantiles by train frequency and each quantile's share of P@k / R@k
  (RAMEN, App. D.1), false negatives per quantile FN@k and DIFF@k (RAMEN, Table 8).
* Metrics on subsets: seen vs novel queries, novel labels only (IRENE), query-frequency deciles.
* The seen-label view: the metrics with predictions restricted to labels that have a training positive (all
  a linear one-vs-all peer can score), and the share of test positives on the other labels.

Pure functions over numpy / scipy sparse; tables come back as polars DataFrames, one row per bin.
Metric definitions, empty rows and tie-breaks are those of :mod:`xc_core.evaluation.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:  # the tables are polars frames; imported where built, so training never loads polars
    import polars as pl

from xc_core.evaluation.metrics import (
    aggregate,
    evaluate,
    hit_matrix,
    metric_terms,
    positive_labels,
    top_k,
)

#: Resampled row indices held in memory at once (8M int64 = 64 MB); bounds the bootstrap's memory.
BOOTSTRAP_CHUNK = 1 << 23

#: The per-row metrics :func:`per_row_metrics` returns, as (family, k); PSP comes as numerator and
#: denominator because PSP@k is a ratio of totals.
PER_ROW_METRICS: tuple[tuple[str, int], ...] = (("P", 1), ("P", 5), ("R", 10), ("PSP", 1), ("PSP", 5))

#: FN@k cut-offs of RAMEN's Table 8.
FN_CUTOFFS = (5, 10, 20, 50, 100)


# -- bootstrap ----------------------------------------------------------------------------------


def _resampled(statistic: Callable[..., np.ndarray], arrays: tuple[np.ndarray, ...], n_boot: int,
               seed: int) -> np.ndarray:
    """``statistic(*arrays resampled, axis=-1)`` on ``n_boot`` paired resamples of the rows: (n_boot,) values.

    ``scipy.stats.bootstrap`` draws the resamples (rows with replacement, the same rows for every array),
    in batches of at most :data:`BOOTSTRAP_CHUNK` indices; its percentile interval is
    :func:`_interval`'s, which is also used on the distribution for the p-value below.
    """
    n_rows = len(arrays[0])
    if n_rows < 1:
        raise ValueError("bootstrap needs at least one row")
    if n_rows == 1:  # every resample is the one row (scipy asks for two)
        return np.repeat(statistic(*(a[None, :] for a in arrays), axis=-1), n_boot)
    from scipy import stats

    result = stats.bootstrap(arrays, statistic, paired=True, vectorized=True, n_resamples=n_boot,
                             batch=max(1, BOOTSTRAP_CHUNK // n_rows), method="percentile",
                             rng=np.random.default_rng(seed))
    return np.asarray(result.bootstrap_distribution, dtype=np.float64)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    return np.divide(numerator, denominator, out=np.zeros(np.shape(numerator)), where=denominator > 0)


def _mean(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return values.mean(axis=axis)


def _ratio_of_sums(numerator: np.ndarray, denominator: np.ndarray, axis: int = -1) -> np.ndarray:
    return _ratio(numerator.sum(axis=axis), denominator.sum(axis=axis))


def _interval(resampled: np.ndarray, alpha: float) -> tuple[float, float]:
    low, high = np.quantile(resampled, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def bootstrap_ci(per_row: np.ndarray, n_boot: int = 1000, seed: int = 0,
                 alpha: float = 0.05) -> tuple[float, float, float]:
    """(mean, low, high): the row mean and its percentile-bootstrap (1 - alpha) interval.

    For metrics that are means of per-row values (P@k, nDCG@k, R@k); rows resampled with replacement.
    """
    values = np.asarray(per_row, dtype=np.float64)
    resampled = _resampled(_mean, (values,), n_boot, seed)
    return (float(values.mean()), *_interval(resampled, alpha))


def bootstrap_ratio_ci(numerator: np.ndarray, denominator: np.ndarray, n_boot: int = 1000, seed: int = 0,
                       alpha: float = 0.05) -> tuple[float, float, float]:
    """(Σ numerator / Σ denominator, low, high) with a percentile-bootstrap interval of that ratio.

    For ratio-of-totals metrics such as PSP@k (:func:`per_row_metrics` gives the per-row terms): each
    resample recomputes the ratio of its own totals (0 when its denominator total is 0).
    """
    num, den = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    resampled = _resampled(_ratio_of_sums, (num, den), n_boot, seed)
    return (float(_ratio(num.sum(), den.sum())), *_interval(resampled, alpha))


def _paired(observed: float, resampled: np.ndarray, alpha: float) -> tuple[float, float, float, float]:
    """(difference, low, high, two-sided p) from the resampled differences.

    The p-value tests "no difference" with the shifted bootstrap: ``resampled - observed`` stands for
    the null distribution, and ``p = (1 + #{|resampled - observed| ≥ |observed|}) / (1 + n_boot)``.
    """
    extreme = np.count_nonzero(np.abs(resampled - observed) >= abs(observed))
    return (observed, *_interval(resampled, alpha), float((1 + extreme) / (1 + len(resampled))))


def paired_bootstrap_diff(per_row_a: np.ndarray, per_row_b: np.ndarray, n_boot: int = 1000, seed: int = 0,
                          alpha: float = 0.05) -> tuple[float, float, float, float]:
    """(mean(a) - mean(b), low, high, two-sided p) over the same rows scored by systems a and b.

    Both systems are resampled with the same rows (paired). The interval is the percentile interval of
    the resampled differences; the two-sided p-value of "no difference" uses the shifted bootstrap,
    ``p = (1 + #{|resampled - observed| ≥ |observed|}) / (1 + n_boot)`` (1.0 for identical systems).
    """
    a, b = np.asarray(per_row_a, dtype=np.float64), np.asarray(per_row_b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in shape: {a.shape} vs {b.shape}")
    difference = a - b
    resampled = _resampled(_mean, (difference,), n_boot, seed)
    return _paired(float(difference.mean()), resampled, alpha)


def paired_bootstrap_ratio_diff(numerator_a: np.ndarray, denominator_a: np.ndarray, numerator_b: np.ndarray,
                                denominator_b: np.ndarray, n_boot: int = 1000, seed: int = 0,
                                alpha: float = 0.05) -> tuple[float, float, float, float]:
    """(ratio(a) - ratio(b), low, high, two-sided p) for ratio-of-totals metrics such as PSP@k.

    Each resample recomputes both systems' ratios of totals on the same rows; interval and p-value as
    in :func:`paired_bootstrap_diff`.
    """
    num_a, den_a, num_b, den_b = (np.asarray(x, dtype=np.float64)
                                  for x in (numerator_a, denominator_a, numerator_b, denominator_b))

    def difference(num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray,
                   axis: int = -1) -> np.ndarray:
        return _ratio_of_sums(num_a, den_a, axis=axis) - _ratio_of_sums(num_b, den_b, axis=axis)

    resampled = _resampled(difference, (num_a, den_a, num_b, den_b), n_boot, seed)
    return _paired(float(difference(num_a, den_a, num_b, den_b)), resampled, alpha)


def paired_metric_diff(rows_a: dict[str, np.ndarray], rows_b: dict[str, np.ndarray], metric: str,
                       alpha: float = 0.05, n_boot: int = 1000,
                       seed: int = 0) -> tuple[float, float, float, float] | None:
    """Paired bootstrap of ``metric`` (a − b) from two :func:`per_row_metrics` results on the same rows, as
    returned (ratio parts keyed ``PSP@k/numerator``) or as evaluation saves them in ``per_row.npz``
    (``PSP@k__numerator``: npz keys cannot hold "/"): a mean of per-row values (P@k, R@k) or a ratio of
    totals (PSP@k); None when either side lacks the metric."""
    if metric in rows_a and metric in rows_b:
        return paired_bootstrap_diff(rows_a[metric], rows_b[metric], n_boot, seed, alpha)
    for sep in ("/", "__"):
        num, den = f"{metric}{sep}numerator", f"{metric}{sep}denominator"
        if num in rows_a and num in rows_b:
            return paired_bootstrap_ratio_diff(rows_a[num], rows_a[den], rows_b[num], rows_b[den], n_boot, seed, alpha)
    return None


def per_row_metrics(y_true: sp.spmatrix, top: np.ndarray,
                    inv_propensity: np.ndarray | None = None, bins: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-row values for the confidence intervals of :data:`PER_ROW_METRICS`.

    ``top`` from :func:`top_k` with at least 10 columns. Keys "P@1", "P@5", "R@10" (row means give the
    metric) and, with ``inv_propensity``, "PSP@1/numerator", "PSP@1/denominator", "PSP@5/…" (ratio of
    the sums gives the metric: use :func:`bootstrap_ratio_ci`). With ``bins`` (:func:`label_quantiles`), also
    :data:`TAIL_P5`: each row's P@5 counting only hits on the tail bin's labels (its mean is bin 0's P@5 of
    :func:`quantile_contributions`), so a tail guard is a paired test over the same queries.
    """
    cut = max(k for _, k in PER_ROW_METRICS)
    if top.shape[1] < cut:
        raise ValueError(f"per_row_metrics needs top-{cut} predictions, got {top.shape[1]} columns")
    terms = metric_terms(y_true, top[:, :cut], inv_propensity)
    out: dict[str, np.ndarray] = {}
    for name, k in PER_ROW_METRICS:
        if name not in terms:
            continue
        if name == "PSP":
            out[f"PSP@{k}/numerator"] = terms[name].numerator[:, k - 1]
            out[f"PSP@{k}/denominator"] = terms[name].denominator[:, k - 1]
        else:
            out[f"{name}@{k}"] = terms[name].numerator[:, k - 1]
    if bins is not None:
        out[TAIL_P5] = metric_terms(tail_truth(y_true, bins), top[:, :5])["P"].numerator[:, 4]
    return out


#: the label-frequency bin a tail guard reads (:func:`label_quantiles`' bin 0: the rarest labels, and every label
#: without a training positive)
TAIL_BIN = 0
#: a metric counted only on the tail bin's labels is named with this prefix (``tail_P@5``)
TAIL_PREFIX = "tail_"
TAIL_P5 = f"{TAIL_PREFIX}P@5"


def tail_truth(y_true: sp.spmatrix, bins: np.ndarray) -> sp.csr_matrix:
    """``y_true`` keeping only the positives on labels of the tail bin (:data:`TAIL_BIN`): any metric scored
    against it counts the tail's hits only (``P@5`` against it is bin 0's share of P@5)."""
    truth = sp.csr_matrix(y_true, copy=True)
    truth.data = np.where(np.asarray(bins)[truth.indices] == TAIL_BIN, truth.data, 0).astype(truth.data.dtype)
    truth.eliminate_zeros()
    return truth


def confidence_intervals(per_row: dict[str, np.ndarray], n_boot: int = 1000, seed: int = 0,
                         alpha: float = 0.05) -> pl.DataFrame:
    """One row per metric of :func:`per_row_metrics`: metric, value, low, high."""
    records = []
    for key, values in per_row.items():
        if key.endswith("/denominator"):
            continue
        if key.endswith("/numerator"):
            metric = key.removesuffix("/numerator")
            value, low, high = bootstrap_ratio_ci(values, per_row[f"{metric}/denominator"], n_boot, seed, alpha)
        else:
            metric, (value, low, high) = key, bootstrap_ci(values, n_boot, seed, alpha)
        records.append({"metric": metric, "value": value, "low": low, "high": high})
    import polars as pl

    return pl.DataFrame(records, schema={"metric": pl.String, "value": pl.Float64, "low": pl.Float64,
                                         "high": pl.Float64})


# -- label-frequency quantiles (RAMEN App. D.1, Table 8) ----------------------------------------


def label_quantiles(y_train: sp.spmatrix, n_bins: int = 5) -> np.ndarray:
    """Bin per label, 0 = tail … n_bins - 1 = head: equi-voluminous quantiles of train frequency.

    Labels are sorted by train frequency (ascending, ties by label index) and cut so that each bin
    holds about 1/n_bins of all train positives: a label goes to the bin containing the midpoint of
    its share of the cumulative positives. A bin's total is off 1/n_bins by at most one label's
    frequency; a label heavier than a bin leaves the next bin empty. Labels never seen in train (and
    all labels when train has no positives) fall in bin 0.
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    frequency = np.bincount(positive_labels(y_train).indices, minlength=y_train.shape[1])
    order = np.argsort(frequency, kind="stable")
    mass = frequency[order].astype(np.float64)
    total = mass.sum()
    midpoint = np.cumsum(mass) - mass / 2
    sorted_bins = np.minimum((midpoint * n_bins / max(total, 1.0)).astype(np.int64), n_bins - 1)
    bins = np.empty(len(frequency), dtype=np.int64)
    bins[order] = sorted_bins
    return bins


def _hit_bins(y_true: sp.spmatrix, top: np.ndarray, bins: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every hit in ``top``: its row, its rank (0-based) and its label's bin."""
    rows, ranks = np.nonzero(hit_matrix(y_true, top))
    return rows, ranks, bins[top[rows, ranks]]


def quantile_contributions(y_true: sp.spmatrix, top: np.ndarray, bins: np.ndarray, k: int) -> pl.DataFrame:
    """Each bin's share of P@k and R@k: the metric counting only hits on labels of that bin.

    Columns: bin, labels (labels in the bin), positives (test positives on them), ``P@k`` =
    1/n Σ_i (hits of row i in the top k on the bin's labels) / k, ``R@k`` = 1/n Σ_i (same hits) / |y_i|.
    Summed over bins they give :func:`~xc_core.evaluation.metrics.evaluate`'s P@k and R@k.
    """
    n_rows, n_bins = top.shape[0], int(bins.max()) + 1
    rows, _, hit_bin = _hit_bins(y_true, top[:, :k], bins)
    n_positives = np.maximum(np.diff(positive_labels(y_true).indptr), 1)
    import polars as pl

    return pl.DataFrame({
        "bin": np.arange(n_bins),
        "labels": np.bincount(bins, minlength=n_bins),
        "positives": np.bincount(bins[positive_labels(y_true).indices], minlength=n_bins),
        f"P@{k}": np.bincount(hit_bin, minlength=n_bins) / (max(n_rows, 1) * k),
        f"R@{k}": np.bincount(hit_bin, weights=1.0 / n_positives[rows], minlength=n_bins) / max(n_rows, 1),
    })


def false_negatives_at_k(y_true: sp.spmatrix, top: np.ndarray, bins: np.ndarray,
                         ks: tuple[int, ...] = FN_CUTOFFS) -> pl.DataFrame:
    """FN@k per bin: test positives on the bin's labels that are not in their row's top k (counts).

    Columns: bin, positives, then ``FN@k`` for each k in ``ks``. ``top`` needs ≥ max(ks) columns
    (:func:`top_k` pads with -1, so a short prediction list is simply a miss).
    """
    cut = max(ks)
    if top.shape[1] < cut:
        raise ValueError(f"FN@{cut} needs top-{cut} predictions, got {top.shape[1]} columns")
    n_bins = int(bins.max()) + 1
    _, ranks, hit_bin = _hit_bins(y_true, top[:, :cut], bins)
    found = np.bincount(hit_bin * cut + ranks, minlength=n_bins * cut).reshape(n_bins, cut).cumsum(axis=1)
    positives = np.bincount(bins[positive_labels(y_true).indices], minlength=n_bins)
    import polars as pl

    return pl.DataFrame({"bin": np.arange(n_bins), "positives": positives}
                        | {f"FN@{k}": positives - found[:, k - 1] for k in ks})


def diff_at_k(fn_a: pl.DataFrame, fn_b: pl.DataFrame) -> pl.DataFrame:
    """DIFF@k = FN@k(a) - FN@k(b) per bin, for every FN@k column the two tables share.

    RAMEN's Table 8 puts the baseline as ``a`` and RAMEN as ``b``: a positive DIFF@k counts the
    positives ``b`` retrieves that ``a`` misses.
    """
    import polars as pl

    columns = [c for c in fn_a.columns if c.startswith("FN@") and c in fn_b.columns]
    joined = fn_a.select("bin", *columns).join(fn_b.select("bin", *columns), on="bin", suffix="_b")
    return joined.select("bin", *[(pl.col(c) - pl.col(f"{c}_b")).alias(c.replace("FN@", "DIFF@"))
                                  for c in columns]).sort("bin")


# -- subsets ------------------------------------------------------------------------------------


def _has_positive_in(y_true: sp.spmatrix, labels: np.ndarray) -> np.ndarray:
    positives = positive_labels(y_true)
    return np.asarray(positives[:, labels].sum(axis=1)).ravel() > 0


def subset_metrics(y_true: sp.spmatrix, y_score: sp.spmatrix, rows_mask: np.ndarray | None = None,
                   labels_mask: np.ndarray | None = None, k: int = 5, inv_propensity: np.ndarray | None = None,
                   label_mode: Literal["restrict", "rows_with"] = "restrict") -> dict[str, float]:
    """:func:`evaluate` on a subset of rows and/or labels, plus "rows": how many rows were counted.

    * ``rows_mask`` (bool per row), e.g. ``~test_novel`` / ``test_novel`` for seen vs novel queries:
      only those rows are scored (other rows are dropped, not counted as 0).
    * ``labels_mask`` (bool per label), e.g. ``label_novel``, with ``label_mode``:

      - ``"restrict"`` (IRENE's novel-only setting): both positives and predictions are restricted to
        the masked labels (other labels' entries are removed before ranking, so a masked label can
        move up), and only rows with at least one masked positive are counted;
      - ``"rows_with"`` (the generalised setting): all labels stay positives and predictions, but
        only rows with at least one masked positive are counted.

    Propensities are the full-data ones (indexed down to the kept labels). Ties keep the order of
    the original label indices.
    """
    rows = np.ones(y_true.shape[0], dtype=bool) if rows_mask is None else np.asarray(rows_mask, dtype=bool)
    weights = inv_propensity
    if labels_mask is not None:
        labels = np.flatnonzero(np.asarray(labels_mask, dtype=bool))
        rows = rows & _has_positive_in(y_true, labels)
        if label_mode == "restrict":
            y_true, y_score = sp.csr_matrix(y_true)[:, labels], sp.csr_matrix(y_score)[:, labels]
            weights = None if inv_propensity is None else np.asarray(inv_propensity)[labels]
        elif label_mode != "rows_with":
            raise ValueError(f"label_mode must be 'restrict' or 'rows_with', got {label_mode!r}")
    kept = np.flatnonzero(rows)
    scores = evaluate(sp.csr_matrix(y_true)[kept], sp.csr_matrix(y_score)[kept], k, weights)
    return scores | {"rows": float(len(kept))}


def decile_metrics(y_true: sp.spmatrix, y_score: sp.spmatrix, deciles: np.ndarray, k: int = 5,
                   inv_propensity: np.ndarray | None = None) -> pl.DataFrame:
    """:func:`evaluate`'s metrics per query decile: one row per distinct value of ``deciles``.

    ``deciles`` holds one group per row (e.g. ``XCDataset.test_decile``, 0 = head queries); every
    distinct value is a group, including a sentinel such as -1 for rows without one. Columns:
    decile, rows, then the metric keys. Each group is scored exactly as :func:`evaluate` would score
    its rows alone (PSP as the ratio of that group's totals).
    """
    groups = np.asarray(deciles)
    if len(groups) != y_true.shape[0]:
        raise ValueError(f"deciles has {len(groups)} entries, y_true {y_true.shape[0]} rows")
    terms = metric_terms(y_true, top_k(y_score, k), inv_propensity)
    records = [{"decile": int(d), "rows": int(np.count_nonzero(groups == d))} | aggregate(terms, groups == d)
               for d in np.unique(groups)]
    import polars as pl

    return pl.DataFrame(records)


# -- the seen-label view: what a linear one-vs-all peer can reach -------------------------------


def trained_labels(y_train: sp.spmatrix) -> np.ndarray:
    """Bool per label: it has at least one training positive (a stored non-zero entry in its column of
    ``y_train``). A linear one-vs-all model (PECOS) learns a weight vector only for these labels."""
    return np.bincount(positive_labels(y_train).indices, minlength=y_train.shape[1]) > 0


def seen_label_scores(y_score: sp.spmatrix, trained: np.ndarray) -> sp.csr_matrix:
    """``y_score`` without any stored entry in the column of a label outside ``trained`` (bool per label).

    The entries are removed from the structure, not set to 0 (an explicit 0 is still a ranked candidate), and
    the shape and label indices stay: ``top_k`` of the result is each row re-ranked over the trained labels
    only, so an untrained label a method ranked first hands its slot to the best trained one.
    """
    scores = sp.csr_matrix(y_score)
    keep = np.asarray(trained, dtype=bool)
    if len(keep) != scores.shape[1]:
        raise ValueError(f"trained has {len(keep)} entries, y_score {scores.shape[1]} labels")
    kept = keep[scores.indices]
    indptr = np.concatenate([[0], np.cumsum(kept)])[scores.indptr]  # entries kept before each row's start
    return sp.csr_matrix((scores.data[kept], scores.indices[kept], indptr), shape=scores.shape)


def untrained_positive_share(y_true: sp.spmatrix, trained: np.ndarray) -> dict[str, float]:
    """How much of the test split lies on labels outside ``trained`` (bool per label).

    * ``"pairs"``: #{(i, l): l ∈ y_i, l not trained} / #{(i, l): l ∈ y_i}, the share of test positive
      (row, label) pairs on untrained labels (0.0 without any positive);
    * ``"rows"``: #{i: y_i ≠ ∅ and every l ∈ y_i untrained} / n, the share of all n test rows (rows without
      positives in n, not in the count) whose positives are all on untrained labels: in the seen-label view
      these rows score 0 whatever the method, so 1 − ``"rows"`` bounds its P@1.
    """
    positives = positive_labels(y_true)
    untrained = ~np.asarray(trained, dtype=bool)[positives.indices]
    n_rows = positives.shape[0]
    rows = np.repeat(np.arange(n_rows), np.diff(positives.indptr))
    per_row_untrained = np.bincount(rows[untrained], minlength=n_rows)
    only = (per_row_untrained == np.diff(positives.indptr)) & (per_row_untrained > 0)
    return {"pairs": float(untrained.sum() / max(positives.nnz, 1)),
            "rows": float(only.sum() / max(n_rows, 1))}


@dataclass(frozen=True)
class SeenLabelView:
    """A method's scores and metrics with predictions restricted to trained labels (:func:`seen_label_view`)."""

    scores: sp.csr_matrix  # y_score less the untrained labels' entries, same shape and label indices
    metrics: dict[str, float]  # evaluate() keys at k, plus R@c for each recall cut-off
    per_row: dict[str, np.ndarray]  # per_row_metrics() of the view's top-c (c = the largest cut-off)
    untrained_positive_share: float  # untrained_positive_share()["pairs"]
    untrained_only_rows: float  # untrained_positive_share()["rows"]


def seen_label_view(y_true: sp.spmatrix, y_score: sp.spmatrix, y_train: sp.spmatrix,
                    inv_propensity: np.ndarray | None = None, k: int = 5,
                    recall_at: tuple[int, ...] = (10, 100)) -> SeenLabelView:
    """The metrics a method gets when it may only predict labels with a training positive: what a linear
    one-vs-all peer can reach, so a gap to the peer in this view is not a gap from labels the peer cannot score.

    Restricted: the predictions only. Every stored entry of ``y_score`` in the column of a label without a
    positive in ``y_train`` is removed (:func:`seen_label_scores`) and each row's top-k is re-ranked over the
    remaining labels. Not restricted: ``y_true``. The rows and their positives are those of the full view, so

    * a row whose positives are all on untrained labels stays in the n of P@k, nDCG@k and R@k and scores 0
      (no trained label can hit it: a linear model scores 0 there too); rows are never dropped;
    * R@k still divides by all of a row's positives (|y_i|, untrained ones included);
    * PSP@k's denominator keeps the untrained positives' weights w*, so PSP is on the full view's scale and
      a method loses exactly what it earned on untrained labels.

    Metrics: :func:`~xc_core.evaluation.metrics.evaluate` at ``k`` (PS keys with ``inv_propensity``) and
    R@c for each c in ``recall_at``; ``per_row`` is :func:`per_row_metrics` of the view's top-max(recall_at)
    (for paired intervals against the peer in the same view). Ranking, ties and empty rows: as in
    :mod:`xc_core.evaluation.metrics`.
    """
    trained = trained_labels(y_train)
    scores = seen_label_scores(y_score, trained)
    cut = max(10, *recall_at)  # per_row_metrics reads R@10
    wide = evaluate(y_true, scores, k=cut)
    metrics = evaluate(y_true, scores, k=k, inv_propensity=inv_propensity) | {f"R@{c}": wide[f"R@{c}"]
                                                                              for c in recall_at}
    shares = untrained_positive_share(y_true, trained)
    return SeenLabelView(scores=scores, metrics=metrics,
                         per_row=per_row_metrics(y_true, top_k(scores, cut), inv_propensity),
                         untrained_positive_share=shares["pairs"], untrained_only_rows=shares["rows"])
