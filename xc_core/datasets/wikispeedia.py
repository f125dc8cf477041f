"""The "wikispeedia" benchmark: article title → articles human players navigated to from it.

Protocol (``../shared/data/README.md``), the LF-WikiSeeAlsoTitles analogue on real navigation data:

- Documents and labels are articles of ``articles.tsv``; a text is the URL-decoded name with ``_``
  as space. Documents are the articles with at least one label; the *label space* is every article
  that is a label of some document (train or test), so labels never clicked in train stay in the
  space as novel labels (``label_novel``) and can only be found from their titles.
- A document's labels are the articles players moved to directly from it in
  ``paths_unfinished.tsv``. A back-step ``<`` returns to the previous article of the path's history
  stack; the next step departs from that article (``A;B;<;C`` gives A→B and A→C, never B→C).
  Steps naming an article missing from ``articles.tsv`` are dropped. Self-loops are dropped.
- Split: a seeded ``1 - test_fraction`` / ``test_fraction`` split of the documents. Test articles
  are removed from every anchor graph as nodes, in every role (as document, as label and as
  anchor), so nothing about a test article leaks into training except that train documents may
  navigate *to* it (it stays a label in ``y_train``).
- Test edges (``AnchorSet.test_edges``, the graph at inference): a test article's own hyperlinks and
  categories are part of the article a reader sees, so each set keeps the edges *from* a test article
  to an anchor the set already has that is not a test article, apart from the training graph. Links
  *to* a test article stay dropped (it is never an anchor).
- Anchor sets (train only): ``links`` (anchors are articles, texts their titles; an edge per
  hyperlink of ``links.tsv``) and ``categories`` (anchors are category paths; the text is the
  path's last two parts after the universal ``subject`` root, ``_`` as space:
  ``subject.Science.Biology.Animals`` → "Biology Animals", ``subject.Countries`` → "Countries").
- ``filter_pairs``: (test document, label) for each test document whose own article is a label,
  the Extreme Classification Repository's ``filter_labels`` convention; without it a title's
  nearest label is itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import polars as pl
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset

log = logging.getLogger(__name__)

BACK = "<"
CATEGORY_ROOT = "subject"
META = {"protocol": "wikispeedia", "psp_A": 0.5, "psp_B": 0.4,
        "source": "West & Leskovec WWW 2012; West, Pineau & Precup IJCAI 2009"}
FILES = {"articles": ("articles.tsv", ("article",)),
         "links": ("links.tsv", ("source", "target")),
         "categories": ("categories.tsv", ("article", "category")),
         "paths": ("paths_unfinished.tsv",
                   ("hashed_ip", "timestamp", "duration", "path", "target", "type"))}


class WikispeediaFormatError(ValueError):
    """A Wikispeedia file cannot be used as is: names the file, the line, the problem and the fix."""

    def __init__(self, path: object, line: int, problem: str, fix: str) -> None:
        self.path, self.line = str(path), line
        super().__init__(f"{path}:{line}: {problem}; fix: {fix}")


# -- reading -----------------------------------------------------------------------------------
def read_tsv(path: Path, columns: Sequence[str]) -> pl.DataFrame:
    """Data rows of a Wikispeedia TSV as strings plus their 1-based file ``line``.

    The files open with ``#`` comment lines and a blank line; we keep real line numbers (rather
    than letting a CSV reader skip them) so that every later error can point into the file.
    """
    path = Path(path)
    raw = _lines(path)
    frame = (pl.DataFrame({"raw": raw}, schema={"raw": pl.String}).with_row_index("line", offset=1)
             .filter((pl.col("raw") != "") & ~pl.col("raw").str.starts_with("#")))
    fields = frame.get_column("raw").str.count_matches("\t", literal=True) + 1
    bad = frame.filter(fields != len(columns))
    if len(bad):
        row = bad.row(0, named=True)
        raise WikispeediaFormatError(
            path, row["line"], f"{row['raw'].count(chr(9)) + 1} tab-separated fields, expected "
            f"{len(columns)} ({', '.join(columns)})", "repair or delete the line, or restore the original file")
    split = pl.col("raw").str.split_exact("\t", len(columns) - 1).struct.rename_fields(list(columns))
    return frame.select(pl.col("line").cast(pl.Int64), split).unnest("raw")


def _lines(path: Path) -> list[str]:
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing; expected the Wikispeedia release (see ../shared/data/README.md)")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise WikispeediaFormatError(path, line, "not UTF-8", "re-encode the file as UTF-8") from exc
    return [line.removesuffix("\r") for line in text.split("\n")]


def decode_title(name: str) -> str:
    """Article name → text: URL-decoded, ``_`` as space (``%C3%89douard_Manet`` → "Édouard Manet")."""
    return unquote(name).replace("_", " ")


def category_text(category: str) -> str:
    """Category path → anchor text: the last two parts below the ``subject`` root, ``_`` as space.

    The root is on every path, so for one-level paths (``subject.Countries``) it would only add
    the same word to two anchors; it is dropped before taking the last two parts.
    """
    parts = category.split(".")
    if len(parts) > 1 and parts[0] == CATEGORY_ROOT:
        parts = parts[1:]
    return " ".join(parts[-2:]).replace("_", " ")


# -- navigation --------------------------------------------------------------------------------
def navigation_pairs(paths: pl.DataFrame, path_file: object = "paths") -> pl.DataFrame:
    """(source, target, line) for every forward move of every path, back-steps resolved.

    ``paths`` needs a ``path`` column (``;``-joined article names, ``<`` = back) and may have a
    ``line`` column (else row number + 1) used in errors. Vectorised with one observation: after
    each step the history-stack depth is a running sum (+1 per article, −1 per ``<``), and the
    article on top of the stack is the last article pushed at the current depth, so a forward
    fill within (path, depth) resolves every back-step without a per-path loop.
    """
    if "line" not in paths.columns:
        paths = paths.with_row_index("line", offset=1)
    steps = (paths.select(pl.col("line").cast(pl.Int64), pl.col("path"))
             .with_row_index("path_id")
             .with_columns(article=pl.col("path").str.split(";"))
             .explode("article")
             .with_columns(back=pl.col("article") == BACK, step=pl.int_range(pl.len()).over("path_id") + 1)
             .with_columns(depth=pl.when(pl.col("back")).then(-1).otherwise(1).cum_sum().over("path_id")))
    _check_steps(steps, path_file)
    steps = steps.with_columns(
        current=pl.when(~pl.col("back")).then(pl.col("article")).forward_fill().over(["path_id", "depth"]))
    steps = steps.with_columns(source=pl.col("current").shift(1).over("path_id"))
    return (steps.filter(~pl.col("back") & pl.col("source").is_not_null())
            .select("source", pl.col("article").alias("target"), "line"))


def _check_steps(steps: pl.DataFrame, path_file: object) -> None:
    empty = steps.filter(pl.col("article").fill_null("") == "")
    if len(empty):
        row = empty.row(0, named=True)
        raise WikispeediaFormatError(path_file, row["line"], f"empty article name at step {row['step']} of the path",
                                     "remove the stray ';' or drop the line")
    over = steps.filter(pl.col("depth") < 1)
    if len(over):
        row = over.row(0, named=True)
        raise WikispeediaFormatError(path_file, row["line"], f"back-step '<' at step {row['step']} has no article "
                                     "to return to", "the path is corrupt; drop the line")


def read_paths(path: Path) -> pl.DataFrame:
    """``paths_unfinished.tsv`` (or a fixture in its format) as ``line, path``."""
    return read_tsv(path, FILES["paths"][1]).select("line", "path")


# -- split and indices -------------------------------------------------------------------------
def split_test_mask(n_docs: int, seed: int, test_fraction: float) -> np.ndarray:
    """A boolean mask of ``round(test_fraction * n_docs)`` test documents drawn with ``seed``."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction={test_fraction}: must be strictly between 0 and 1 (e.g. 0.2)")
    n_test = int(round(test_fraction * n_docs))
    if not 0 < n_test < n_docs:
        raise ValueError(f"test_fraction={test_fraction} of {n_docs} documents leaves an empty split; "
                         "use more documents or a fraction nearer 0.5")
    mask = np.zeros(n_docs, dtype=bool)
    mask[np.random.default_rng(seed).permutation(n_docs)[:n_test]] = True
    return mask


