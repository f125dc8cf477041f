"""A trained OAK model at inference: the encoder, the node table (every graph node's embedding under the trained
encoder, computed once after training), the linker (an index over that table) and the GCN layer.

Stage one links a query to graph nodes (``link``: the top-k nodes by text, or the oracle's true neighbours);
``represent`` convolves the query's embedding with theirs; stage two searches the label index with the result.
Saved as ``<model>/oak/`` (``gcn.pt``, ``nodes.json``, ``node_vectors.npy``, ``oak.json`` and the linker's index in
``linker/``) beside ``encoder/``: a serving process loads the linker instead of rebuilding an HNSW graph over every
node (minutes on aol-1000's node table) — and serves the same graph that was evaluated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from xc_core.encoders.text import TextEncoder
from xc_core.methods.oak.config import OakConfig
from xc_core.methods.oak.model import GraphConvolution

if TYPE_CHECKING:
    from xc_core.index import LabelIndex

ARTEFACT = "oak"  # the folder (and pyfunc artifact) with everything but the encoder
LINKER = "linker"  # the linker's saved index inside it


def convolve(gcn: GraphConvolution, query: np.ndarray, nodes: np.ndarray, neighbours: np.ndarray,
             batch: int = 4096) -> np.ndarray:
    """Unit GCN representations of ``query`` (n, D) with ``neighbours`` (n, N) rows of the node table, −1 pads."""
    out = np.empty_like(query, dtype=np.float32)
    table = torch.from_numpy(np.ascontiguousarray(nodes, dtype=np.float32))
    gcn.eval()
    with torch.inference_mode():
        for lo in range(0, len(query), batch):
            ids = torch.from_numpy(neighbours[lo:lo + batch])
            present = ids >= 0
            gathered = table[ids.clamp(min=0)] if len(table) else torch.zeros(*ids.shape, query.shape[1])
            out[lo:lo + batch] = gcn(torch.from_numpy(np.ascontiguousarray(query[lo:lo + batch])), gathered,
                                     present).numpy()
    return out


@dataclass
class OakModel:
    gcn: GraphConvolution
    node_texts: list[str]
    node_vectors: np.ndarray  # (nodes, D) unit rows
    cfg: OakConfig
    _linker: LabelIndex | None = field(default=None, repr=False)

    @property
    def parameters(self) -> dict[str, int]:
        gcn = sum(p.numel() for p in self.gcn.parameters())
        return {"gcn": int(gcn), "node_table": int(self.node_vectors.size)}

    def link(self, query: np.ndarray) -> np.ndarray:
        """The predicted linker: each query's top ``cfg.neighbours`` nodes by cosine (−1 pads a short table)."""
        if len(self.node_texts) == 0 or len(query) == 0:
            return np.full((len(query), 0 if len(self.node_texts) == 0 else self.cfg.neighbours), -1, dtype=np.int64)
        _, ids = self.linker().search(query, self.cfg.neighbours)
        return np.asarray(ids, dtype=np.int64)

    def linker(self) -> LabelIndex:
        """The index over the node table (exact below ``cfg.linker_index_min`` nodes, HNSW above), built once."""
        if self._linker is None:
            from xc_core.index import IndexConfig, LabelIndex

            exact = len(self.node_texts) < self.cfg.linker_index_min
            self._linker = LabelIndex.build(self.node_vectors, None, IndexConfig(kind="flat" if exact else "hnsw"))
        return self._linker

    def represent(self, query: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
        return convolve(self.gcn, query, self.node_vectors, neighbours)

    def embed(self, encoder: TextEncoder, texts: list[str]) -> np.ndarray:
        """What serving does with a live query (no oracle): encode, link, convolve."""
        query = encoder.encode(texts)
        return self.represent(query, self.link(query))

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(self.gcn.state_dict(), folder / "gcn.pt")
        (folder / "nodes.json").write_text(json.dumps(self.node_texts))
        np.save(folder / "node_vectors.npy", self.node_vectors)
        meta = {"cfg": self.cfg.model_dump(), "dim": self.gcn.self_map.in_features}
        (folder / "oak.json").write_text(json.dumps(meta))
        if self.node_texts:
            self.linker().save(folder / LINKER)
        return folder

    @classmethod
    def load(cls, folder: Path) -> OakModel:
        meta = json.loads((folder / "oak.json").read_text())
        cfg = OakConfig(**meta["cfg"])
        gcn = GraphConvolution(int(meta["dim"]), cfg.aggregation)
        gcn.load_state_dict(torch.load(folder / "gcn.pt", weights_only=True))
        model = cls(gcn.eval(), json.loads((folder / "nodes.json").read_text()),
                    np.load(folder / "node_vectors.npy"), cfg)
        if (folder / LINKER).exists():  # models saved before the linker was: built on first use
            from xc_core.index import LabelIndex

            model._linker = LabelIndex.load(folder / LINKER)
        return model
