"""ANN label indexes over unit vectors (faiss): exact, HNSW and IVF behind one interface."""

from xc_core.index.ann import (
    RECALL_SAMPLE,
    IndexConfig,
    IndexError_,
    LabelIndex,
    measure_against_exact,
    recall_against_exact,
)

__all__ = ["RECALL_SAMPLE", "IndexConfig", "IndexError_", "LabelIndex", "measure_against_exact", "recall_against_exact"]
