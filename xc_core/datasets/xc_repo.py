"""The Extreme Classification Repository's raw-text format (LF-WikiSeeAlsoTitles-320K, LF-AmazonTitles-131K …).

One folder per data set::

    trn_X.txt  tst_X.txt      one document text per line, optionally ``id->text``
    Y.txt                     one label text per line (``lbl_X.txt`` in some releases), same rule
    trn_X_Y.txt  tst_X_Y.txt  header ``N L``, then one line per document: ``label:value`` pairs
                              separated by spaces (an empty line = no labels)
    filter_labels_test.txt    optional: lines ``doc label`` removed from predictions before scoring
    filter_labels_train.txt   optional: the same for training documents, removed from every validation ranking
                              (validation rows are training documents, so validation mirrors the test filter)

A split without its filter file gets its *own-label pairs* by text instead: a document whose normalised text
(NFKC, case-folded, whitespace collapsed) equals a label's is that label's own document, as in LF data sets
where most documents are themselves labels; a pair that is a positive of the document is kept (scored). The
data set's meta says where each split's pairs came from and how many there are (``own_label_pairs``).

A text file is read as ``id->text`` only when *every* line contains ``->`` (split at the first
one), otherwise as plain text, so a plain title that happens to contain an arrow stays intact.

Extension (not in the repository's releases): RAMEN-style graph metadata as one folder per anchor
set, ``anchors/<name>/``, holding ``anchors.txt`` (one anchor text per line, never id-prefixed),
``doc_edges.txt`` (lines ``train_doc anchor [proxy]``) and ``label_edges.txt`` (lines
``label anchor [proxy]``); ``proxy`` is 1 for an ANN text-neighbour edge, 0 (the default) for a
native graph edge. ``anchors/names.txt`` (optional) lists the sets in order; without it, name order.
The format has no test-document edges, so a set read from a folder has no ``test_edges`` and writing one
leaves them out (logged).

``write_xc_repo`` always writes ids, so ``read_xc_repo(write_xc_repo(d))`` gives back the texts,
ids, matrices, filter pairs and anchor sets exactly (less any ``test_edges``).
"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from xc_core.datasets.container import DEFAULT_PSP, AnchorSet, XCDataset

log = logging.getLogger(__name__)

ID_SEPARATOR = "->"
LABEL_TEXT_FILES = ("Y.txt", "lbl_X.txt")
FILTER_FILE = "filter_labels_test.txt"
TRAIN_FILTER_FILE = "filter_labels_train.txt"
ANCHOR_NAMES_FILE = "names.txt"


class XCRepoFormatError(ValueError):
    """A file of an XC-repository folder is malformed: names the file, the line, the problem and the fix."""

    def __init__(self, path: object, line: int, problem: str, fix: str) -> None:
        self.path, self.line = str(path), line
        super().__init__(f"{path}:{line}: {problem}; fix: {fix}")


# -- lines and texts ---------------------------------------------------------------------------
def read_lines(path: Path) -> list[str]:
    """Lines split on ``\\n`` only (titles may hold other Unicode line breaks); CRLF tolerated."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing; an XC-repository folder needs trn_X.txt, tst_X.txt, "
                                "Y.txt (or lbl_X.txt), trn_X_Y.txt and tst_X_Y.txt")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise XCRepoFormatError(path, data.count(b"\n", 0, exc.start) + 1, "not UTF-8",
                                "re-encode the file as UTF-8") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_texts(path: Path, allow_ids: bool = True) -> tuple[list[str] | None, list[str]]:
    """(ids or None, texts) of a one-text-per-line file; ids only if every line is ``id->text``."""
    series = pl.Series("line", read_lines(path), dtype=pl.String)
    if not allow_ids or len(series) == 0 or not series.str.contains(ID_SEPARATOR, literal=True).all():
        return None, series.to_list()
    parts = series.str.splitn(ID_SEPARATOR, 2).struct.unnest()
    return parts.get_column("field_0").to_list(), parts.get_column("field_1").to_list()