def _index(articles: pl.DataFrame, keep: pl.Expr, column: str) -> pl.DataFrame:
    """``article, title, <column>``: the kept articles in ``articles.tsv`` order, numbered from 0."""
    return articles.filter(keep).select("article", "title").with_row_index(column).with_columns(
        pl.col(column).cast(pl.Int64))


def _matrix(pairs: pl.DataFrame, rows: pl.DataFrame, labels: pl.DataFrame) -> sp.csr_matrix:
    edges = (pairs.join(rows.select("article", "doc"), left_on="source", right_on="article")
             .join(labels.select("article", "label"), left_on="target", right_on="article"))
    data = np.ones(len(edges), dtype=np.float32)
    coords = (edges.get_column("doc").to_numpy(), edges.get_column("label").to_numpy())
    return sp.csr_matrix((data, coords), shape=(len(rows), len(labels)))


# -- anchor sets -------------------------------------------------------------------------------
def _anchor_set(name: str, edges: pl.DataFrame, anchors: pl.DataFrame, train: pl.DataFrame,
                labels: pl.DataFrame, tests: pl.DataFrame) -> AnchorSet:
    """Train-only anchor set from ``edges(article, key)`` and ordered ``anchors(key, text)``.

    Edges touching a test article at either end are dropped, then anchors no edge uses, so a test
    article is never a node of the graph, whatever role it would have played. The dropped edges from
    a test article (``test``) to an anchor that remains become the set's ``test_edges``.
    """
    test_articles = tests.get_column("article").implode()
    from_test, to_test = pl.col("article").is_in(test_articles), pl.col("key").is_in(test_articles)
    edges = edges.unique()
    test = edges.filter(from_test & ~to_test)
    edges = edges.filter(~from_test & ~to_test)
    used = anchors.filter(pl.col("key").is_in(edges.get_column("key").implode()))
    used = used.with_row_index("anchor").with_columns(pl.col("anchor").cast(pl.Int64))
    edges = edges.join(used.select("key", "anchor"), on="key")
    test = test.join(used.select("key", "anchor"), on="key")  # never adds an anchor

    def side(pairs: pl.DataFrame, index: pl.DataFrame, column: str) -> np.ndarray:
        joined = pairs.join(index.select("article", column), on="article").select(column, "anchor")
        return joined.sort(column, "anchor").to_numpy().astype(np.int64).reshape(-1, 2)

    return AnchorSet(name=name, texts=used.get_column("text").to_list(),
                     doc_edges=side(edges, train, "doc"), label_edges=side(edges, labels, "label"),
                     test_edges=side(test, tests, "doc"))


