"""The lexical channel of the fused search: TF-IDF nearest training documents vote for their labels.

Why: the dense channels (label text, W) compress a label into one 384-d vector; a head label reached by
thousands of differently worded queries (misspellings, site names, ``login`` variants) is where a linear
TF-IDF classifier still wins (issue #18's decile table). A sparse nearest-neighbour vote remembers those
surface forms: a query's ``neighbours`` most TF-IDF-similar training documents (cosine, word 1..n-grams)
vote for their labels with weight ``cosine ** power``; a label's lexical score is its vote divided by the
row's largest vote, so it lies in [0, 1] like the cosines it is added to. Its top labels join the shortlist,
and the fused score becomes ``alpha * encoder + (1 - alpha) * classifier + weight * lexical`` with the weight
chosen on validation (0 switches the channel off, as it is wherever it does not pay).

Stored as plain arrays (vocabulary JSON, idf, the training documents' TF-IDF rows and their labels), not a
pickle, so an MLflow model folder stays readable by any later scikit-learn.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field, field_validator

LEXICAL_DIR = "lexical"  # sub-folder of a classifier folder, present only when the chosen weight is > 0
TOKENS = r"(?u)\b\w+\b"  # single characters count: "a", "1" and "x" are words in short queries


class LexicalConfig(BaseModel):
    """The lexical channel's settings: one for every data set, the weight chosen on validation."""

    weights: tuple[float, ...] = Field(default=(0.0, 0.05, 0.1, 0.2, 0.3), description="lexical weights tried "
                                       "on the validation rows with every alpha (0 = channel off)")
    neighbours: int = Field(default=20, ge=1, description="training documents that vote for their labels")
    power: float = Field(default=2.0, gt=0, description="a neighbour's vote is its cosine to this power")
    max_ngram: int = Field(default=2, ge=1, le=3, description="word n-grams 1..max_ngram")
    min_df: int = Field(default=2, ge=1, description="n-grams seen in fewer training documents are dropped")
    chunk: int = Field(default=256, ge=1, description="queries scored together (memory: chunk × documents floats)")
    require_significant: bool = Field(default=True, description="keep the channel only when its validation gain "
                                      "over the dense fusion has a paired 95% interval above 0")

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(w < 0 for w in value):
            raise ValueError(f"lexical weights {value!r}: give at least one weight, each ≥ 0 (0 = channel off)")
        return value


def _vectorizer(cfg: LexicalConfig, vocabulary: dict[str, int] | None = None) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(token_pattern=TOKENS, ngram_range=(1, cfg.max_ngram), sublinear_tf=True,
                           min_df=1 if vocabulary else cfg.min_df, dtype=np.float32, vocabulary=vocabulary)


