"""The one XC data-set container every stage consumes (training, indexing, evaluation).

Documents (queries, article titles) and labels (ads, keywords, hosts, articles) have ids and texts.
Train and test documents are separate index spaces, as in the Extreme Classification Repository
(``trn_X``/``tst_X``); both share the label space. ``y_train``/``y_test`` are CSR document×label
matrices. Each *anchor set* (RAMEN's graph metadata) has its own anchor texts and two edge lists:
train-document→anchor and label→anchor. Test documents never appear in those, nor among the anchors.
A third, separate list, test-document→anchor (``test_edges``), holds the graph links a test document
has at serving time, for the methods that use the graph at inference (TextGNN, OAK's oracle linker);
no trainer reads it.

On disk (``save``/``load``): Parquet tables plus ``.npz`` matrices and a ``meta.json``::

    <dir>/meta.json  documents.parquet  labels.parquet  y_train.npz  y_test.npz  filter_pairs.parquet
    <dir>/train_filter_pairs.parquet  (optional)
    <dir>/anchors/<name>/anchors.parquet  doc_edges.parquet  label_edges.parquet  [test_edges.parquet]

``test_edges.parquet`` is written only when the set has test edges, and a folder without it loads with
none, so folders written before it existed load unchanged and sets without test edges write the same files.

Item metadata (``label_attributes``: the canonical events' ``brand`` and ``location`` per label, where the source
carries them) are extra columns of ``labels.parquet``, written only when present: a data set without them (aol-1000,
wikispeedia, XC folders) writes and loads exactly as before.
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    import polars as pl

FORMAT_VERSION = 1
#: An anchor set's test-document edges, beside its doc_edges / label_edges; optional (format version unchanged).
TEST_EDGES = "test_edges.parquet"
#: (train document, label) pairs never scored in validation; optional (absent in older folders: none).
TRAIN_FILTER = "train_filter_pairs.parquet"
#: (train document, label, day) click days of event-log data sets; optional (absent: no temporal folds).
PAIR_DAYS = "train_pair_days.parquet"


#: Inverse-propensity constants (A, B) of a data set whose meta names none: the XC repository's general
#: ones (Jain et al. 2016; pyxclib's default). Wikipedia-like sets use (0.5, 0.4), Amazon-like (0.6, 2.6).
DEFAULT_PSP: tuple[float, float] = (0.55, 1.5)
#: ``labels.parquet``'s own columns; any other column is an item attribute (``XCDataset.label_attributes``)
LABEL_COLUMNS = ("label_id", "text", "novel")


def _edges(array: np.ndarray | list[tuple[int, int]] | None) -> np.ndarray:
    out = np.asarray(array if array is not None else np.empty((0, 2)), dtype=np.int64)
    return out.reshape(-1, 2)


@dataclass
class AnchorSet:
    """Graph metadata of one kind (co-session queries, co-clicked items, hyperlinks, categories …).

    ``doc_edges[:, 0]`` indexes *train* documents, ``label_edges[:, 0]`` labels; column 1 indexes
    ``texts``. ``proxy`` marks edges that are ANN text neighbours rather than native graph edges.

    ``test_edges[:, 0]`` indexes *test* documents, column 1 ``texts``: the native graph links a test
    document has at serving time (a test article's own hyperlinks and categories, the other queries of a
    test query's session), to anchors that already exist in the set for train documents or labels —
    test edges never add an anchor, and never point at an anchor that is itself a test document (a test
    article; a query anchor is a train-window query, so never one first asked in the test window). Only
    for methods that use the graph at inference (TextGNN, OAK's oracle linker); trainers, RWR expansion
    and pruning never read them, and the test documents stay out of ``doc_edges``/``label_edges``.
    """

    name: str
    texts: list[str]
    doc_edges: np.ndarray
    label_edges: np.ndarray
    #: None in the constructor: all native (__post_init__ fills both, so they are arrays afterwards)
    doc_proxy: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    label_proxy: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    #: None in the constructor: no test edges (__post_init__ makes it an empty (0, 2) array)
    test_edges: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__

    def __post_init__(self) -> None:
        self.doc_edges = _edges(self.doc_edges)
        self.label_edges = _edges(self.label_edges)
        self.test_edges = _edges(self.test_edges)
        if self.doc_proxy is None:
            self.doc_proxy = np.zeros(len(self.doc_edges), dtype=bool)
        if self.label_proxy is None:
            self.label_proxy = np.zeros(len(self.label_edges), dtype=bool)

    def doc_matrix(self, n_docs: int) -> sp.csr_matrix:
        return _incidence(self.doc_edges, n_docs, len(self.texts))

    def label_matrix(self, n_labels: int) -> sp.csr_matrix:
        return _incidence(self.label_edges, n_labels, len(self.texts))

    def test_matrix(self, n_test: int) -> sp.csr_matrix:
        """Test document × anchor incidence of ``test_edges`` (inference-time graph only)."""
        return _incidence(self.test_edges, n_test, len(self.texts))

    def coverage(self, n_docs: int, n_labels: int) -> dict[str, float]:
        """Share of train documents / labels with at least one anchor of this set."""
        docs = np.unique(self.doc_edges[:, 0]).size / max(n_docs, 1)
        labels = np.unique(self.label_edges[:, 0]).size / max(n_labels, 1)
        return {"doc_coverage": round(float(docs), 4), "label_coverage": round(float(labels), 4)}


def _incidence(edges: np.ndarray, rows: int, cols: int) -> sp.csr_matrix:
    data = np.ones(len(edges), dtype=np.float32)
    matrix = sp.csr_matrix((data, (edges[:, 0], edges[:, 1])), shape=(rows, cols))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix


@dataclass
class XCDataset:
    """Documents, labels, train/test relevance and anchor sets of one data set."""

    name: str
    train_texts: list[str]
    test_texts: list[str]
    label_texts: list[str]
    y_train: sp.csr_matrix
    y_test: sp.csr_matrix
    #: ids; None (or empty) in the constructor: numbered "trn0", "tst0", "lbl0", ... by __post_init__
    train_ids: list[str] = None  # type: ignore[assignment]  # filled in __post_init__
    test_ids: list[str] = None  # type: ignore[assignment]  # filled in __post_init__
    label_ids: list[str] = None  # type: ignore[assignment]  # filled in __post_init__
    anchor_sets: dict[str, AnchorSet] = field(default_factory=dict)
    #: (test document, label) pairs removed from predictions before scoring (XC repo ``filter_labels``).
    filter_pairs: np.ndarray = field(default_factory=lambda: np.empty((0, 2), dtype=np.int64))
    #: per test document: its text was never a train document (cold-start queries); None in the
    #: constructor: derived by __post_init__, as label_novel (from y_train)
    test_novel: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    #: per label: never positive in train (novel keywords / hosts)
    label_novel: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__
    #: per test document, optional frequency decile (0 = head) where the data has query counts
    test_decile: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: (train document, label) pairs the same rule removes from every *validation* ranking (XC repo
    #: ``filter_labels_train.txt``, or own labels found by text): validation mirrors the test filter.
    train_filter_pairs: np.ndarray = field(default_factory=lambda: np.empty((0, 2), dtype=np.int64))
    #: item metadata per label, by attribute (``brand``, ``location``): one value or None per label; only
    #: attributes some label carries (empty when the source has none: aol-1000, wikispeedia, XC folders)
    label_attributes: dict[str, list[str | None]] = field(default_factory=dict)
    #: (train document, label, day) for every day a training pair was clicked (one row per pair and day), days counted
    #: from the train window's first day: event logs only (empty elsewhere). Out-of-fold decisions cut time blocks
    #: with it, so a validation row meets the model as a test query does; every pair is one of the data set's own
    #: ``y_train`` pairs (a method that rewrites ``y_train`` for its training keeps the clicks' days).
    train_pair_days: np.ndarray = field(default_factory=lambda: np.empty((0, 3), dtype=np.int64))

    def __post_init__(self) -> None:
        self.y_train = sp.csr_matrix(self.y_train, dtype=np.float32)
        self.y_test = sp.csr_matrix(self.y_test, dtype=np.float32)
        self.train_ids = self.train_ids or [f"trn{i}" for i in range(len(self.train_texts))]
        self.test_ids = self.test_ids or [f"tst{i}" for i in range(len(self.test_texts))]
        self.label_ids = self.label_ids or [f"lbl{i}" for i in range(len(self.label_texts))]
        self.filter_pairs = _edges(self.filter_pairs)
        self.train_filter_pairs = _edges(self.train_filter_pairs)
        self.train_pair_days = np.asarray(self.train_pair_days, dtype=np.int64).reshape(-1, 3)
        if self.label_novel is None:
            self.label_novel = np.asarray(self.y_train.sum(axis=0)).ravel() == 0
        if self.test_novel is None:
            seen = set(self.train_texts)
            self.test_novel = np.array([t not in seen for t in self.test_texts], dtype=bool)
        self.validate()

    # -- invariants ----------------------------------------------------------------------------
    def validate(self) -> None:
        """Shapes agree and every edge points inside its spaces; raises ValueError naming the part."""
        n_train, n_test, n_labels = len(self.train_texts), len(self.test_texts), len(self.label_texts)
        if self.y_train.shape != (n_train, n_labels):
            raise ValueError(f"{self.name}: y_train shape {self.y_train.shape} != ({n_train}, {n_labels})")
        if self.y_test.shape != (n_test, n_labels):
            raise ValueError(f"{self.name}: y_test shape {self.y_test.shape} != ({n_test}, {n_labels})")
        for pairs, n_docs, what in ((self.filter_pairs, n_test, "filter_pairs"),
                                    (self.train_filter_pairs, n_train, "train_filter_pairs")):
            if len(pairs) and (pairs.min() < 0 or pairs[:, 0].max() >= n_docs or pairs[:, 1].max() >= n_labels):
                raise ValueError(f"{self.name}: {what} point outside (documents, labels)")
        days = self.train_pair_days
        if len(days) and (days.min() < 0 or days[:, 0].max() >= n_train or days[:, 1].max() >= n_labels):
            raise ValueError(f"{self.name}: train_pair_days point outside (train documents, labels)")
        for flags, n, what in ((self.test_novel, n_test, "test_novel"), (self.label_novel, n_labels, "label_novel"),
                               (self.test_decile, n_test, "test_decile")):
            if flags is not None and len(flags) != n:
                raise ValueError(f"{self.name}: {what} has {len(flags)} entries, expected {n}")
        for attribute, values in self.label_attributes.items():
            if attribute in LABEL_COLUMNS or len(values) != n_labels:
                raise ValueError(f"{self.name}: label attribute '{attribute}' has {len(values)} entries, expected "
                                 f"{n_labels} (and may not be named {', '.join(LABEL_COLUMNS)})")
        for a in self.anchor_sets.values():
            for edges, rows, side, space in ((a.doc_edges, n_train, "doc_edges", "train documents"),
                                             (a.label_edges, n_labels, "label_edges", "labels"),
                                             (a.test_edges, n_test, "test_edges", "test documents")):
                if len(edges) and (edges.min() < 0 or edges[:, 0].max() >= rows or edges[:, 1].max() >= len(a.texts)):
                    raise ValueError(
                        f"{self.name}: anchor set '{a.name}' {side} point outside the index spaces: rows must be "
                        f"{space} 0..{rows - 1}, anchors 0..{len(a.texts) - 1}; found rows "
                        f"{edges[:, 0].min()}..{edges[:, 0].max()}, anchors {edges[:, 1].min()}..{edges[:, 1].max()}")
            if len(a.doc_proxy) != len(a.doc_edges) or len(a.label_proxy) != len(a.label_edges):
                raise ValueError(f"{self.name}: anchor set '{a.name}' proxy flags do not match its edges")

    def document_space_sets(self) -> list[str]:
        """Anchor sets whose anchors are documents (queries, articles), per ``meta["anchor_spaces"]``; a set
        without an entry counts as one. Only these can hold held-out or test documents."""
        spaces = self.meta.get("anchor_spaces", {})
        return [name for name in self.anchor_sets if spaces.get(name, "documents") == "documents"]

    def click_days(self, before_day: int | None = None) -> sp.csr_matrix:
        """(training documents × labels) click days of each pair — days before ``before_day`` only, when given — from
        ``train_pair_days``; where the data set records no days, its 0/1 training labels (a pair counts once). The
        classifier's click memory and the trainer's weighted positives both read it."""
        days = self.train_pair_days
        if not len(days):
            return sp.csr_matrix(self.y_train, dtype=np.float32)
        if before_day is not None:
            days = days[days[:, 2] < before_day]
        counts = sp.csr_matrix((np.ones(len(days), np.float32), (days[:, 0], days[:, 1])), shape=self.y_train.shape)
        counts.sum_duplicates()
        return counts

    @property
    def psp_constants(self) -> tuple[float, float]:
        """(A, B) of the inverse-propensity model: the meta's ``psp_A``/``psp_B``, else :data:`DEFAULT_PSP`."""
        return float(self.meta.get("psp_A", DEFAULT_PSP[0])), float(self.meta.get("psp_B", DEFAULT_PSP[1]))

    def own_label_pairs(self, rows: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        """(position in ``rows``, position in ``columns``) of the train documents' own labels, never scored in
        validation as the test filter removes a test document's own label: the label with the document's id
        (wikispeedia, XC folders with shared ids) and every pair of :attr:`train_filter_pairs` (an XC folder's
        ``filter_labels_train.txt``, or own labels found by text). ``columns``: the label ids ranked (default all)."""
        rows = np.asarray(rows, np.int64)
        columns = np.arange(len(self.label_texts)) if columns is None else np.asarray(columns, np.int64)
        column = {self.label_ids[j]: c for c, j in enumerate(columns)}
        by_id = [(r, column[self.train_ids[i]]) for r, i in enumerate(rows) if self.train_ids[i] in column]
        row_at = np.full(len(self.train_texts), -1, np.int64)
        row_at[rows] = np.arange(len(rows))
        col_at = np.full(len(self.label_texts), -1, np.int64)
        col_at[columns] = np.arange(len(columns))
        listed = np.stack([row_at[self.train_filter_pairs[:, 0]], col_at[self.train_filter_pairs[:, 1]]], axis=1)
        listed = listed[(listed >= 0).all(axis=1)]
        pairs = np.concatenate([np.array(by_id, np.int64).reshape(-1, 2), listed.reshape(-1, 2)])
        return np.unique(pairs, axis=0) if len(pairs) else pairs

    def validation_view(self, train_rows: np.ndarray, val_rows: np.ndarray, y_fit: sp.spmatrix | None = None,
                        y_val: sp.spmatrix | None = None) -> XCDataset:
        """The validation rows as a test split: ``val_rows`` of the training documents become the test documents
        (their training labels the ground truth, their own labels the filter, as for a test document), and
        ``train_rows`` the training documents. Labels stay the same space; a label no ``train_rows`` document
        clicked is novel here. Anchor sets keep the train rows' edges and give the validation rows their own edges as
        test edges (the graph a test document has at serving time). Rows in neither list are dropped. ``y_fit`` /
        ``y_val``: the training rows' labels and the validation rows' truth where they differ from ``y_train`` (a
        temporal split: the clicks before / in the validation days; a repeated query is then in both lists)."""
        train_rows, val_rows = np.asarray(train_rows, np.int64), np.asarray(val_rows, np.int64)
        y = sp.csr_matrix(self.y_train)
        fit = y if y_fit is None else sp.csr_matrix(y_fit)
        truth = y if y_val is None else sp.csr_matrix(y_val)
        own = self.own_label_pairs(val_rows)
        train_at = np.full(len(self.train_texts), -1, np.int64)
        train_at[train_rows] = np.arange(len(train_rows))
        val_at = np.full(len(self.train_texts), -1, np.int64)
        val_at[val_rows] = np.arange(len(val_rows))

        def remap(edges: np.ndarray, at: np.ndarray) -> np.ndarray:
            rows = at[edges[:, 0]]
            return np.stack([rows, edges[:, 1]], axis=1)[rows >= 0]

        anchor_sets = {}
        for name, a in self.anchor_sets.items():
            kept = train_at[a.doc_edges[:, 0]] >= 0
            anchor_sets[name] = AnchorSet(name, a.texts, remap(a.doc_edges, train_at), a.label_edges,
                                          doc_proxy=a.doc_proxy[kept], label_proxy=a.label_proxy,
                                          test_edges=remap(a.doc_edges[~a.doc_proxy], val_at))
        return XCDataset(
            name=self.name, train_texts=[self.train_texts[i] for i in train_rows],
            test_texts=[self.train_texts[i] for i in val_rows], label_texts=self.label_texts,
            y_train=fit[train_rows], y_test=truth[val_rows], train_ids=[self.train_ids[i] for i in train_rows],
            test_ids=[self.train_ids[i] for i in val_rows], label_ids=self.label_ids, anchor_sets=anchor_sets,
            filter_pairs=own, meta={**self.meta, "split": "validation"},
            train_filter_pairs=self.own_label_pairs(train_rows), label_attributes=self.label_attributes)

    @property
    def n_labels(self) -> int:
        return len(self.label_texts)

    def summary(self) -> dict[str, Any]:
        return {
            "dataset": self.name,
            "documents": len(self.train_texts) + len(self.test_texts),
            "labels": self.n_labels,
            "train_documents": len(self.train_texts),
            "test_documents": len(self.test_texts),
            "train_pairs": int(self.y_train.nnz),
            "test_pairs": int(self.y_test.nnz),
            "novel_test_documents": int(np.sum(self.test_novel)),
            "novel_labels": int(np.sum(self.label_novel)),
            # own-label pairs removed from test rankings / from validation rankings (train documents)
            "filter_pairs": {"test": len(self.filter_pairs),
                             "validation": len(self.own_label_pairs(np.arange(len(self.train_texts))))},
            **({"own_label_pairs": self.meta["own_label_pairs"]} if "own_label_pairs" in self.meta else {}),
            # item metadata: labels carrying each attribute
            **({"label_attributes": {a: sum(v is not None for v in values)
                                     for a, values in self.label_attributes.items()}} if self.label_attributes else {}),
            "anchor_sets": {
                name: {"anchors": len(a.texts), "doc_edges": len(a.doc_edges), "label_edges": len(a.label_edges),
                       **a.coverage(len(self.train_texts), self.n_labels), "test_edges": len(a.test_edges),
                       "test_coverage": round(np.unique(a.test_edges[:, 0]).size / max(len(self.test_texts), 1), 4)}
                for name, a in self.anchor_sets.items()
            },
        }

    # -- persistence ---------------------------------------------------------------------------
    def save(self, directory: Path) -> Path:
        """Write atomically: into a sibling temp folder, then swap it in."""
        directory = Path(directory)
        tmp = directory.with_name(f".{directory.name}.tmp-{uuid.uuid4().hex[:8]}")
        tmp.mkdir(parents=True)
        try:
            self._write(tmp)
            if directory.exists():
                shutil.rmtree(directory)
            tmp.rename(directory)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return directory

    def _write(self, out: Path) -> None:
        import polars as pl  # persistence only: training needs no polars (the GPU image has none)

        docs = pl.concat([
            pl.DataFrame({"doc_id": self.train_ids, "text": self.train_texts, "split": "train"},
                         schema={"doc_id": pl.String, "text": pl.String, "split": pl.String}),
            pl.DataFrame({"doc_id": self.test_ids, "text": self.test_texts, "split": "test"},
                         schema={"doc_id": pl.String, "text": pl.String, "split": pl.String}),
        ])
        novel = np.concatenate([np.zeros(len(self.train_texts), bool), np.asarray(self.test_novel, bool)])
        decile = (np.concatenate([np.full(len(self.train_texts), -1), self.test_decile])
                  if self.test_decile is not None else np.full(len(novel), -1))
        docs.with_columns(novel=pl.Series(novel), decile=pl.Series(decile, dtype=pl.Int16)).write_parquet(
            out / "documents.parquet")
        pl.DataFrame({"label_id": self.label_ids, "text": self.label_texts, "novel": self.label_novel,
                      **self.label_attributes},
                     schema={"label_id": pl.String, "text": pl.String, "novel": pl.Boolean,
                             **dict.fromkeys(self.label_attributes, pl.String)}).write_parquet(
            out / "labels.parquet")
        sp.save_npz(out / "y_train.npz", self.y_train)
        sp.save_npz(out / "y_test.npz", self.y_test)
        _edge_frame(self.filter_pairs, "doc", "label").write_parquet(out / "filter_pairs.parquet")
        _edge_frame(self.train_filter_pairs, "doc", "label").write_parquet(out / TRAIN_FILTER)
        if len(self.train_pair_days):  # event logs only: other folders write exactly what they wrote before
            pl.DataFrame({"doc": self.train_pair_days[:, 0], "label": self.train_pair_days[:, 1],
                          "day": self.train_pair_days[:, 2]}, schema=dict.fromkeys(("doc", "label", "day"), pl.Int64)
                         ).write_parquet(out / PAIR_DAYS)
        for name, a in self.anchor_sets.items():
            folder = out / "anchors" / name
            folder.mkdir(parents=True)
            pl.DataFrame({"text": a.texts}, schema={"text": pl.String}).with_row_index("anchor").write_parquet(
                folder / "anchors.parquet")
            _edge_frame(a.doc_edges, "doc", "anchor", a.doc_proxy).write_parquet(folder / "doc_edges.parquet")
            _edge_frame(a.label_edges, "label", "anchor", a.label_proxy).write_parquet(folder / "label_edges.parquet")
            if len(a.test_edges):  # absent when empty: older readers and older folders agree on that case
                _edge_frame(a.test_edges, "test_doc", "anchor").write_parquet(folder / TEST_EDGES)
        meta = {**self.meta, "name": self.name, "format_version": FORMAT_VERSION,
                "anchor_sets": list(self.anchor_sets)}
        (out / "meta.json").write_text(json.dumps(meta, indent=2, default=_json_default) + "\n")

    @classmethod
    def load(cls, directory: Path) -> XCDataset:
        directory = Path(directory)
        meta_path = directory / "meta.json"
        if not meta_path.exists():
            raise FileNotFoundError(f"{directory}: no meta.json — not an xc data set (build it with `xc dataset`)")
        meta = json.loads(meta_path.read_text())
        import polars as pl  # persistence only, as in _write

        docs = pl.read_parquet(directory / "documents.parquet")
        train, test = docs.filter(pl.col("split") == "train"), docs.filter(pl.col("split") == "test")
        labels = pl.read_parquet(directory / "labels.parquet")
        anchors = {}
        for name in meta.get("anchor_sets", []):
            folder = directory / "anchors" / name
            doc_edges = pl.read_parquet(folder / "doc_edges.parquet")
            label_edges = pl.read_parquet(folder / "label_edges.parquet")
            test_edges = (pl.read_parquet(folder / TEST_EDGES).select("test_doc", "anchor").to_numpy()
                          if (folder / TEST_EDGES).exists() else _edges(None))
            anchors[name] = AnchorSet(
                name=name, texts=pl.read_parquet(folder / "anchors.parquet").get_column("text").to_list(),
                doc_edges=doc_edges.select("doc", "anchor").to_numpy(),
                label_edges=label_edges.select("label", "anchor").to_numpy(),
                doc_proxy=doc_edges.get_column("proxy").to_numpy(),
                label_proxy=label_edges.get_column("proxy").to_numpy(),
                test_edges=test_edges,
            )
        decile = test.get_column("decile").to_numpy()
        return cls(
            name=meta["name"], train_texts=train.get_column("text").to_list(),
            test_texts=test.get_column("text").to_list(),
            label_texts=labels.get_column("text").to_list(), y_train=sp.load_npz(directory / "y_train.npz"),
            y_test=sp.load_npz(directory / "y_test.npz"), train_ids=train.get_column("doc_id").to_list(),
            test_ids=test.get_column("doc_id").to_list(), label_ids=labels.get_column("label_id").to_list(),
            anchor_sets=anchors, filter_pairs=pl.read_parquet(directory / "filter_pairs.parquet").to_numpy(),
            # a folder saved before validation had a filter: none (wikispeedia's own labels are found by id)
            train_filter_pairs=(pl.read_parquet(directory / TRAIN_FILTER).to_numpy()
                                if (directory / TRAIN_FILTER).exists() else _edges(None)),
            test_novel=test.get_column("novel").to_numpy(), label_novel=labels.get_column("novel").to_numpy(),
            test_decile=decile if (decile >= 0).any() else None,
            train_pair_days=(pl.read_parquet(directory / PAIR_DAYS).select("doc", "label", "day").to_numpy()
                             if (directory / PAIR_DAYS).exists() else np.empty((0, 3), np.int64)),
            label_attributes={c: labels.get_column(c).to_list() for c in labels.columns if c not in LABEL_COLUMNS},
            meta={k: v for k, v in meta.items() if k not in ("name", "format_version", "anchor_sets")},
        )


def _json_default(value: object) -> object:
    """numpy scalars as numbers (not strings); anything else as its string form."""
    return value.item() if isinstance(value, np.generic) else str(value)


def _edge_frame(edges: np.ndarray, left: str, right: str, proxy: np.ndarray | None = None) -> pl.DataFrame:
    import polars as pl

    frame = pl.DataFrame({left: edges[:, 0], right: edges[:, 1]}, schema={left: pl.Int64, right: pl.Int64})
    if proxy is not None:
        frame = frame.with_columns(proxy=pl.Series(np.asarray(proxy, dtype=bool)))
    return frame