def _links_anchor_set(data_dir: Path, articles: pl.DataFrame, train: pl.DataFrame, labels: pl.DataFrame,
                      tests: pl.DataFrame) -> AnchorSet:
    links = _known(read_tsv(data_dir / FILES["links"][0], FILES["links"][1]), articles, ("source", "target"),
                   data_dir / FILES["links"][0])
    edges = links.select(pl.col("source").alias("article"), pl.col("target").alias("key"))
    anchors = articles.select(pl.col("article").alias("key"), pl.col("title").alias("text"))
    return _anchor_set("links", edges, anchors, train, labels, tests)


def _categories_anchor_set(data_dir: Path, articles: pl.DataFrame, train: pl.DataFrame, labels: pl.DataFrame,
                           tests: pl.DataFrame) -> AnchorSet:
    path = data_dir / FILES["categories"][0]
    rows = _known(read_tsv(path, FILES["categories"][1]), articles, ("article",), path)
    edges = rows.select("article", pl.col("category").alias("key"))
    keys = edges.get_column("key").unique().sort()
    anchors = pl.DataFrame({"key": keys, "text": [category_text(k) for k in keys.to_list()]},
                           schema={"key": pl.String, "text": pl.String})
    return _anchor_set("categories", edges, anchors, train, labels, tests)


