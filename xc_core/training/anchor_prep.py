"""The anchor sets as the trainer reads them: the data set's sets without
edges to held-out texts, cut to what a batch can reach, without attribute-crossing edges, optionally turned into
labelled pairs (the ``anchor_pairs`` control), checked against the method's request, and muted where the
graph-worth check found no information."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.training.config import TrainConfig

if TYPE_CHECKING:
    from xc_core.training.attributes import AttributeIndex

log = logging.getLogger(__name__)


@dataclass
class TrainingAnchors:
    """What training regularizes with, and what preparing it dropped or added. ``data`` and ``train_idx`` are the
    training view and rows after the ``anchor_pairs`` control (which may add labelled pairs and documents)."""

    data: XCDataset
    train_idx: np.ndarray
    full: dict[str, AnchorSet] = field(default_factory=dict)  # every usable edge (pruning starts from these)
    doc_sets: list[str] = field(default_factory=list)
    label_sets: list[str] = field(default_factory=list)
    graph_worth: dict[str, Any] = field(default_factory=dict)
    heldout_edges: dict[str, int] = field(default_factory=dict)  # edges to validation/test texts dropped, per set
    attribute_edges: dict[str, int] = field(default_factory=dict)  # attribute-crossing edges dropped, per set
    pairs_added: int = 0  # labelled pairs the anchor_pairs control added


def prepare_anchors(dataset: XCDataset, data: XCDataset, cfg: TrainConfig, train_idx: np.ndarray,
                    val_idx: np.ndarray, attributes: AttributeIndex | None) -> TrainingAnchors:
    """``dataset``'s anchor sets for training on ``data`` (its training view) at rows ``train_idx``."""
    out = TrainingAnchors(data, train_idx)
    if not (cfg.regularize or cfg.anchor_pairs):
        out.graph_worth = _follow_graph_worth(dataset, cfg, out)
        return out
    clean = _attribute_safe(_reachable(_without_heldout(dataset.anchor_sets, cfg, out, val_idx), out), cfg, out,
                            attributes)
    if cfg.anchor_pairs:
        _add_anchor_pairs(clean, out)
    out.full = clean if cfg.regularize else {}
    out.doc_sets = [s for s in (cfg.doc_sets if cfg.doc_sets is not None else out.full)
                    if s in out.full and len(out.full[s].doc_edges)]
    out.label_sets = [s for s in (cfg.label_sets if cfg.label_sets is not None else out.full)
                      if s in out.full and len(out.full[s].label_edges)]
    if cfg.regularize:
        _check_anchor_sets(dataset, cfg, out)
    out.graph_worth = _follow_graph_worth(dataset, cfg, out)
    return out


def _check_anchor_sets(dataset: XCDataset, cfg: TrainConfig, out: TrainingAnchors) -> None:
    """A regularized method with nothing to regularize with is an error, never a silent text-only run."""
    unknown = [s for s in (cfg.doc_sets or []) + (cfg.label_sets or []) if s not in dataset.anchor_sets]
    if unknown:
        raise ValueError(f"anchor sets {unknown} requested but data set '{dataset.name}' has "
                         f"{sorted(dataset.anchor_sets) or 'none'}")
    if not out.doc_sets and not out.label_sets:
        raise ValueError(f"this method trains with graph regularizers, but data set '{dataset.name}' has no "
                         f"usable anchor sets ({sorted(dataset.anchor_sets) or 'none'}, after dropping held-out "
                         "anchors): build them with `xc anchors`, or train a text-only method (dual_encoder)")


def _follow_graph_worth(dataset: XCDataset, cfg: TrainConfig, out: TrainingAnchors) -> dict[str, Any]:
    """``graph_worth``: the sets the graph-worth check (``xc anchors``, graphs/worth.py) did not find adding
    information start at λ = 0; with none left the regularizers go and this is ``dual_encoder``'s training,
    said in one line. The record goes into the run's summary."""
    record = dataset.meta.get("graph_worth")
    if not cfg.regularize or not cfg.graph_worth or not record:
        return {}
    from xc_core.graphs.worth import kept_sets

    verdicts = {name: row["verdict"] for name, row in record["sets"].items()}
    used = sorted({*out.doc_sets, *out.label_sets})
    # a set the recorded check did not judge (added after `xc anchors` ran) keeps its λ
    muted = [s for s in used if s in verdicts and s not in kept_sets(record)]
    kept = [s for s in used if s not in muted]
    found: dict[str, Any] = {"verdicts": verdicts, "kept": kept, "muted": muted, "as_dual_encoder": not kept}
    if not kept:
        log.warning("graph-worth check: no anchor set adds information (%s): training without regularizers, as "
                    "dual_encoder", "; ".join(f"{k}: {v}" for k, v in verdicts.items()))
        out.full, out.doc_sets, out.label_sets = {}, [], []
    elif muted:
        log.info("graph-worth check: %s start at λ = 0 (%s)", ", ".join(muted),
                 "; ".join(f"{k}: {verdicts.get(k, 'not checked')}" for k in muted))
    return found


