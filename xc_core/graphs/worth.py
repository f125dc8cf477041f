"""Will this graph help? A check of every anchor set before RAMEN trains on it.

RAMEN's regularizer pulls a document (label) toward its anchors. That can only help retrieval where the anchors say
something the training labels do not: a click-graph set equal to the training labels only repeats the task loss, and
co-session anchors that name another brand pull toward the wrong label (docs/results/issue-11.md, issue-32.md).
This module measures, per set and from training and validation rows only (never the test split):

- **novelty**: the share of the validation documents' held-out positives that the set reaches — within two hops of
  the document's text through the set's edges (at least one hop a set edge, the other may be a training pair) — and
  that are *not* among the document's own training labels. A set whose anchors only lead back to the labels a
  document already has reaches nothing new.
- **chance** and **lift**: the same share with each validation document's positives swapped for another document's
  (a seeded derangement, averaged over a few): what a set of the same reach would hit with no information about the
  pairing. lift = novelty / chance.
- **redundancy**: the share of the edges training draws (training documents' edges, edges of labels with a training
  positive) that restate a training pair: a document anchored on one of its own labels' texts, a label anchored on
  a training document that clicked it. An anchor set that *is* the label matrix has redundancy 1.
- **tail reach**: anchors per node by label-frequency decile (documents by their rarest training label, labels by
  their training frequency; decile 1 the rarest), where RAMEN claims its gains.
- **agreement** (``training/agreement.py``, needs the encoder): the cosine between the set's regularizer gradient
  on training batches and the task gradient on validation batches at the starting encoder — whether one step along
  the regularizer lowers the validation task loss, to first order.

From these a verdict per set (:func:`verdict`, thresholds in :class:`WorthConfig`): "adds information", "repeats the
labels", "pulls against the task", or "adds little beyond chance". Only a set that adds information keeps its
starting λ in ``ramen`` (``TrainConfig.graph_worth``); the others start at λ = 0, which the bandit may raise on its
training-side reward.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

from xc_core.datasets.container import AnchorSet, XCDataset

ADDS = "adds information"
REPEATS = "repeats the labels"
AGAINST = "pulls against the task"
NOTHING = "adds little beyond chance"
VERDICTS = (ADDS, REPEATS, AGAINST, NOTHING)


class WorthConfig(BaseModel):
    """The check's thresholds: set by what each statistic means, not fitted to any data set (docs/graphs.md, "Will this
    graph help?")."""

    min_novelty: float = Field(default=0.01, ge=0, le=1, description="a set adds information only when it reaches "
                               "at least this share of the validation documents' held-out positives")
    min_lift: float = Field(default=2.0, ge=1, description="... and reaches them at least this many times as often as "
                            "a set of the same reach would by chance (positives of another document)")
    max_redundancy: float = Field(default=0.5, ge=0, le=1, description="a set whose edges restate training pairs at "
                                  "this share or more repeats the labels")
    chance_draws: int = Field(default=5, ge=1, description="derangements averaged for the chance level")
    agreement_batches: int = Field(default=6, ge=2, description="training and validation batches of the gradient "
                                   "agreement (each a batch of the training config's size)")
    seed: int = 0


@dataclass
class SetWorth:
    """The check's numbers and verdict for one anchor set."""

    anchor_set: str
    novelty: float
    chance: float
    lift: float
    redundancy: float
    reached_per_document: float  # labels reachable per validation document, its own training labels excluded
    validation_positives: int
    edges_drawn: int
    tail_documents: list[float] = field(default_factory=list)  # anchors per training document, deciles rare → head
    tail_labels: list[float] = field(default_factory=list)  # anchors per label with a training positive, deciles
    #: novelty counting only held-out positives the starting encoder does not already rank in its top k (None: no
    #: encoder): what the graph knows that the text does not
    beyond_text: float | None = None
    agreement: dict[str, float] = field(default_factory=dict)  # cosine, per-batch mean, low, high; task reference
    verdict: str = ""
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for ``xc anchors`` and the logs."""
        agree = (f", agreement {self.agreement['mean']:+.3f} [{self.agreement['low']:+.3f}, "
                 f"{self.agreement['high']:+.3f}]" if self.agreement else "")
        return (f"{self.anchor_set}: {self.verdict} — novelty {100 * self.novelty:.1f}% of held-out positives "
                f"(chance {100 * self.chance:.1f}%, lift {self.lift:.1f}), redundancy {100 * self.redundancy:.0f}%"
                f"{agree}")


def _text_ids(dataset: XCDataset, anchors: AnchorSet) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One node per distinct text: documents, labels and anchors that read the same are the same node (an equal
    text gets the same embedding, so a pull on one is a pull on the other)."""
    ids: dict[str, int] = {}

    def index(texts: list[str]) -> np.ndarray:
        return np.array([ids.setdefault(t, len(ids)) for t in texts], dtype=np.int64)

    docs, labels, anchor = index(dataset.train_texts), index(dataset.label_texts), index(anchors.texts)
    return docs, labels, anchor, len(ids)


