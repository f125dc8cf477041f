"""The lexical channel of the fused search: TF-IDF nearest training documents vote for their labels.

Why: the dense channels (label text, W) compress a label into one 384-d vector; a head label reached by
thousands of differently worded queries (misspellings, site names, ``login`` variants) is where a linear
TF-IDF classifier still wins (docs/results/issue-18.md, the decile table). A sparse nearest-neighbour vote
remembers those surface forms: a query's ``neighbours`` most TF-IDF-similar training documents (cosine, word 1..n-grams)
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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field, field_validator

from xc_core.classifier.channel import Channel, ChannelSpec, Proposal

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

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        return channel_weights("lexical weights", value)


def channel_weights(name: str, value: tuple[float, ...]) -> tuple[float, ...]:
    """A text channel's weight grid: at least one weight, none negative (0 switches the channel off)."""
    if not value or any(w < 0 for w in value):
        raise ValueError(f"{name} {value!r}: give at least one weight, each ≥ 0 (0 = channel off)")
    return value


def _vectorizer(cfg: LexicalConfig, vocabulary: dict[str, int] | None = None) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(token_pattern=TOKENS, ngram_range=(1, cfg.max_ngram), sublinear_tf=True,
                           min_df=1 if vocabulary else cfg.min_df, dtype=np.float32, vocabulary=vocabulary)


@dataclass
class LexicalChannel(Channel):
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
    def _analyzer(self) -> Callable[[str], list[str]]:
        """scikit-learn's own text → n-grams function, so a query is cut exactly as the documents were."""
        return cast(Callable[[str], list[str]], _vectorizer(self.cfg, self.vocabulary).build_analyzer())

    @functools.cached_property
    def _voters_t(self) -> sp.csr_matrix:
        """(n_features, n_docs): each n-gram's posting list of (document, weight)."""
        return self.documents.T.tocsr()

    def _query(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(feature ids, unit TF-IDF weights) of one query: sublinear tf × idf, l2-normalised, as the documents."""
        counts = Counter(f for gram in self._analyzer(text) if (f := self.vocabulary.get(gram)) is not None)
        features = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        weights = (np.log(np.fromiter(counts.values(), dtype=np.float32, count=len(counts))) + 1) * self.idf[features]
        return features, weights / max(float(np.linalg.norm(weights)), 1e-12)

    def scores(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(label ids ascending, lexical scores in (0, 1]) of one query; labels without a vote are left out.

        Works on posting lists, not on a row over every document and label: a served query costs the
        documents it shares an n-gram with, and scipy's per-call overhead (most of a single query's time)
        is never paid. Ties (identical documents) are broken towards the lower id, so results are repeatable."""
        features, weights = self._query(text)
        postings = self._voters_t
        spans = [(postings.indptr[f], postings.indptr[f + 1]) for f in features]
        if not spans or all(lo == hi for lo, hi in spans):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        docs, cosine = _sum_by_id(np.concatenate([postings.indices[lo:hi] for lo, hi in spans]),
                                  np.concatenate([postings.data[lo:hi] * w for (lo, hi), w in zip(spans, weights,
                                                                                                   strict=True)]))
        keep = _top_stable(cosine, self.cfg.neighbours)
        docs, votes = docs[keep], cosine[keep] ** self.cfg.power
        labels = self.labels
        rows = [(labels.indptr[d], labels.indptr[d + 1]) for d in docs]
        ids, total = _sum_by_id(np.concatenate([labels.indices[lo:hi] for lo, hi in rows]),
                                np.concatenate([labels.data[lo:hi] * v for (lo, hi), v in zip(rows, votes,
                                                                                               strict=True)]))
        positive = total > 0
        ids, total = ids[positive], total[positive]
        return ids, (total / total.max()).astype(np.float32) if len(total) else total.astype(np.float32)

    def propose(self, texts: list[str], queries: np.ndarray, depth: int) -> Proposal:
        """Each query's lexical top ``depth`` labels, and its lexical score of any candidate (0 without a vote)."""
        rows = [self.scores(text) for text in texts]
        top = np.full((len(texts), depth), -1, dtype=np.int64)
        for row, (ids, values) in enumerate(rows):
            best = ids[_top_stable(values, depth)]
            top[row, :len(best)] = best

        def score(candidates: np.ndarray) -> np.ndarray:
            out = np.zeros(candidates.shape, dtype=np.float32)
            for row, (ids, values) in enumerate(rows):
                if len(ids):
                    at = np.minimum(np.searchsorted(ids, candidates[row]), len(ids) - 1)
                    out[row] = np.where((candidates[row] >= 0) & (ids[at] == candidates[row]), values[at], 0.0)
            return out

        return Proposal(top, score)

    def alone(self, texts: list[str], queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.search(texts, k)

    def store(self, folder: Path) -> None:
        self.save(folder / LEXICAL_DIR)

    def search(self, texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (lexical scores, label ids) per query, best first: the channel alone."""
        out_scores = np.full((len(texts), k), -np.inf, dtype=np.float32)
        out_ids = np.full((len(texts), k), -1, dtype=np.int64)
        for row, text in enumerate(texts):
            ids, values = self.scores(text)
            best = _top_stable(values, k)
            best = best[np.lexsort((ids[best], -values[best]))]  # best first, ties by label id
            out_scores[row, :len(best)], out_ids[row, :len(best)] = values[best], ids[best]
        return out_scores, out_ids

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



def _sum_by_id(ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct ids ascending, the sum of ``values`` per id)."""
    distinct, inverse = np.unique(ids, return_inverse=True)
    return distinct, np.bincount(inverse, weights=values, minlength=len(distinct))


def _top_stable(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest values (ascending position order); a tie at the cut keeps the earlier."""
    if len(values) <= k:
        return np.arange(len(values))
    kth = np.partition(values, len(values) - k)[len(values) - k]
    above = np.flatnonzero(values > kth)
    tied = np.flatnonzero(values == kth)[: k - len(above)]
    return np.sort(np.concatenate([above, tied]))


#: the registry entry (``channels.py``): its weight is chosen with α and the hybrid channel's
SPEC = ChannelSpec("lexical", "lexical_weight", "joint", grid=lambda cfg: cfg.lexical.weights,
                   fit=lambda data, cfg: LexicalChannel.fit(data.texts, data.labels, cfg.lexical),
                   load=lambda folder: LexicalChannel.load(folder / LEXICAL_DIR), saved_as=LEXICAL_DIR)
