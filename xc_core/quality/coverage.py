"""Graph-coverage statistics (a table like TextGNN's Table 3) and the thresholds that gate training.

For every anchor set, node type (document / label) and stage (``native`` graph, ``with_proxy`` ANN
neighbours, ``after_rwr``, ``after_pruning``): how many nodes exist and which share has ≥ 1 and ≥ 3
anchors. Labels are counted over *train labels* (labels with a train positive): novel labels have no
train-period graph by definition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from xc_core.datasets.container import AnchorSet, XCDataset


def _degree(edges: np.ndarray, n: int, native_only: bool, proxy: np.ndarray | None) -> np.ndarray:
    rows = edges[:, 0] if not native_only or proxy is None else edges[~np.asarray(proxy, bool), 0]
    return np.bincount(rows, minlength=n)[:n]


def coverage_rows(dataset: XCDataset, stage: str, anchor_sets: dict[str, AnchorSet] | None = None,
                  native_only: bool = False) -> list[dict[str, object]]:
    """Coverage of each anchor set at one stage (``native_only`` ignores proxy edges)."""
    sets = anchor_sets if anchor_sets is not None else dataset.anchor_sets
    train_labels = np.asarray(dataset.y_train.sum(axis=0)).ravel() > 0
    rows: list[dict[str, object]] = []
    for name, a in sets.items():
        for node_type, edges, proxy, mask in (
            ("document", a.doc_edges, a.doc_proxy, np.ones(len(dataset.train_texts), bool)),
            ("label", a.label_edges, a.label_proxy, train_labels),
        ):
            degree = _degree(edges, len(mask), native_only, proxy)[mask]
            n = int(mask.sum())
            rows.append({"anchor_set": name, "node_type": node_type, "stage": stage, "nodes": n,
                         "edges": int(degree.sum()),
                         "share_ge1": round(float((degree >= 1).mean()) if n else 0.0, 4),
                         "share_ge3": round(float((degree >= 3).mean()) if n else 0.0, 4)})
    return rows


def coverage_table(dataset: XCDataset, stages: dict[str, dict[str, AnchorSet]]) -> pl.DataFrame:
    """One row per (anchor set, node type, stage); ``stages`` maps stage name → anchor sets at that stage.

    The ``native`` stage is always computed from ``dataset`` ignoring proxy edges.
    """
    rows = coverage_rows(dataset, "native", native_only=True)
    for stage, sets in stages.items():
        rows += coverage_rows(dataset, stage, sets)
    return pl.DataFrame(rows)


def degree_histogram(anchor_sets: dict[str, AnchorSet], dataset: XCDataset, bins: int = 20) -> pl.DataFrame:
    """Degree counts per (anchor set, node type) for plots: ``degree, nodes``."""
    frames = []
    for name, a in anchor_sets.items():
        for node_type, edges, n in (("document", a.doc_edges, len(dataset.train_texts)),
                                    ("label", a.label_edges, dataset.n_labels)):
            degree = np.bincount(edges[:, 0], minlength=n) if len(edges) else np.zeros(n, np.int64)
            values, counts = np.unique(np.minimum(degree, bins), return_counts=True)
            frames.append(pl.DataFrame({"anchor_set": name, "node_type": node_type, "degree": values,
                                        "nodes": counts}))
    return pl.concat(frames) if frames else pl.DataFrame()


def reachable_train_label_share(dataset: XCDataset, anchor_sets: dict[str, AnchorSet] | None = None) -> float:
    """Share of train labels that have at least one label-side anchor in some anchor set."""
    sets = anchor_sets if anchor_sets is not None else dataset.anchor_sets
    train_labels = np.asarray(dataset.y_train.sum(axis=0)).ravel() > 0
    reached = np.zeros(dataset.n_labels, bool)
    for a in sets.values():
        reached[a.label_edges[:, 0]] = True
    return round(float(reached[train_labels].mean()) if train_labels.any() else 0.0, 4)


class CoverageThreshold(BaseModel):
    """A gate: at ``stage``, at least ``min_share`` of ``node_type`` nodes have ≥ 1 ``anchor_set`` anchor."""

    anchor_set: str
    node_type: str = Field(pattern="^(document|label)$")
    stage: str = "after_rwr"
    min_share: float = Field(ge=0, le=1)


@dataclass(frozen=True)
class CoverageOutcome:
    passed: bool
    anchor_set: str
    node_type: str
    stage: str
    measured: float
    threshold: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def check_coverage(table: pl.DataFrame, thresholds: list[CoverageThreshold]) -> list[CoverageOutcome]:
    """Compare measured ``share_ge1`` with each threshold; a missing row measures 0."""
    outcomes = []
    for t in thresholds:
        row = table.filter((pl.col("anchor_set") == t.anchor_set) & (pl.col("node_type") == t.node_type)
                           & (pl.col("stage") == t.stage))
        measured = float(row.get_column("share_ge1")[0]) if row.height else 0.0
        outcomes.append(CoverageOutcome(measured >= t.min_share, t.anchor_set, t.node_type, t.stage, measured,
                                        t.min_share))
    return outcomes


def default_thresholds(dataset: XCDataset, min_share: float = 0.5) -> list[CoverageThreshold]:
    """Gate every (anchor set, node type) that has native edges at all: ≥ min_share covered after RWR."""
    out = []
    for name, a in dataset.anchor_sets.items():
        for node_type, edges in (("document", a.doc_edges), ("label", a.label_edges)):
            if len(edges):
                out.append(CoverageThreshold(anchor_set=name, node_type=node_type, stage="after_rwr",
                                             min_share=min_share))
    return out