def _adjacency(rows: np.ndarray, cols: np.ndarray, n: int, symmetric: bool = True) -> sp.csr_matrix:
    data = np.ones(len(rows), np.float32)
    m = sp.csr_matrix((data, (rows, cols)), shape=(n, n))
    if symmetric:
        m = m + m.T
    m = sp.csr_matrix(m)
    m.data[:] = 1.0
    return m


def _binary(m: sp.spmatrix) -> sp.csr_matrix:
    out = sp.csr_matrix(m)
    out.eliminate_zeros()
    out.data[:] = 1.0
    return out


def reach(dataset: XCDataset, anchors: AnchorSet, y_fit: sp.csr_matrix, train_rows: np.ndarray,
          rows: np.ndarray) -> sp.csr_matrix:
    """(len(rows), labels): the labels each document of ``rows`` reaches within two hops of its text, at least one
    through ``anchors``' edges (the other may be a training pair of ``y_fit`` on ``train_rows``)."""
    docs, labels, anchor_ids, n = _text_ids(dataset, anchors)
    ends = np.concatenate([docs[anchors.doc_edges[:, 0]], labels[anchors.label_edges[:, 0]]])
    starts = np.concatenate([anchor_ids[anchors.doc_edges[:, 1]], anchor_ids[anchors.label_edges[:, 1]]])
    graph = _adjacency(ends, starts, n)
    fit = sp.csr_matrix(y_fit)[train_rows].tocoo()
    task = _adjacency(docs[train_rows][fit.row], labels[fit.col], n)
    start = sp.csr_matrix((np.ones(len(rows), np.float32), (np.arange(len(rows)), docs[rows])), shape=(len(rows), n))
    one = start @ graph
    two = one @ graph + one @ task + (start @ task) @ graph
    to_labels = sp.csr_matrix((np.ones(len(labels), np.float32), (labels, np.arange(len(labels)))),
                              shape=(n, len(labels)))
    return _binary((one + two) @ to_labels)


def redundancy(dataset: XCDataset, anchors: AnchorSet, y_fit: sp.csr_matrix,
               train_rows: np.ndarray) -> tuple[float, int]:
    """(share of the edges training draws that restate a training pair, those edges' count)."""
    docs, labels, anchor_ids, n = _text_ids(dataset, anchors)
    fit = sp.csr_matrix(y_fit)
    trained = np.zeros(len(dataset.train_texts), bool)
    trained[train_rows] = True
    positive = np.asarray(fit[train_rows].sum(axis=0)).ravel() > 0
    doc_edges = anchors.doc_edges[trained[anchors.doc_edges[:, 0]]] if len(anchors.doc_edges) else anchors.doc_edges
    label_edges = (anchors.label_edges[positive[anchors.label_edges[:, 0]]] if len(anchors.label_edges)
                   else anchors.label_edges)
    drawn = len(doc_edges) + len(label_edges)
    if not drawn:
        return 0.0, 0
    coo = fit[train_rows].tocoo()
    pairs = _adjacency(docs[train_rows][coo.row], labels[coo.col], n)  # a training pair, either way round
    ends = np.concatenate([docs[doc_edges[:, 0]], labels[label_edges[:, 0]]])
    starts = np.concatenate([anchor_ids[doc_edges[:, 1]], anchor_ids[label_edges[:, 1]]])
    restated = np.asarray(pairs[ends, starts]).ravel() > 0
    return float(restated.mean()), drawn


