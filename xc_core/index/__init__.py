"""ANN label indexes over unit vectors (faiss): exact, HNSW and IVF behind one interface, whole or as shards."""

from xc_core.index.ann import (
    RECALL_SAMPLE,
    IndexConfig,
    IndexError_,
    LabelIndex,
    measure_against_exact,
    recall_against_exact,
)
from xc_core.index.shards import ShardedIndex, merge_top_k

__all__ = ["RECALL_SAMPLE", "IndexConfig", "IndexError_", "LabelIndex", "ShardedIndex", "measure_against_exact",
           "merge_top_k", "recall_against_exact"]