# -- sparse label files ------------------------------------------------------------------------
def read_label_matrix(path: Path, n_rows: int | None = None, n_cols: int | None = None) -> sp.csr_matrix:
    """A ``trn_X_Y.txt``-style file as CSR, checked against its header and the expected shape."""
    lines = read_lines(path)
    rows, cols = _header(path, lines[0] if lines else "")
    _expect(path, 1, "rows", rows, n_rows)
    _expect(path, 1, "columns", cols, n_cols)
    if len(lines) - 1 != rows:
        raise XCRepoFormatError(path, 1, f"header says {rows} rows but {len(lines) - 1} lines follow it",
                                "fix the header's first number or the missing/extra lines")
    tokens = _tokens(lines[1:])
    _check_tokens(path, tokens, cols)
    return sp.csr_matrix((tokens.get_column("value").to_numpy(),
                          (tokens.get_column("row").to_numpy(), tokens.get_column("col").to_numpy())),
                         shape=(rows, cols), dtype=np.float32)


def _header(path: Path, header: str) -> tuple[int, int]:
    parts = header.split()
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise XCRepoFormatError(path, 1, f"header {header!r} is not 'N L' (two non-negative integers)",
                                "start the file with a line '<number of rows> <number of labels>'")
    return int(parts[0]), int(parts[1])


def _expect(path: Path, line: int, what: str, found: int, expected: int | None) -> None:
    if expected is not None and found != expected:
        raise XCRepoFormatError(path, line, f"header gives {found} {what}, the data set has {expected}",
                                "make the header agree with the text files (one line per text)")


def _tokens(lines: list[str]) -> pl.DataFrame:
    """``row, line, token, col, value``: every ``label:value`` token, parsed leniently (nulls = bad)."""
    frame = pl.DataFrame({"text": lines}, schema={"text": pl.String}).with_row_index("row")
    frame = frame.with_columns(pl.col("row").cast(pl.Int64), line=pl.col("row").cast(pl.Int64) + 2)
    tokens = frame.select("row", "line", token=pl.col("text").str.extract_all(r"\S+")).explode("token")
    tokens = tokens.filter(pl.col("token").is_not_null())
    parts = pl.col("token").str.split_exact(":", 1)
    return tokens.with_columns(
        col=parts.struct.field("field_0").cast(pl.Int64, strict=False),
        value=parts.struct.field("field_1").cast(pl.Float32, strict=False))


def _check_tokens(path: Path, tokens: pl.DataFrame, n_cols: int) -> None:
    bad = tokens.filter(pl.col("col").is_null() | pl.col("value").is_null()
                        | (pl.col("token").str.count_matches(":", literal=True) != 1))
    _raise_first(path, bad, "token {token!r} is not 'label:value'", "write each label as <index>:<value>")
    outside = tokens.filter((pl.col("col") < 0) | (pl.col("col") >= n_cols))
    _raise_first(path, outside, f"label index in {{token!r}} outside 0..{n_cols - 1}",
                 "use 0-based label indices below the header's label count, or raise that count")
    twice = tokens.filter(pl.struct("row", "col").is_duplicated())
    _raise_first(path, twice, "label in {token!r} appears twice on the line", "keep one entry per label")


def _raise_first(path: Path, bad: pl.DataFrame, problem: str, fix: str) -> None:
    if len(bad):
        row = bad.sort("line").row(0, named=True)
        raise XCRepoFormatError(path, row["line"], problem.format(**row), fix)


def write_label_matrix(matrix: sp.csr_matrix, path: Path) -> None:
    """Header ``N L`` and one ``label:value`` line per row, values in float32's shortest exact form."""
    coo = sp.csr_matrix(matrix, dtype=np.float32).tocoo()
    pairs = pl.DataFrame({"row": coo.row.astype(np.int64), "col": coo.col.astype(np.int64),
                          "value": coo.data}, schema={"row": pl.Int64, "col": pl.Int64, "value": pl.Float32})
    lines = (pairs.sort("row", "col")
             .select("row", token=pl.concat_str(pl.col("col").cast(pl.String), pl.lit(":"),
                                               pl.col("value").cast(pl.String)))
             .group_by("row", maintain_order=True).agg(pl.col("token").str.join(" ")))
    every = pl.DataFrame({"row": np.arange(matrix.shape[0], dtype=np.int64)}, schema={"row": pl.Int64})
    body = every.join(lines, on="row", how="left").sort("row").get_column("token").fill_null("").to_list()
    _write_lines(path, [f"{matrix.shape[0]} {matrix.shape[1]}", *body])


