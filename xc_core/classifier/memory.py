"""Two channels of the fused search that remember the clicks themselves: the click memory of repeated
queries and the labels' popularity.

Why: every other channel ranks from a training label *set* — the data set's label matrix is 0/1, so a query that
was asked on 30 days and clicked ``bankofamerica.com`` on 28 of them and ``bofa.org`` once gives both labels the
same weight, and no channel knows which labels are clicked at all. Event logs keep more: the days each (query,
label) pair was clicked (``XCDataset.train_pair_days``). On aol-1000's out-of-fold blocks (pretrained encoder, the
served fusion fixed, cross-fitted over 4 blocks of days) the memory added +0.67 [+0.43, +0.93] P@1, the memory
then popularity with the untrained offset re-chosen +0.65 [+0.28, +1.00], and +0.85 [+0.48, +1.20] in the seen-label
view (``docs/results/issue-40.md``).

- **click memory** (:class:`ClickMemory`): a query whose text (lower-cased, spaces collapsed: :func:`memory_key`)
  is a training document's gets that document's labels scored by their click days over its most clicked label's,
  in (0, 1]; its labels join the shortlist (at most the search depth of them, the most clicked first). Other
  queries get 0. A test query repeated from training meets it as a block's query repeated from the days before
  meets it out of fold.
- **popularity** (:func:`label_popularity`): per label ``log(1 + click days) / log(1 + the largest)``, in [0, 1],
  over the training documents; added to each candidate's score with its weight, as the untrained-label offset is
  (labels without a click have 0).

Where a data set records no click days (XC folders, wikispeedia) a pair counts once: the memory is then the exact
text's label set and the popularity its training documents per label. Both weights are chosen out of fold with the
rest of the fusion (0 switches a channel off). Stored as plain arrays (texts JSON, a ``.npz``), never a pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.channel import Channel, ChannelSpec, Proposal
from xc_core.classifier.shortlist import padded_top

MEMORY_DIR = "memory"  # sub-folder of a classifier folder, present only when the served fusion uses the memory
POPULARITY_FILE = "popularity.npy"  # per label, beside fusion.json, only when the served popularity weight > 0


def memory_key(text: str) -> str:
    """The form in which a query matches a training document: lower-cased, whitespace collapsed. Word order
    counts: a sorted set of the distinct words was tried and cost P@5 for no significant gain
    (docs/results/issue-40.md)."""
    return " ".join(text.lower().split())


def label_popularity(clicks: sp.spmatrix) -> np.ndarray:
    """Per label ``log(1 + click days) / log(1 + the largest)`` over the rows of ``clicks``, in [0, 1]."""
    total = np.log1p(np.asarray(sp.csr_matrix(clicks).sum(axis=0), np.float64).ravel())
    top = total.max() if total.size else 0.0
    return (total / top if top > 0 else total).astype(np.float32)


@dataclass
class ClickMemory(Channel):
    """Training query texts (keys, :func:`memory_key`) and their labels' click days, one row per distinct key."""

    keys: list[str]
    clicks: sp.csr_matrix  # (len(keys), n_labels)

    @classmethod
    def fit(cls, texts: list[str], clicks: sp.spmatrix) -> ClickMemory:
        """Documents whose texts share a key are one row (their click days summed); documents without a click
        are left out."""
        clicks = sp.csr_matrix(clicks, dtype=np.float32)
        if len(texts) != clicks.shape[0]:
            raise ValueError(f"click memory: {len(texts)} documents but {clicks.shape[0]} click rows")
        keys = [memory_key(t) for t in texts]
        # a text of spaces only has the empty key: it is remembered for no query
        distinct = sorted(set(k for k, n in zip(keys, np.diff(clicks.indptr), strict=True) if n > 0 and k))
        row = {k: i for i, k in enumerate(distinct)}
        clicked = np.array([i for i in np.flatnonzero(np.diff(clicks.indptr) > 0) if keys[i]], np.int64)
        merge = sp.csr_matrix((np.ones(len(clicked), np.float32), ([row[keys[i]] for i in clicked], clicked)),
                              shape=(len(distinct), clicks.shape[0]))
        merged = sp.csr_matrix(merge @ clicks)
        merged.sort_indices()
        return cls(distinct, merged)

    def __post_init__(self) -> None:
        self._row = {k: i for i, k in enumerate(self.keys)}

    def scores(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(label ids ascending, click days over the row's largest) of the training document with this text; empty
        for a query never asked in training."""
        key = memory_key(text)
        row = self._row.get(key) if key else None
        if row is None:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        lo, hi = self.clicks.indptr[row], self.clicks.indptr[row + 1]
        days = self.clicks.data[lo:hi]
        return self.clicks.indices[lo:hi].astype(np.int64), (days / days.max()).astype(np.float32)

    def search(self, texts: list[str], k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(memory scores, label ids) of each query's remembered labels — its ``k`` most clicked (ties: the lower
        id) when ``k`` is given, so a query that clicked thousands of labels cannot widen every row's shortlist —
        padded to the widest row (−1 ids, score 0); one column of pads when no query is remembered."""
        return padded_top([self.scores(text) for text in texts], k)

    def propose(self, texts: list[str], queries: np.ndarray, depth: int) -> Proposal:
        """A repeated query's ``depth`` most clicked labels, scored by their click days (a new query: none)."""
        return Proposal.listed(*self.search(texts, depth))

    def store(self, folder: Path) -> None:
        self.save(folder / MEMORY_DIR)

    @property
    def megabytes(self) -> float:
        return (self.clicks.data.nbytes + self.clicks.indices.nbytes + self.clicks.indptr.nbytes
                + sum(len(k) for k in self.keys)) / 2**20

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "keys.json").write_text(json.dumps(self.keys))
        sp.save_npz(folder / "clicks.npz", self.clicks)
        return folder

    @classmethod
    def load(cls, folder: Path) -> ClickMemory:
        return cls(json.loads((folder / "keys.json").read_text()), sp.load_npz(folder / "clicks.npz").tocsr())


@dataclass
class LabelPopularity(Channel):
    """The labels' click popularity (:func:`label_popularity`) as a per-label prior: it adds no label to the
    shortlist and reads no query."""

    values: np.ndarray  # (n_labels,) in [0, 1]
    needs_texts = False

    def propose(self, texts: list[str], queries: np.ndarray, depth: int) -> Proposal:
        return Proposal(np.empty((len(queries), 0), np.int64),
                        lambda candidates: self.values[np.maximum(candidates, 0)])

    def label_scores(self) -> np.ndarray:
        return self.values

    def grown(self, n_new: int) -> LabelPopularity:
        return LabelPopularity(np.concatenate([self.values, np.zeros(n_new, np.float32)]))  # no click yet

    @property
    def megabytes(self) -> float:
        return self.values.nbytes / 2**20

    def store(self, folder: Path) -> None:
        np.save(folder / POPULARITY_FILE, np.asarray(self.values, np.float32))


#: the registry entries (``channels.py``): the memory's weight is chosen after α and the text channels', the
#: popularity's with the untrained-label offset
MEMORY = ChannelSpec("memory", "memory_weight", "each", grid=lambda cfg: cfg.memory_weights,
                     fit=lambda data, cfg: ClickMemory.fit(data.texts, data.clicks),
                     load=lambda folder: ClickMemory.load(folder / MEMORY_DIR), saved_as=MEMORY_DIR)
POPULARITY = ChannelSpec("popularity", "popularity_weight", "prior", grid=lambda cfg: cfg.popularity_weights,
                         fit=lambda data, cfg: LabelPopularity(label_popularity(data.clicks)),
                         load=lambda folder: LabelPopularity(np.load(folder / POPULARITY_FILE)),
                         saved_as=POPULARITY_FILE)