def _deciles(values: np.ndarray, degree: np.ndarray) -> list[float]:
    """Mean ``degree`` per decile of ``values`` (decile 1: the smallest values), by rank so ties split evenly."""
    if not len(values):
        return []
    order = np.argsort(values, kind="stable")
    decile = np.empty(len(values), np.int64)
    decile[order] = np.arange(len(values)) * 10 // len(values)
    return [round(float(degree[decile == d].mean()), 3) if (decile == d).any() else 0.0 for d in range(10)]


def tail_reach(dataset: XCDataset, anchors: AnchorSet, y_fit: sp.csr_matrix,
               train_rows: np.ndarray) -> tuple[list[float], list[float]]:
    """Anchors per training document by the decile of its rarest training label's frequency, and anchors per label
    (with a training positive) by the decile of its frequency; decile 1 is the rarest."""
    fit = sp.csr_matrix(sp.csr_matrix(y_fit)[train_rows])
    frequency = np.asarray(fit.sum(axis=0)).ravel()
    doc_degree = np.bincount(anchors.doc_edges[:, 0], minlength=len(dataset.train_texts))[train_rows]
    rarest = np.array([frequency[fit.indices[fit.indptr[i]:fit.indptr[i + 1]]].min()
                       if fit.indptr[i + 1] > fit.indptr[i] else 0 for i in range(fit.shape[0])])
    with_labels = np.diff(fit.indptr) > 0
    seen = np.flatnonzero(frequency > 0)
    label_degree = np.bincount(anchors.label_edges[:, 0], minlength=len(dataset.label_texts))[seen]
    return (_deciles(rarest[with_labels], doc_degree[with_labels]) if anchors.doc_edges.size else [],
            _deciles(frequency[seen], label_degree) if anchors.label_edges.size else [])


def beyond_text(reached: sp.csr_matrix, held_out: sp.csr_matrix, own: sp.csr_matrix, known: sp.csr_matrix) -> float:
    """The share of held-out positives (own training labels aside) the set reaches and the text does not: not in
    ``known``, the starting encoder's top k of each validation document."""
    positives = _binary(held_out - held_out.multiply(own))
    total = positives.sum()
    if not total:
        return 0.0
    unknown = _binary(positives - positives.multiply(known))
    return float(unknown.multiply(_binary(reached)).sum() / total)


def novelty(reached: sp.csr_matrix, held_out: sp.csr_matrix, own: sp.csr_matrix, draws: int,
            seed: int) -> tuple[float, float, float]:
    """(novelty, chance, labels reached per document): ``reached``, ``held_out`` (the validation positives) and
    ``own`` (the documents' training labels) are aligned (documents × labels)."""
    new_reach = _binary(reached - reached.multiply(own))
    positives = _binary(held_out - held_out.multiply(own))
    total = positives.sum()
    if not total:
        return 0.0, 0.0, float(new_reach.sum(axis=1).mean()) if new_reach.shape[0] else 0.0
    hit = float(positives.multiply(new_reach).sum() / total)
    rng = np.random.default_rng([seed, 43])
    chance = []
    n = positives.shape[0]
    for _ in range(draws):  # each row's positives swapped for another row's (a shuffled cyclic shift: no fixed row)
        order = rng.permutation(n)
        swapped = np.empty(n, np.int64)
        swapped[order] = np.roll(order, 1)
        other = positives[swapped]
        chance.append(float(other.multiply(new_reach).sum() / max(other.sum(), 1)))
    return hit, float(np.mean(chance)), float(new_reach.sum(axis=1).mean())


def verdict(worth: SetWorth, cfg: WorthConfig) -> tuple[str, str]:
    """The set's verdict and the reason, from its numbers: a gradient that pulls against the task outweighs
    everything; a set that mostly restates training pairs repeats the labels; a set adds information when it reaches
    enough held-out positives well above chance; otherwise what it reaches, a set of its reach would reach by chance."""
    agreement = worth.agreement
    if agreement and agreement["high"] < 0:
        return AGAINST, (f"its gradient points away from the validation task gradient (agreement "
                         f"{agreement['mean']:+.3f}, interval below 0)")
    if worth.redundancy >= cfg.max_redundancy:
        return REPEATS, (f"{100 * worth.redundancy:.0f}% of its edges restate training pairs "
                         f"(≥ {100 * cfg.max_redundancy:.0f}%)")
    if worth.novelty >= cfg.min_novelty and worth.lift >= cfg.min_lift:
        return ADDS, (f"it reaches {100 * worth.novelty:.1f}% of held-out positives beyond the training labels, "
                      f"{worth.lift:.1f}× chance")
    return NOTHING, (f"it reaches {100 * worth.novelty:.1f}% of held-out positives beyond the training labels "
                     f"(lift {worth.lift:.1f}; needs ≥ {100 * cfg.min_novelty:.0f}% and ≥ {cfg.min_lift:.0f}×)")