# -- integer tables (filter pairs, anchor edges) -----------------------------------------------
def read_int_rows(path: Path, bounds: tuple[int, ...], names: tuple[str, ...], optional_last: bool = False
                  ) -> np.ndarray:
    """Whitespace-separated integer rows (blank lines skipped), each column checked against ``bounds``."""
    lines = read_lines(path)
    frame = (pl.DataFrame({"text": lines}, schema={"text": pl.String}).with_row_index("line", offset=1)
             .with_columns(pl.col("line").cast(pl.Int64), fields=pl.col("text").str.extract_all(r"\S+"))
             .filter(pl.col("fields").list.len() > 0))
    width = len(bounds)
    allowed = [width - 1, width] if optional_last else [width]
    bad = frame.filter(~pl.col("fields").list.len().is_in(allowed))
    _raise_first(path, bad, f"{{text!r}} is not {' '.join(names)}", f"write {len(names)} integers per line")
    if optional_last:
        frame = frame.with_columns(pl.col("fields").list.concat(pl.lit(["0"])).list.head(width))
    ints = frame.with_columns(pl.col("fields").list.get(i).cast(pl.Int64, strict=False).alias(n)
                              for i, n in enumerate(names))
    for name, bound in zip(names, bounds, strict=True):
        wrong = ints.filter(pl.col(name).is_null() | (pl.col(name) < 0) | (pl.col(name) >= bound))
        _raise_first(path, wrong, f"{name} in {{text!r}} is not an integer in 0..{bound - 1}",
                     f"use 0-based {name} indices below {bound}")
    return ints.select(names).to_numpy().astype(np.int64).reshape(-1, width)


def _write_int_rows(path: Path, rows: np.ndarray) -> None:
    frame = pl.DataFrame(np.asarray(rows, dtype=np.int64))
    text = frame.select(pl.concat_str(pl.all().cast(pl.String), separator=" ")).to_series().to_list()
    _write_lines(path, text)


# -- anchor sets (this module's extension) -----------------------------------------------------
def read_anchor_sets(folder: Path, n_train: int, n_labels: int) -> dict[str, AnchorSet]:
    """The ``anchors/<name>/`` folders in ``anchors/names.txt`` order (else name order); {} without ``anchors/``."""
    root = folder / "anchors"
    if not root.is_dir():
        return {}
    listed = root / ANCHOR_NAMES_FILE
    names = (read_lines(listed) if listed.exists()
             else sorted(sub.name for sub in root.iterdir() if sub.is_dir()))
    for line, name in enumerate(names, start=1):
        if not (root / name).is_dir():
            raise XCRepoFormatError(listed, line, f"anchor set {name!r} has no folder anchors/{name}/",
                                    "add the folder or delete the line")
    return {name: _read_anchor_set(root / name, n_train, n_labels) for name in names}


def _read_anchor_set(folder: Path, n_train: int, n_labels: int) -> AnchorSet:
    _, texts = read_texts(folder / "anchors.txt", allow_ids=False)
    n = len(texts)
    doc = read_int_rows(folder / "doc_edges.txt", (n_train, n, 2), ("doc", "anchor", "proxy"), optional_last=True)
    lab = read_int_rows(folder / "label_edges.txt", (n_labels, n, 2), ("label", "anchor", "proxy"),
                        optional_last=True)
    return AnchorSet(name=folder.name, texts=texts, doc_edges=doc[:, :2], label_edges=lab[:, :2],
                     doc_proxy=doc[:, 2].astype(bool), label_proxy=lab[:, 2].astype(bool))


def _write_anchor_set(anchor_set: AnchorSet, folder: Path) -> None:
    folder.mkdir(parents=True)
    if len(anchor_set.test_edges):
        log.warning("%s: %d test edges of anchor set %r not written (the format has no test-document edges)",
                    folder, len(anchor_set.test_edges), anchor_set.name)
    _check_texts(folder / "anchors.txt", anchor_set.texts, "anchor text")
    _write_lines(folder / "anchors.txt", anchor_set.texts)
    for side, edges, proxy in (("doc", anchor_set.doc_edges, anchor_set.doc_proxy),
                               ("label", anchor_set.label_edges, anchor_set.label_proxy)):
        flags = np.asarray(proxy, dtype=np.int64).reshape(-1, 1)
        _write_int_rows(folder / f"{side}_edges.txt", np.hstack([edges, flags]))


