"""ANN label indexes over unit vectors (faiss): exact, HNSW and IVF behind one interface, whole or as shards."""

from xc_core.index.ann import (
    RANKING,
    RECALL_SAMPLE,
    ExactRanking,
    IndexConfig,
    IndexError_,
    LabelIndex,
    RankRows,
    rank_exactly,
    recall_against_exact,
    search_exactly,
    top_k_agreement,
)
from xc_core.index.shards import ShardedIndex, merge_top_k

__all__ = ["RANKING", "RECALL_SAMPLE", "ExactRanking", "IndexConfig", "IndexError_", "LabelIndex", "RankRows",
           "ShardedIndex", "merge_top_k", "rank_exactly", "recall_against_exact", "search_exactly", "top_k_agreement"]
