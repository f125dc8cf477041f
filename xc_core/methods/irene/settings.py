"""IRENE's four evaluation settings (IRENE Fig. 3): zero-shot or one-shot novel labels × evaluation on novel labels
only or generalised (every label), each against the encoder alone, and NCM in the one-shot setting.

- **novel labels**: labels without a training positive (``XCDataset.label_novel``);
- **novel-only**: the test queries with a novel positive, ranked among the novel labels only, scored on them;
- **generalised**: every test query ranked among every label (plus the novel labels' share of it:
  ``novel positives``, the recall of novel positives in that ranking);
- **one-shot**: for every novel label one test query that clicked it is revealed (seeded) and removed from the
  one-shot test sets; IRENE lets that query vote on the associations, NCM represents the label by the centroid of
  its text and the revealed query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.measure import signed_interval

KS = (1, 5, 10, 100)
Representations = Callable[[np.ndarray, np.ndarray | None], np.ndarray]  # (novel text vecs, revealed) → reps


def reveal(dataset: XCDataset, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(revealed test row per novel label or −1, mask of test rows removed by the one-shot setting)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    novel = np.flatnonzero(dataset.label_novel)
    by_label = dataset.y_test.tocsc()
    revealed = np.full(len(novel), -1, dtype=np.int64)
    for i, label in enumerate(novel):
        rows = by_label.indices[by_label.indptr[label]:by_label.indptr[label + 1]]
        if len(rows):
            revealed[i] = rng.choice(rows)
    removed = np.zeros(len(dataset.test_texts), dtype=bool)
    removed[revealed[revealed >= 0]] = True
    return revealed, removed


def setting_truths(dataset: XCDataset, keep: np.ndarray) -> dict[str, sp.csr_matrix]:
    """The ground truth of each evaluation over the test rows ``keep`` (the others have no positive, so they are
    skipped): ``novel-only`` has the novel labels' columns only (in ``label_novel`` order: the query is ranked
    among novel labels), ``generalised`` every column, ``generalised: novel positives`` every column with only the
    novel labels' positives kept."""
    truth = (sp.diags(keep.astype(np.float32)) @ dataset.y_test.tocsr()).tocsr()
    novel_columns = sp.csr_matrix(dataset.label_novel.astype(np.float32))
    return {"novel-only": truth.tocsc()[:, np.flatnonzero(dataset.label_novel)].tocsr(), "generalised": truth,
            "generalised: novel positives": sp.csr_matrix(truth.multiply(novel_columns)).tocsr()}


def ranked(queries: np.ndarray, truth: sp.csr_matrix, reps: np.ndarray,
           k: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """The rows with a positive, their top-k labels over ``reps`` (exact) and ``evaluate``'s metrics (fractions)."""
    from xc_core.evaluation.metrics import evaluate, to_csr
    from xc_core.training.validation import top_k_exact

    rows = np.flatnonzero(np.diff(truth.indptr) > 0)
    if len(rows) == 0:
        return rows, np.zeros((0, k), dtype=np.int64), {}
    k = min(k, reps.shape[0])
    ids = top_k_exact(queries[rows], reps, k)
    scores = np.repeat(np.arange(ids.shape[1], 0, -1, dtype=np.float32)[None], len(rows), axis=0)
    return rows, ids, evaluate(truth[rows], to_csr(scores, ids, reps.shape[0]), k=k)


def ranking_metrics(queries: np.ndarray, truth: sp.csr_matrix,
                    reps: np.ndarray) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """R@k and P@1/P@5 of ``queries`` ranked over ``reps`` (rows without positives skipped), in %, and the
    per-row values (``evaluation.analyses.per_row_metrics``) the paired intervals need."""
    from xc_core.evaluation.analyses import per_row_metrics

    rows, ids, found = ranked(queries, truth, reps, max(KS))
    if len(rows) == 0:
        return {"rows": 0}, {}
    out = {f"R@{j}": round(100 * found[f"R@{j}"], 2) for j in KS if f"R@{j}" in found}
    out.update({f"P@{j}": round(100 * found[f"P@{j}"], 2) for j in (1, 5) if f"P@{j}" in found})
    top = ids if ids.shape[1] >= 10 else np.pad(ids, ((0, 0), (0, 10 - ids.shape[1])), constant_values=-1)
    return {**out, "rows": int(len(rows))}, per_row_metrics(truth[rows], top)


def _paired(rows: dict[str, np.ndarray], base: dict[str, np.ndarray]) -> dict[str, Any]:
    """Δ R@10 and Δ P@1 against the encoder on the same rows (paired bootstrap, points)."""
    from xc_core.evaluation.analyses import paired_metric_diff

    out: dict[str, Any] = {}
    for key in ("R@10", "P@1"):
        found = paired_metric_diff(rows, base, key) if rows and base else None
        if found is not None:
            diff, low, high, _ = found
            out[f"Δ{key} vs encoder"] = signed_interval(diff, low, high, scale=100)
    return out


def evaluate_settings(dataset: XCDataset, vecs: dict[str, np.ndarray],
                      variants: dict[str, tuple[np.ndarray, Representations]], seed: int = 0) -> list[dict[str, Any]]:
    """One row per (setting, variant): ``variants`` name → (the seen labels' representations, how novel labels
    are represented) for IRENE and its ablations; ``encoder`` (the plain text embedding for every label) and,
    one-shot, ``NCM`` (seen labels by text) are added."""
    novel = np.flatnonzero(dataset.label_novel)
    seen = np.flatnonzero(~dataset.label_novel)
    text = vecs["labels"][novel]
    revealed, removed = reveal(dataset, seed)
    has_query = revealed >= 0
    query_vecs = np.where(has_query[:, None], vecs["test"][np.maximum(revealed, 0)], text)
    rows: list[dict[str, Any]] = []
    for shot in ("zero-shot", "one-shot"):
        truths = setting_truths(dataset, ~removed if shot == "one-shot" else np.ones(len(removed), dtype=bool))
        reps_by_variant = {"encoder": (vecs["labels"], text)}
        for name, (seen_reps, make) in variants.items():
            novel_reps = make(text, query_vecs if shot == "one-shot" else None)
            full = np.empty_like(vecs["labels"])
            full[seen], full[novel] = seen_reps, novel_reps
            reps_by_variant[name] = (full, novel_reps)
        if shot == "one-shot":
            centroid = text + query_vecs
            centroid /= np.maximum(np.linalg.norm(centroid, axis=1, keepdims=True), 1e-12)
            full = vecs["labels"].copy()
            full[novel] = centroid
            reps_by_variant["NCM"] = (full, centroid)
        base: dict[str, dict[str, np.ndarray]] = {}
        for name, (full, novel_reps) in reps_by_variant.items():
            for setting, labels in (("novel-only", novel_reps), ("generalised", full),
                                    ("generalised: novel positives", full)):
                metrics, per_row = ranking_metrics(vecs["test"], truths[setting], labels)
                key = f"{shot}, {setting}"
                base.setdefault(key, per_row)  # the encoder comes first
                paired = {} if name == "encoder" else _paired(per_row, base[key])
                rows.append({"setting": key, "variant": name, **metrics, **paired})
    return rows
