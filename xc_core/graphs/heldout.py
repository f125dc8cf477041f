"""Anchor sets as training reads them: no held-out document acts as an anchor (kept free of polars and faiss, so
the trainer imports it on the GPU machine too)."""

from __future__ import annotations

import numpy as np

from xc_core.datasets.container import AnchorSet, XCDataset


def without_heldout(anchor_sets: dict[str, AnchorSet], dataset: XCDataset,
                    heldout: set[str]) -> tuple[dict[str, AnchorSet], dict[str, int]]:
    """Every set without its edges to an anchor whose text is a held-out document (validation or test), and the
    number of edges dropped per set. Only document-space sets (``meta["anchor_spaces"]``) can hold documents;
    the others come back unchanged. The trainer and the graph-worth check both read the sets this way, so a
    held-out query never acts as an anchor (aol-1000's label side: the queries that clicked a label include
    validation queries)."""
    documents = dataset.document_space_sets()
    out, dropped = {}, {}
    for name, a in anchor_sets.items():
        if name not in documents:
            out[name] = a
            continue
        bad = np.array([t in heldout for t in a.texts], dtype=bool)
        keep_doc = ~bad[a.doc_edges[:, 1]] if len(a.doc_edges) else np.zeros(0, bool)
        keep_label = ~bad[a.label_edges[:, 1]] if len(a.label_edges) else np.zeros(0, bool)
        dropped[name] = int((~keep_doc).sum() + (~keep_label).sum())
        out[name] = AnchorSet(name, a.texts, a.doc_edges[keep_doc], a.label_edges[keep_label],
                              doc_proxy=np.asarray(a.doc_proxy)[keep_doc],
                              label_proxy=np.asarray(a.label_proxy)[keep_label])
    return out, dropped
