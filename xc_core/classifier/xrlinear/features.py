"""The hybrid features: TF-IDF over word and character n-grams beside the encoder's unit vector."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.xrlinear.config import LinearConfig

TOKENS = r"(?u)\b\w+\b"


def _vectorizers(cfg: LinearConfig, vocabularies: tuple[dict[str, int], dict[str, int]] | None = None
                 ) -> tuple[Any, Any]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    word_vocab, char_vocab = vocabularies if vocabularies is not None else (None, None)
    word = TfidfVectorizer(token_pattern=TOKENS, ngram_range=(1, cfg.word_ngrams), dtype=np.float32,
                           vocabulary=word_vocab)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=tuple(cfg.char_ngrams), dtype=np.float32,
                           min_df=1 if char_vocab else cfg.char_min_df, vocabulary=char_vocab)
    return word, char


@dataclass
class HybridFeatures:
    """text + encoder vector → (unit-scaled TF-IDF block as CSR, weighted encoder block): the rows of the solver."""

    cfg: LinearConfig
    word_vocabulary: dict[str, int] = field(default_factory=dict)
    char_vocabulary: dict[str, int] = field(default_factory=dict)
    word_idf: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    char_idf: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @classmethod
    def fit(cls, texts: list[str], cfg: LinearConfig) -> HybridFeatures:
        if not cfg.uses_sparse:
            return cls(cfg)
        word, char = _vectorizers(cfg)
        word.fit(texts)
        try:
            char.fit(texts)
        except ValueError:  # no character n-gram reaches min_df (a handful of documents): word n-grams alone
            char = None
        return cls(cfg, dict(word.vocabulary_), dict(char.vocabulary_) if char is not None else {},
                   word.idf_.astype(np.float32), char.idf_.astype(np.float32) if char is not None
                   else np.zeros(0, np.float32))

    @property
    def n_sparse(self) -> int:
        return len(self.word_vocabulary) + len(self.char_vocabulary)

    @functools.cached_property
    def _analyzers(self) -> tuple[Any, Any]:
        """The fitted vectorizers' text → n-grams functions (lower-casing, tokens, n-gram ranges)."""
        word, char = _vectorizers(self.cfg)  # an analyzer does not depend on the vocabulary
        return word.build_analyzer(), char.build_analyzer()

    def sparse(self, texts: list[str]) -> sp.csr_matrix:
        """(n, n_sparse) TF-IDF rows, L2-normalised as one block (word ⊕ character n-grams)."""
        from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l2

        if not self.cfg.uses_sparse:
            return sp.csr_matrix((len(texts), 0), dtype=np.float32)
        word, char = self._analyzers
        blocks = [_tfidf(texts, word, self.word_vocabulary, self.word_idf)]
        if self.char_vocabulary:
            blocks.append(_tfidf(texts, char, self.char_vocabulary, self.char_idf))
        joined = sp.csr_matrix(sp.hstack(blocks, format="csr", dtype=np.float32))
        inplace_csr_row_normalize_l2(joined)
        return joined

    def rows(self, texts: list[str], vectors: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
        """The solver's rows: (sparse block, dense block), each weighted, together unit-norm per row."""
        cfg = self.cfg
        w_sparse = cfg.sparse_weight if cfg.uses_sparse else 0.0
        w_dense = cfg.dense_weight if cfg.uses_dense else 0.0
        norm = float(np.sqrt(w_sparse ** 2 + w_dense ** 2)) or 1.0
        sparse = self.sparse(texts) * np.float32(w_sparse / norm)
        if w_dense == 0:
            return sp.csr_matrix(sparse, dtype=np.float32), np.zeros((len(texts), 0), np.float32)
        unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return sp.csr_matrix(sparse, dtype=np.float32), (unit * (w_dense / norm)).astype(np.float32)

    def save(self, folder: Path) -> None:
        (folder / "features.json").write_text(json.dumps(
            {"word_vocabulary": self.word_vocabulary, "char_vocabulary": self.char_vocabulary}))
        np.save(folder / "word_idf.npy", self.word_idf)
        np.save(folder / "char_idf.npy", self.char_idf)

    @classmethod
    def load(cls, folder: Path, cfg: LinearConfig) -> HybridFeatures:
        vocabularies = json.loads((folder / "features.json").read_text())
        return cls(cfg, vocabularies["word_vocabulary"], vocabularies["char_vocabulary"],
                   np.load(folder / "word_idf.npy"), np.load(folder / "char_idf.npy"))


def _tfidf(texts: list[str], analyze: Any, vocabulary: dict[str, int], idf: np.ndarray) -> sp.csr_matrix:
    """What the fitted ``TfidfVectorizer.transform`` returns (raw counts × idf, each row L2-normalised), to the bit
    (a test compares them), without its per-call input validation: most of a single query's cost there."""
    from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l2

    indptr, indices, counts = [0], list[int](), list[int]()
    for text in texts:
        counter: dict[int, int] = {}
        for gram in analyze(text):
            column = vocabulary.get(gram)
            if column is not None:
                counter[column] = counter.get(column, 0) + 1
        indices.extend(counter)
        counts.extend(counter.values())
        indptr.append(len(indices))
    rows = sp.csr_matrix((np.asarray(counts, np.float32), np.asarray(indices, np.int32), np.asarray(indptr, np.int32)),
                         shape=(len(texts), len(vocabulary)))
    rows.sort_indices()
    rows.data *= idf[rows.indices]
    inplace_csr_row_normalize_l2(rows)
    return rows