# -- own-label pairs -----------------------------------------------------------------------------
def normalised(texts: list[str]) -> pl.Series:
    """NFKC, case-folded, whitespace-collapsed and stripped texts: what "the same title" means here."""
    series = pl.Series("text", texts, dtype=pl.String)
    return (series.str.normalize("NFKC").str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars())


def own_label_pairs_by_text(doc_texts: list[str], label_texts: list[str], y: sp.csr_matrix) -> np.ndarray:
    """(document, label) pairs whose normalised texts are equal and that are not a positive of the document:
    the split's own-label pairs when its folder ships no filter file (empty texts never match)."""
    docs = pl.DataFrame({"doc": np.arange(len(doc_texts), dtype=np.int64), "key": normalised(doc_texts)})
    labels = pl.DataFrame({"label": np.arange(len(label_texts), dtype=np.int64), "key": normalised(label_texts)})
    pairs = docs.filter(pl.col("key") != "").join(labels, on="key").select("doc", "label").sort("doc", "label")
    found = pairs.to_numpy().astype(np.int64).reshape(-1, 2)
    if not len(found):
        return found
    positive = np.asarray(sp.csr_matrix(y)[found[:, 0], found[:, 1]]).ravel() != 0
    return found[~positive]


def _split_filter(folder: Path, file: str, texts: list[str], label_texts: list[str],
                  y: sp.csr_matrix) -> tuple[np.ndarray, str]:
    """A split's filter pairs and where they came from: its filter file, else own labels found by text."""
    path = folder / file
    if path.exists():
        return read_int_rows(path, (len(texts), len(label_texts)), ("doc", "label")), file
    return own_label_pairs_by_text(texts, label_texts, y), "normalised text (no filter file)"


#: share of training documents that are their own label's text above which ``read_xc_repo`` warns
OWN_LABEL_WARN_SHARE = 0.05


# -- the data set ------------------------------------------------------------------------------
def _label_text_file(folder: Path) -> Path:
    for name in LABEL_TEXT_FILES:
        if (folder / name).exists():
            return folder / name
    raise FileNotFoundError(f"{folder}: no label texts; expected {' or '.join(LABEL_TEXT_FILES)} "
                            "with one label text per line")


def read_xc_repo(folder: Path, name: str | None = None, *, psp_A: float = DEFAULT_PSP[0],
                 psp_B: float = DEFAULT_PSP[1]) -> XCDataset:  # A, B: the propensity model's names
    """An XC-repository folder as an ``XCDataset`` named ``name`` (default: the folder's name).

    The format has no metadata, so the inverse-propensity constants come from the caller; the
    defaults 0.55 / 1.5 are the repository's general ones (Jain et al. 2016), Wikipedia sets use 0.5 / 0.4.
    """
    folder = Path(folder)
    train_ids, train_texts = read_texts(folder / "trn_X.txt")
    test_ids, test_texts = read_texts(folder / "tst_X.txt")
    label_ids, label_texts = read_texts(_label_text_file(folder))
    n_labels = len(label_texts)
    y_train = read_label_matrix(folder / "trn_X_Y.txt", len(train_texts), n_labels)
    y_test = read_label_matrix(folder / "tst_X_Y.txt", len(test_texts), n_labels)
    test_pairs, test_source = _split_filter(folder, FILTER_FILE, test_texts, label_texts, y_test)
    train_pairs, train_source = _split_filter(folder, TRAIN_FILTER_FILE, train_texts, label_texts, y_train)
    own = {"train": {"pairs": len(train_pairs), "documents": int(np.unique(train_pairs[:, 0]).size),
                     "source": train_source},
           "test": {"pairs": len(test_pairs), "documents": int(np.unique(test_pairs[:, 0]).size),
                    "source": test_source}}
    _report_own_labels(folder, own, len(train_texts))
    return XCDataset(
        name=name or folder.name, train_texts=train_texts, test_texts=test_texts, label_texts=label_texts,
        # a file without ids gives None: XCDataset numbers those documents or labels itself
        y_train=y_train, y_test=y_test, train_ids=train_ids, test_ids=test_ids, label_ids=label_ids,  # type: ignore[arg-type]
        anchor_sets=read_anchor_sets(folder, len(train_texts), n_labels),
        filter_pairs=test_pairs, train_filter_pairs=train_pairs,
        meta={"protocol": "xc-repo", "psp_A": psp_A, "psp_B": psp_B, "source": str(folder),
              "own_label_pairs": own},
    )


