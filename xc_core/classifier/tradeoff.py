"""Where the classifier stage wins and loses: P@k and PSP@k per label-frequency decile for the encoder
alone (alpha = 1), the classifier alone (alpha = 0) and the fused model, so the head/tail trade-off of alpha is
a table and a plot in the report rather than a surprise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from xc_core.plotting import pyplot

VARIANTS_FILE = "variants.npz"  # index folder: the test queries' top ids under alpha = 1, alpha = 0 (no text
#                                 channel) and each text channel (lexical, hybrid) alone when the model has it


def decile_table(y_test: sp.spmatrix, y_train: sp.spmatrix, tops: dict[str, np.ndarray], inv_propensity: np.ndarray,
                 k: int = 5, n_bins: int = 10) -> pl.DataFrame:
    """One row per (variant, decile): decile 0 = the tail (rarest labels holding a tenth of the training
    positives) … 9 = the head. ``P@k`` and ``PSP@k`` are each decile's share: summed over deciles they give
    the variant's P@k and PSP@k."""
    from xc_core.evaluation import label_quantiles, psp_denominator_per_row
    from xc_core.evaluation.metrics import hit_matrix

    bins = label_quantiles(y_train, n_bins)
    denominator = max(float(psp_denominator_per_row(y_test, inv_propensity, k).sum()), 1e-12)
    frames = []
    for variant, top in tops.items():
        rows, ranks = np.nonzero(hit_matrix(y_test, top[:, :k]))
        labels = top[rows, ranks]
        frames.append(pl.DataFrame({
            "variant": [variant] * n_bins, "decile": np.arange(n_bins),
            f"P@{k}": np.bincount(bins[labels], minlength=n_bins) / (max(top.shape[0], 1) * k),
            f"PSP@{k}": np.bincount(bins[labels], weights=inv_propensity[labels], minlength=n_bins) / denominator}))
    return pl.concat(frames)


def plot(table: pl.DataFrame, curve: list[dict[str, float]], chosen: float, out: Path, lexical_weight: float = 0.0,
         k: int = 5, linear_weight: float = 0.0) -> Path:
    """Left two panels: per-decile shares of P@k and PSP@k by variant; right: the out-of-fold alpha curve at
    the chosen lexical and hybrid weights."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    variants = table["variant"].unique(maintain_order=True).to_list()
    width = 0.8 / max(len(variants), 1)
    for axis, metric in zip(axes[:2], (f"P@{k}", f"PSP@{k}"), strict=True):
        for i, variant in enumerate(variants):
            part = table.filter(pl.col("variant") == variant)
            axis.bar(part["decile"].to_numpy() + i * width, 100 * part[metric].to_numpy(), width, label=variant)
        axis.set(title=f"test {metric} by label-frequency decile (0 = tail)", xlabel="decile", ylabel="points")
        axis.legend(fontsize=7)
    curve = [row for row in curve if row.get("lexical_weight", 0.0) == lexical_weight
             and row.get("linear_weight", 0.0) == linear_weight]
    alphas = [row["alpha"] for row in curve]
    for metric in ("P@1", f"P@{k}", "PSP@1", f"PSP@{k}"):
        axes[2].plot(alphas, [100 * row[metric] for row in curve], marker=".", label=metric)
    axes[2].axvline(chosen, color="grey", linestyle="--", label=f"chosen α = {chosen:.1f}")
    axes[2].set(title=f"out-of-fold metrics by α (1 = encoder only), lexical {lexical_weight:g}, "
                      f"hybrid {linear_weight:g}",
                xlabel="α", ylabel="points")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def summarize(table: pl.DataFrame, k: int = 5) -> dict[str, Any]:
    """Totals per variant (the deciles summed), for metrics.json."""
    totals = table.group_by("variant", maintain_order=True).agg(pl.col(f"P@{k}").sum(), pl.col(f"PSP@{k}").sum())
    return {row["variant"]: {f"P@{k}": row[f"P@{k}"], f"PSP@{k}": row[f"PSP@{k}"]} for row in totals.to_dicts()}