@dataclass
class LexicalChannel:
    vocabulary: dict[str, int]
    idf: np.ndarray  # (n_features,)
    documents: sp.csr_matrix  # (n_docs, n_features) unit-norm TF-IDF rows of the training documents
    labels: sp.csr_matrix  # (n_docs, n_labels) their labels
    cfg: LexicalConfig

    @classmethod
    def fit(cls, texts: list[str], labels: sp.spmatrix, cfg: LexicalConfig) -> LexicalChannel:
        """Vocabulary and idf from ``texts`` (the training documents), which become the voters."""
        if len(texts) != labels.shape[0]:
            raise ValueError(f"lexical channel: {len(texts)} documents but {labels.shape[0]} label rows")
        vectorizer = _vectorizer(cfg)
        try:
            documents = vectorizer.fit_transform(texts)
        except ValueError as error:  # every n-gram below min_df, or no word at all
            raise ValueError(f"lexical channel: no n-gram occurs in {cfg.min_df}+ of the {len(texts)} training "
                             f"documents ({error}); lower classifier.lexical.min_df or set its weights to (0,)"
                             ) from error
        return cls(dict(vectorizer.vocabulary_), vectorizer.idf_.astype(np.float32), sp.csr_matrix(documents),
                   sp.csr_matrix(labels, dtype=np.float32), cfg)

    @functools.cached_property
    def _fitted_vectorizer(self) -> Any:
        """Built once per loaded channel: a serving process transforms one query at a time."""
        vectorizer = _vectorizer(self.cfg, self.vocabulary)
        vectorizer.idf_ = self.idf
        return vectorizer

    @functools.cached_property
    def _voters_t(self) -> sp.csr_matrix:
        """(n_features, n_docs): transposed once, not per search call (it dominated a single query's cost)."""
        return self.documents.T.tocsr()

    def _transform(self, texts: list[str]) -> sp.csr_matrix:
        return sp.csr_matrix(self._fitted_vectorizer.transform(texts))

    def score_blocks(self, texts: list[str]):  # a generator of (start, dense block)
        """Yield (first row, dense (chunk, n_labels) lexical scores in [0, 1]) over ``texts`` in chunks."""
        voters_t = self._voters_t
        width = min(self.cfg.neighbours, self.documents.shape[0])
        for start in range(0, len(texts), self.cfg.chunk):
            similarity = (self._transform(texts[start: start + self.cfg.chunk]) @ voters_t).toarray()
            nearest = np.argpartition(-similarity, width - 1, axis=1)[:, :width]
            votes = np.take_along_axis(similarity, nearest, axis=1) ** self.cfg.power
            rows = np.repeat(np.arange(len(similarity)), width)
            vote_matrix = sp.csr_matrix((votes.ravel(), (rows, nearest.ravel())), shape=similarity.shape)
            block = (vote_matrix @ self.labels).toarray()
            block /= np.maximum(block.max(axis=1, keepdims=True), 1e-12)
            yield start, block.astype(np.float32)

    @staticmethod
    def _top(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores) of each row's ``k`` best labels, unordered; ids with no vote (score 0) become −1."""
        top = np.argpartition(-block, min(k, block.shape[1]) - 1, axis=1)[:, :k]
        scores = np.take_along_axis(block, top, axis=1)
        return np.where(scores > 0, top, -1), scores

    def shortlist(self, texts: list[str], depth: int, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(candidates ∪ the lexical top ``depth``, lexical score of each) per query; −1 pads score 0."""
        from xc_core.classifier.fusion import union_ids

        rows = []
        for start, block in self.score_blocks(texts):
            top, _ = self._top(block, depth)
            united = union_ids(candidates[start: start + len(block)], top)
            scores = np.where(united >= 0, np.take_along_axis(block, np.maximum(united, 0), axis=1), 0.0)
            rows.append((united, scores.astype(np.float32)))
        width = max(r[0].shape[1] for r in rows)
        ids = np.concatenate([np.pad(u, ((0, 0), (0, width - u.shape[1])), constant_values=-1) for u, _ in rows])
        scores = np.concatenate([np.pad(s, ((0, 0), (0, width - s.shape[1]))) for _, s in rows])
        return ids, scores

    def search(self, texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (lexical scores, label ids) per query, best first: the channel alone."""
        out_scores, out_ids = [], []
        for _, block in self.score_blocks(texts):
            top, scores = self._top(block, k)
            order = np.argsort(-scores, axis=1, kind="stable")
            scores, top = np.take_along_axis(scores, order, axis=1), np.take_along_axis(top, order, axis=1)
            out_scores.append(np.where(top >= 0, scores, -np.inf))
            out_ids.append(top)
        return np.concatenate(out_scores).astype(np.float32), np.concatenate(out_ids)

    @property
    def megabytes(self) -> float:
        parts = (self.documents.data, self.documents.indices, self.labels.data, self.labels.indices, self.idf)
        return sum(p.nbytes for p in parts) / 2**20

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "vocabulary.json").write_text(json.dumps(self.vocabulary))
        (folder / "lexical.json").write_text(json.dumps(self.cfg.model_dump(), indent=2) + "\n")
        np.save(folder / "idf.npy", self.idf)
        sp.save_npz(folder / "documents.npz", self.documents)
        sp.save_npz(folder / "labels.npz", self.labels)
        return folder

    @classmethod
    def load(cls, folder: Path) -> LexicalChannel:
        cfg = LexicalConfig.model_validate_json((folder / "lexical.json").read_text())
        return cls(json.loads((folder / "vocabulary.json").read_text()), np.load(folder / "idf.npy"),
                   sp.load_npz(folder / "documents.npz").tocsr(), sp.load_npz(folder / "labels.npz").tocsr(), cfg)