def _without_heldout(anchor_sets: dict[str, AnchorSet], cfg: TrainConfig, out: TrainingAnchors,
                     val_idx: np.ndarray) -> dict[str, AnchorSet]:
    """Drop edges to anchors whose text is a validation or test document (document-space sets only, see
    ``meta["anchor_spaces"]``): otherwise the regularizer trains on held-out queries, e.g. aol-1000's label
    side, where the queries that clicked a label include validation queries."""
    if not cfg.exclude_heldout_anchors:
        return dict(anchor_sets)
    from xc_core.graphs.heldout import without_heldout

    heldout = {out.data.train_texts[i] for i in val_idx} | set(out.data.test_texts)
    kept, out.heldout_edges = without_heldout(anchor_sets, out.data, heldout)
    log.info("held-out anchors dropped (edges per set): %s", out.heldout_edges)
    return kept


def _add_anchor_pairs(anchor_sets: dict[str, AnchorSet], out: TrainingAnchors) -> None:
    """The ``anchor_pairs`` control: every label-side edge (label, anchor) of a document-space set whose
    anchor is a training document becomes the training pair (that document, label) — the labelled pairs a
    regularizer on that set would reach, given to the task loss instead. Documents outside the training
    subsample join it with only those pairs; validation documents never do (already excluded as anchors)."""
    doc_of = {t: i for i, t in enumerate(out.data.train_texts)}
    documents = out.data.document_space_sets()
    rows, cols = [], []
    for name, a in anchor_sets.items():
        if name not in documents:
            continue
        for label, anchor in a.label_edges.tolist():
            doc = doc_of.get(a.texts[anchor])
            if doc is not None:
                rows.append(doc)
                cols.append(label)
    y = sp.csr_matrix(out.data.y_train)
    extra = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=y.shape)
    outside = np.ones(y.shape[0], bool)
    outside[out.train_idx] = False
    keep_rows = sp.diags((~outside).astype(np.float32))  # subsample rows keep their labels; others get only extra
    merged = sp.csr_matrix(keep_rows @ y + extra)
    merged.data[:] = 1.0
    out.pairs_added = int(merged.nnz - (keep_rows @ y).nnz)
    new_docs = (np.unique(np.asarray(rows, np.int64)[outside[np.asarray(rows, np.int64)]]) if rows
                else np.zeros(0, np.int64))
    out.train_idx = np.union1d(out.train_idx, new_docs)
    out.data = dataclasses.replace(out.data, y_train=merged)
    log.info("anchor_pairs: %d labelled pairs added, %d documents joined the training set",
             out.pairs_added, len(new_docs))


def _reachable(anchor_sets: dict[str, AnchorSet], out: TrainingAnchors) -> dict[str, AnchorSet]:
    """Only the edges a batch can ever draw: documents of ``train_idx`` and labels that are their positives.
    Batches are unchanged, but pruning then encodes a 4,000-document subsample's neighbourhood instead of
    all of aol-1000's 400k texts."""
    docs = np.zeros(len(out.data.train_texts), bool)
    docs[out.train_idx] = True
    labels = np.zeros(len(out.data.label_texts), bool)
    labels[np.unique(sp.csr_matrix(out.data.y_train)[out.train_idx].indices)] = True
    kept = {}
    for name, a in anchor_sets.items():
        keep_doc, keep_label = docs[a.doc_edges[:, 0]], labels[a.label_edges[:, 0]]
        kept[name] = AnchorSet(name, a.texts, a.doc_edges[keep_doc], a.label_edges[keep_label],
                               doc_proxy=np.asarray(a.doc_proxy)[keep_doc],
                               label_proxy=np.asarray(a.label_proxy)[keep_label])
    return kept


def _attribute_safe(anchor_sets: dict[str, AnchorSet], cfg: TrainConfig, out: TrainingAnchors,
                    attributes: AttributeIndex | None) -> dict[str, AnchorSet]:
    """``attribute_anchor_filter``: every set without its edges whose ends carry different brands / places
    (training/attributes.py); unchanged when off or when the data set has no item metadata."""
    if not cfg.attribute_anchor_filter or attributes is None:
        return anchor_sets
    from xc_core.training.attributes import without_crossing_edges

    kept = {}
    for name, a in anchor_sets.items():
        kept[name], out.attribute_edges[name] = without_crossing_edges(a, attributes, out.data.train_texts)
    log.info("attribute-crossing anchor edges dropped (per set): %s", out.attribute_edges)
    return kept