def _known(frame: pl.DataFrame, articles: pl.DataFrame, columns: Sequence[str], path: object) -> pl.DataFrame:
    """Rows whose article columns all name an article of ``articles.tsv``; logs what it drops."""
    names = articles.get_column("article").implode()
    keep = pl.all_horizontal([pl.col(c).is_in(names) for c in columns])
    dropped = frame.filter(~keep)
    if len(dropped):
        log.warning("%s: dropped %d rows naming articles missing from articles.tsv (first at line %d)",
                    path, len(dropped), dropped.get_column("line")[0])
    return frame.filter(keep)


# -- the builder -------------------------------------------------------------------------------
def read_articles(data_dir: Path) -> pl.DataFrame:
    """``article, title`` in ``articles.tsv`` order (the order every index follows)."""
    path = Path(data_dir) / FILES["articles"][0]
    frame = read_tsv(path, FILES["articles"][1])
    dup = frame.filter(pl.col("article").is_duplicated())
    if len(dup):
        raise WikispeediaFormatError(path, dup.get_column("line")[0], f"article {dup['article'][0]!r} listed twice",
                                     "delete the duplicate line")
    titles = [decode_title(a) for a in frame.get_column("article").to_list()]
    return frame.select("article").with_columns(title=pl.Series(titles, dtype=pl.String))


def label_pairs(data_dir: Path, articles: pl.DataFrame) -> pl.DataFrame:
    """Distinct (source, target) navigation moves between known articles, self-loops removed."""
    path = Path(data_dir) / FILES["paths"][0]
    moves = _known(navigation_pairs(read_paths(path), path), articles, ("source", "target"), path)
    return moves.filter(pl.col("source") != pl.col("target")).select("source", "target").unique()


def build_wikispeedia(data_dir: Path, seed: int = 0, test_fraction: float = 0.2) -> XCDataset:
    """The wikispeedia benchmark data set (protocol in the module docstring), reproducible from ``seed``."""
    data_dir = Path(data_dir)
    articles = read_articles(data_dir)
    pairs = label_pairs(data_dir, articles)
    is_doc = pl.col("article").is_in(pairs.get_column("source").implode())
    docs = articles.filter(is_doc).select("article")
    test_mask = split_test_mask(len(docs), seed, test_fraction)
    test_articles = docs.get_column("article").filter(pl.Series(test_mask))
    is_test = pl.col("article").is_in(test_articles.implode())
    train = _index(articles, is_doc & ~is_test, "doc")
    test = _index(articles, is_doc & is_test, "doc")
    labels = _index(articles, pl.col("article").is_in(pairs.get_column("target").implode()), "label")
    filter_pairs = test.join(labels.select("article", "label"), on="article").sort("doc").select("doc", "label")
    anchor_sets = {
        "links": _links_anchor_set(data_dir, articles, train, labels, test),
        "categories": _categories_anchor_set(data_dir, articles, train, labels, test),
    }
    dataset = XCDataset(
        name="wikispeedia",
        train_texts=train.get_column("title").to_list(), test_texts=test.get_column("title").to_list(),
        label_texts=labels.get_column("title").to_list(),
        y_train=_matrix(pairs, train, labels), y_test=_matrix(pairs, test, labels),
        train_ids=train.get_column("article").to_list(), test_ids=test.get_column("article").to_list(),
        label_ids=labels.get_column("article").to_list(), anchor_sets=anchor_sets,
        filter_pairs=filter_pairs.to_numpy().astype(np.int64).reshape(-1, 2),
        meta={**META, "seed": seed},
    )
    log.info("wikispeedia built: %s", dataset.summary())
    return dataset