def _report_own_labels(folder: Path, own: dict[str, dict[str, object]], n_train: int) -> None:
    """Say where each split's own-label pairs come from; warn when many training documents are labels found only
    by text (their own label would otherwise win their validation ranking)."""
    for split, found in own.items():
        log.info("%s: %s own-label pairs on %s %s documents, from %s", folder, found["pairs"], found["documents"],
                 split, found["source"])
    train = own["train"]
    share = int(train["documents"]) / max(n_train, 1)  # type: ignore[call-overload]
    if train["source"] != TRAIN_FILTER_FILE and share > OWN_LABEL_WARN_SHARE:
        log.warning("%s: %.0f%% of training documents have a label with the same text and the folder has no %s; "
                    "those pairs are removed from validation rankings as the test filter removes a test document's "
                    "own label — ship %s if your data set defines them otherwise",
                    folder, 100 * share, TRAIN_FILTER_FILE, TRAIN_FILTER_FILE)


def write_xc_repo(dataset: XCDataset, folder: Path) -> None:
    """Write ``dataset`` in the repository format, atomically (temp sibling folder, then swap).

    An existing folder is replaced only if it is empty or already an XC-repository folder, so a
    mistyped path cannot wipe unrelated files.
    """
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()) and not (folder / "trn_X_Y.txt").exists():
        raise FileExistsError(f"{folder}: exists and is not an XC-repository folder (no trn_X_Y.txt); "
                              "choose an empty or new folder")
    tmp = folder.with_name(f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        _write_folder(dataset, tmp)
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_folder(dataset: XCDataset, out: Path) -> None:
    for file, ids, texts in (("trn_X.txt", dataset.train_ids, dataset.train_texts),
                             ("tst_X.txt", dataset.test_ids, dataset.test_texts),
                             ("Y.txt", dataset.label_ids, dataset.label_texts)):
        _write_texts(out / file, ids or [], texts)
    write_label_matrix(dataset.y_train, out / "trn_X_Y.txt")
    write_label_matrix(dataset.y_test, out / "tst_X_Y.txt")
    _write_int_rows(out / FILTER_FILE, dataset.filter_pairs)
    _write_int_rows(out / TRAIN_FILTER_FILE, dataset.train_filter_pairs)
    if dataset.anchor_sets:
        (out / "anchors").mkdir()
        _write_lines(out / "anchors" / ANCHOR_NAMES_FILE, list(dataset.anchor_sets))
    for name, anchor_set in dataset.anchor_sets.items():
        _write_anchor_set(anchor_set, out / "anchors" / _folder_name(name))


def _folder_name(name: str) -> str:
    """An anchor-set name becomes a folder name, so it must be one plain path component."""
    if not name or name != Path(name).name or name.startswith(".") or any(c in name for c in "\r\n"):
        raise ValueError(f"anchor set name {name!r} cannot be a folder name; use letters, digits, '_' or '-'")
    return name


def _write_texts(path: Path, ids: list[str], texts: list[str]) -> None:
    _check_texts(path, texts, "text")
    _check_texts(path, ids, "id")
    bad = [i for i, x in enumerate(ids) if ID_SEPARATOR in x]
    if bad:
        raise XCRepoFormatError(path, bad[0] + 1, f"id {ids[bad[0]]!r} contains {ID_SEPARATOR!r}",
                                "rename the id; the separator marks where the text starts")
    _write_lines(path, [f"{i}{ID_SEPARATOR}{t}" for i, t in zip(ids, texts, strict=True)])


def _check_texts(path: Path, texts: list[str], what: str) -> None:
    """One text per line: a text holding a line break would shift every later line."""
    broken = pl.Series(texts, dtype=pl.String).str.contains(r"[\r\n]")
    if broken.any():
        first = int(broken.arg_true()[0])
        raise XCRepoFormatError(path, first + 1, f"{what} {texts[first]!r} contains a line break",
                                "replace line breaks with spaces before writing")


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8", newline="\n")
