"""The control policy: lexical BM25 over keyword text within the query's market.

Serving is computed per distinct query, never per event: :meth:`Bm25Server.candidates` returns a
ranked candidate list long enough that, on any day, the first k keywords already started are the
exact top-k of the eligible keywords (the list runs until k keywords that predate the period have
been seen). Scores come from one sparse product (queries x terms) @ (terms x keywords) per chunk;
rows are ordered with a single sort of packed int64 keys instead of per-query Python loops.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xc_core.simulate.vocabulary import tokens

_CHUNK = 4096
_SCORE_SCALE = 1e5  # scores are ranked at 1e-5 resolution; finer differences fall to the bid tie-break
_SCORE_BITS, _RANK_BITS, _ROW_BITS = 26, 20, 13


class Bm25Server:
    """BM25 retrieval of keywords for queries, one index per market."""

    def __init__(self, keyword_texts: list[str], keyword_market: np.ndarray, keyword_bid: np.ndarray,
                 query_texts: list[str], query_market: np.ndarray, n_markets: int, k1: float = 1.2,
                 b: float = 0.75, min_match: float = 0.0) -> None:
        self._terms: dict[str, int] = {}
        docs, _ = self._matrix(keyword_texts, grow=True, binary=False)
        self._queries, self._unknown = self._matrix(query_texts, grow=False, binary=True)
        self._query_market = query_market
        self._min_match = min_match
        self._weights: list[sp.csr_matrix] = []  # per market: terms x keywords of the market
        self._members: list[np.ndarray] = []  # per market: global keyword index by bid rank
        self._idf: list[np.ndarray] = []  # per market: idf per term, and (last) the idf of an unseen term
        for m in range(n_markets):
            members = np.flatnonzero(keyword_market == m)
            by_bid = members[np.lexsort((members, -keyword_bid[members]))]
            self._members.append(by_bid)
            weights, idf = _bm25_weights(docs[by_bid], k1, b)
            self._weights.append(weights.T.tocsr())
            self._idf.append(idf)
        if max((len(x) for x in self._members), default=0) >= 1 << _RANK_BITS:
            raise ValueError(f"a market has more than {1 << _RANK_BITS} keywords")

    def _matrix(self, texts: list[str], grow: bool, binary: bool) -> tuple[sp.csr_matrix, np.ndarray]:
        """Term-count rows (documents) or binary rows (queries), and each row's count of unknown words."""
        indptr, indices, unknown = [0], [], []
        for text in texts:
            ids = []
            words = set(tokens(text)) if binary else tokens(text)
            for word in words:
                idx = self._terms.setdefault(word, len(self._terms)) if grow else self._terms.get(word)
                if idx is not None:
                    ids.append(idx)
            unknown.append(len(words) - len(ids))
            indices.extend(sorted(ids) if binary else ids)
            indptr.append(len(indices))
        data = np.ones(len(indices), dtype=np.float64)
        shape = (len(texts), max(1, len(self._terms)))
        matrix = sp.csr_matrix((data, np.asarray(indices, dtype=np.int64), np.asarray(indptr)), shape=shape)
        matrix.sum_duplicates()
        return matrix, np.asarray(unknown, dtype=np.float64)

    def query_mass(self, query_idx: np.ndarray, market: int) -> np.ndarray:
        """Sum of the idf of a query's words in the market (unknown words count as the rarest)."""
        idf = self._idf[market]
        return self._queries[query_idx] @ idf[:-1] + self._unknown[query_idx] * idf[-1]

    def market_keywords(self, market: int) -> np.ndarray:
        """Global keyword rows of a market, in the column order of :meth:`scores` (higher bid first)."""
        return self._members[market]

    def scores(self, query_idx: np.ndarray, market: int) -> sp.csr_matrix:
        """BM25 scores (rows: the given queries, columns: the market's keywords by bid rank)."""
        return (self._queries[query_idx] @ self._weights[market]).tocsr()

    def candidates(self, query_idx: np.ndarray, always_eligible: np.ndarray, k: int, width: int) -> np.ndarray:
        """Ranked keyword candidates per query, shape (len(query_idx), width), -1 padded.

        Order: BM25 score, then higher bid, then keyword index. Only keywords scoring at least
        ``min_match`` x the query's idf mass qualify (a keyword must cover most of the query, as a
        real lexical policy's relevance floor demands). A list stops after the k-th keyword that is
        ``always_eligible`` (started before the period) or at ``width`` entries.
        """
        out = np.full((len(query_idx), width), -1, dtype=np.int64)
        markets = self._query_market[query_idx]
        for m in np.unique(markets):
            rows = np.flatnonzero(markets == m)
            for lo in range(0, len(rows), _CHUNK):
                part = rows[lo:lo + _CHUNK]
                scores = self.scores(query_idx[part], int(m))
                floor = self._min_match * self.query_mass(query_idx[part], int(m))
                scores.data[scores.data < np.repeat(floor, np.diff(scores.indptr))] = 0.0
                scores.eliminate_zeros()
                out[part] = self._rank(scores, int(m), always_eligible, k, width)
        return out

    def _rank(self, scores: sp.csr_matrix, market: int, always: np.ndarray, k: int, width: int) -> np.ndarray:
        n_rows = scores.shape[0]
        out = np.full((n_rows, width), -1, dtype=np.int64)
        if scores.nnz == 0:
            return out
        rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(scores.indptr))
        quantised = np.minimum(np.rint(scores.data * _SCORE_SCALE).astype(np.int64), (1 << _SCORE_BITS) - 1)
        keys = (rows << (_SCORE_BITS + _RANK_BITS)) | (((1 << _SCORE_BITS) - 1 - quantised) << _RANK_BITS) \
            | scores.indices.astype(np.int64)
        keys.sort()
        rows = keys >> (_SCORE_BITS + _RANK_BITS)
        keyword = self._members[market][keys & ((1 << _RANK_BITS) - 1)]
        starts = np.r_[0, np.flatnonzero(np.diff(rows)) + 1]
        first = np.repeat(starts, np.diff(np.r_[starts, len(rows)]))
        old = always[keyword].astype(np.int64)
        cum = np.cumsum(old)
        old_before = cum - old - (cum[first] - old[first])
        keep = old_before < k
        rank = np.arange(len(rows)) - first
        keep &= rank < width
        out[rows[keep], rank[keep]] = keyword[keep]
        return out


def _bm25_weights(tf: sp.csr_matrix, k1: float, b: float) -> tuple[sp.csr_matrix, np.ndarray]:
    """Per (keyword, term) BM25 contribution idf(t) tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl)), and idf.

    The idf array has one extra last entry: the idf of a term no keyword contains.
    """
    tf = tf.tocsr().astype(np.float64)
    n_docs = max(1, tf.shape[0])
    doc_len = np.asarray(tf.sum(axis=1)).ravel()
    avgdl = max(doc_len.mean() if len(doc_len) else 1.0, 1e-9)
    df = np.bincount(tf.indices, minlength=tf.shape[1])
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    row_len = np.repeat(doc_len, np.diff(tf.indptr))
    data = idf[tf.indices] * tf.data * (k1 + 1) / (tf.data + k1 * (1 - b + b * row_len / avgdl))
    unseen = np.log1p((n_docs + 0.5) / 0.5)
    return sp.csr_matrix((data, tf.indices, tf.indptr), shape=tf.shape), np.r_[idf, unseen]
