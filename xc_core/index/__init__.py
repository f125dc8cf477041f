"""ANN label indexes over unit vectors (faiss): exact, HNSW and IVF behind one interface."""

from xc_core.index.ann import IndexConfig, IndexError_, LabelIndex, recall_against_exact

__all__ = ["IndexConfig", "IndexError_", "LabelIndex", "recall_against_exact"]
