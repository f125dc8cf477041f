"""Plots for quality reports (matplotlib, Agg backend, imported lazily)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from xc_core.plotting import pyplot


def plot_degree_histogram(hist: pl.DataFrame, out: Path, title: str = "") -> Path:
    """Nodes per anchor degree (last bin = that degree or more), one panel per node type."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=False)
    for ax, node_type in zip(axes, ("document", "label"), strict=True):
        part = hist.filter(pl.col("node_type") == node_type) if hist.height else hist
        for name in (part.get_column("anchor_set").unique().sort().to_list() if part.height else []):
            rows = part.filter(pl.col("anchor_set") == name).sort("degree")
            ax.plot(rows.get_column("degree"), rows.get_column("nodes"), marker="o", label=name)
        ax.set(title=f"{title} {node_type}s", xlabel="anchors per node", ylabel="nodes", yscale="log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