def graph_statistics(dataset: XCDataset, anchor_sets: dict[str, AnchorSet], y_fit: sp.csr_matrix,
                     y_val: sp.csr_matrix, train_rows: np.ndarray, val_rows: np.ndarray,
                     cfg: WorthConfig, text_top: np.ndarray | None = None) -> dict[str, SetWorth]:
    """Every set's graph numbers, on the sets as training reads them (held-out anchors dropped by the caller).
    ``y_val`` is read at ``val_rows``: their held-out positives. ``text_top``: the starting encoder's top label ids
    per validation row (−1 pads), for :func:`beyond_text`."""
    held_out = _binary(sp.csr_matrix(y_val)[val_rows])
    # a validation document's own training labels: those training reads for it (a repeated query of a temporal
    # split has some; a held-out document none, although y_fit still holds its row)
    trains = np.isin(val_rows, train_rows).astype(np.float32)
    own = _binary(sp.diags(trains) @ sp.csr_matrix(y_fit)[val_rows])
    known = None
    if text_top is not None:
        rows, cols = np.nonzero(text_top >= 0)
        known = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, text_top[rows, cols])), shape=held_out.shape)
    out = {}
    for name, anchors in anchor_sets.items():
        reached = reach(dataset, anchors, y_fit, train_rows, val_rows)
        hit, chance, per_doc = novelty(reached, held_out, own, cfg.chance_draws, cfg.seed)
        share, drawn = redundancy(dataset, anchors, y_fit, train_rows)
        docs, labels = tail_reach(dataset, anchors, y_fit, train_rows)
        # no chance hit in any draw: divide by half a hit, so the lift stays finite (and JSON) and is a lower bound
        lift = hit / max(chance, 0.5 / max(int(held_out.sum()) * cfg.chance_draws, 1))
        beyond = None if known is None else round(beyond_text(reached, held_out, own, known), 4)
        out[name] = SetWorth(name, round(hit, 4), round(chance, 4), round(lift, 2), round(share, 4),
                             round(per_doc, 1), int(held_out.sum()), drawn, docs, labels, beyond_text=beyond)
    return out


def judge(found: dict[str, SetWorth], cfg: WorthConfig) -> dict[str, SetWorth]:
    """Fill each set's verdict and reason (after any agreement has been added)."""
    for worth in found.values():
        worth.verdict, worth.reason = verdict(worth, cfg)
    return found


def kept_sets(record: dict[str, Any]) -> list[str]:
    """The anchor sets a recorded check (``XCDataset.meta["graph_worth"]``) says add information."""
    return [name for name, row in record.get("sets", {}).items() if row.get("verdict") == ADDS]


def worth_table(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The check's table, one row per set (the asset check's metadata, the results page): percentages in points."""
    rows = []
    for name, row in record.get("sets", {}).items():
        agreement = row.get("agreement") or {}
        beyond = row.get("beyond_text")
        rows.append({"anchor set": name, "verdict": row["verdict"], "novelty %": round(100 * row["novelty"], 1),
                     "chance %": round(100 * row["chance"], 1), "lift": row["lift"],
                     "beyond text %": None if beyond is None else round(100 * beyond, 1),
                     "redundancy %": round(100 * row["redundancy"], 1),
                     "agreement": agreement.get("cosine"),
                     "agreement 95%": (f"[{agreement['low']:+.3f}, {agreement['high']:+.3f}]" if agreement else None),
                     "task agreement": agreement.get("task_cosine"),
                     "anchors/doc, rarest→head decile": _ends(row.get("tail_documents", [])),
                     "anchors/label, rarest→head decile": _ends(row.get("tail_labels", []))})
    return rows


def _ends(deciles: list[float]) -> str:
    return f"{deciles[0]:.1f} → {deciles[-1]:.1f}" if deciles else "–"
