"""Brand and location mismatch in the top-k of branded / located queries: the offline view of the simulated A/B
test's bad-match rates (Brand BMR, Location BMR), from the data set alone.

* A query **names** a value of an attribute (a brand, a place) when its text contains the value as whole words
  and some label of the data set carries that value (``XCDataset.label_attributes``: the events' ``brand`` /
  ``location`` per item). A rule from the data: never a simulator's hidden attributes or grades.
* A ranked label **mismatches** such a query when it carries a value of the attribute that the query does not
  name (a label without one never mismatches, as an unbranded ad is no brand bad match in the A/B).
* ``rate@k`` = mismatched labels / ranked labels in the top-k of the queries naming a value, a ratio of totals as
  the A/B's BMR is (bad impressions / impressions on branded queries); padding (-1) is not a ranked label. Its
  percentile-bootstrap 95% interval over those queries comes at :data:`HEADLINE_K`.

Values are compared lower-cased, on their words (``San Diego`` is the words ``san diego``). A data set without
item metadata (aol-1000, wikispeedia, XC folders) has no attribute: :func:`mismatch_summary` returns ``{}`` and the
evaluation summary carries no ``mismatch`` entry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: cut-offs of the rates: the first label, the A/B's slots, a wider list, and the A/B's candidate depth (it shows 5
#: of an arm's top-100 ads by score × bid: on the synthetic world the @100 rate ranks models as both BMRs do)
MISMATCH_KS = (1, 5, 10, 100)
#: the cut-off with a bootstrap interval (the A/B shows up to 5 ads)
HEADLINE_K = 5

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> tuple[str, ...]:
    """Lower-cased runs of letters and digits."""
    return tuple(_WORD.findall(text.lower()))


def named_values(texts: Sequence[str], values: Sequence[str]) -> list[list[int]]:
    """Per text, the positions in ``values`` of the values it contains as a whole-word sequence (each value
    compared on its :func:`words`; a value without words never matches)."""
    by_first: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for i, value in enumerate(values):
        tokens = words(value)
        if tokens:
            by_first.setdefault(tokens[0], []).append((i, tokens))
    found: list[list[int]] = []
    for text in texts:
        tokens = words(text)
        hits = {i for at, token in enumerate(tokens) for i, value in by_first.get(token, ())
                if tokens[at:at + len(value)] == value}
        found.append(sorted(hits))
    return found


@dataclass(frozen=True)
class MismatchCounts:
    """One attribute's per-query counts over the queries naming a value of it."""

    attribute: str
    rows: np.ndarray  # the naming queries' rows in the ranked matrix
    ks: tuple[int, ...]
    bad: np.ndarray  # (len(rows), len(ks)): mismatched labels in the top-k
    ranked: np.ndarray  # (len(rows), len(ks)): labels in the top-k (padding not counted)

    def rate(self, k: int) -> float | None:
        """Σ mismatched / Σ ranked at ``k`` (None when no query names a value or none has a ranked label)."""
        at = self.ks.index(k)
        total = float(self.ranked[:, at].sum())
        return float(self.bad[:, at].sum()) / total if total > 0 else None


def mismatch_counts(texts: Sequence[str], top: np.ndarray, label_values: Sequence[str | None], attribute: str,
                    ks: Sequence[int] = MISMATCH_KS) -> MismatchCounts:
    """Counts of mismatched and ranked labels in each naming query's top-k (``top``: label indices per text, best
    first, -1 padded; ``label_values``: the attribute's value per label, None where it has none)."""
    ks = tuple(int(k) for k in ks)
    top = np.asarray(top, dtype=np.int64)
    if len(texts) != len(top):
        raise ValueError(f"{len(texts)} texts but {len(top)} ranked rows")
    lexicon = sorted({" ".join(words(v)) for v in label_values if v is not None} - {""})
    code_of = {v: c for c, v in enumerate(lexicon)}
    label_code = np.array([-1 if v is None else code_of.get(" ".join(words(v)), -1) for v in label_values],
                          dtype=np.int64)
    named = named_values(texts, lexicon)
    rows = np.array([r for r, found in enumerate(named) if found], dtype=np.int64)
    width = top.shape[1] if top.ndim == 2 else 0
    bad = np.zeros((len(rows), len(ks)), dtype=np.int64)
    ranked = np.zeros((len(rows), len(ks)), dtype=np.int64)
    if len(rows) and width:
        cut = min(max(ks), width)
        ids = top[rows, :cut]
        codes = np.where(ids >= 0, label_code[np.maximum(ids, 0)], -1)
        span = len(lexicon) + 1
        wanted = np.concatenate([np.asarray(named[r], dtype=np.int64) + i * span for i, r in enumerate(rows)])
        keys = np.arange(len(rows))[:, None] * span + codes
        wrong = (codes >= 0) & ~np.isin(keys, wanted)
        for j, k in enumerate(ks):
            bad[:, j] = wrong[:, :k].sum(axis=1)
            ranked[:, j] = (ids[:, :k] >= 0).sum(axis=1)
    return MismatchCounts(attribute, rows, ks, bad, ranked)


def mismatch_summary(texts: Sequence[str], top: np.ndarray, label_attributes: Mapping[str, Sequence[str | None]],
                     ks: Sequence[int] = MISMATCH_KS, n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per attribute some label carries (``brand``, ``location``): ``queries`` (naming a value), ``query_share``
    (of all texts), ``label_share`` (labels carrying a value), ``rate@k`` for each k (fraction, None when no
    query names a value) and ``ci@<HEADLINE_K>`` ([low, high], bootstrap over the naming queries). ``{}`` when
    the data set has no item metadata."""
    out: dict[str, dict[str, Any]] = {}
    for attribute, values in label_attributes.items():
        carried = sum(v is not None and bool(words(v)) for v in values)
        if not carried:
            continue
        counts = mismatch_counts(texts, top, values, attribute, ks)
        entry: dict[str, Any] = {"queries": len(counts.rows), "query_share": len(counts.rows) / max(len(texts), 1),
                                    "label_share": carried / max(len(values), 1)}
        entry.update({f"rate@{k}": counts.rate(k) for k in counts.ks})
        if HEADLINE_K in counts.ks and counts.rate(HEADLINE_K) is not None:
            from xc_core.evaluation.analyses import bootstrap_ratio_ci

            at = counts.ks.index(HEADLINE_K)
            _, low, high = bootstrap_ratio_ci(counts.bad[:, at], counts.ranked[:, at], n_boot=n_boot, seed=seed)
            entry[f"ci@{HEADLINE_K}"] = [low, high]
        out[attribute] = entry
    return out


def mismatch_rows(summaries: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[dict[str, object]]:
    """The report's table: one row per (method, attribute) from each method's summary ``mismatch`` entry, rates in
    % ("–" where no query names a value); empty when no method has one."""
    rows: list[dict[str, object]] = []
    for method, entry in summaries.items():
        for attribute, found in entry.items():
            row: dict[str, object] = {"method": method, "attribute": attribute, "queries": found.get("queries")}
            for key, value in found.items():
                if key.startswith("rate@"):
                    row[f"mismatch@{key.split('@')[1]} (%)"] = "–" if value is None else 100 * float(value)
            ci = found.get(f"ci@{HEADLINE_K}")
            if ci is not None:
                row[f"95% CI @{HEADLINE_K} (%)"] = f"[{100 * float(ci[0]):.2f}, {100 * float(ci[1]):.2f}]"
            rows.append(row)
    return rows
