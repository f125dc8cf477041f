"""The anchor-set stage: native graph → ANN proxies → RWR expansion → encoder pruning, with coverage.

Proxies (TextGNN §4.2.2): a document/label with no native anchor in a set borrows the anchors of its
nearest text neighbour that has some, flagged as proxy edges. RWR (RAMEN) then densifies every node's
neighbourhood (every visited anchor, native edges always kept); pruning (RAMEN App. A) drops anchors with
cosine ≤ threshold under the given encoder, by default after centring the embeddings on their mean.

Test edges (``AnchorSet.test_edges``, the inference-time graph) take no part in any step: each set leaves
the stage with the native test edges it came with (its anchor texts, hence their indices, are unchanged).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.graphs.pruning import Embed, PruneCounts, embedding_center, prune_anchor_set
from xc_core.graphs.rwr import RWRConfig, expand_anchor_set
from xc_core.graphs.similar import proxy_edges, similar_text
from xc_core.quality.coverage import coverage_table, reachable_train_label_share

log = logging.getLogger(__name__)


class AnchorConfig(BaseModel):
    rwr: RWRConfig = Field(default_factory=RWRConfig)
    proxies: bool = Field(default=True, description="add ANN proxy neighbours for nodes without native ones")
    prune: bool = Field(default=True, description="prune with the encoder (cosine > threshold)")
    prune_threshold: float = Field(default=0.0, description="RAMEN keeps anchors with cosine > 0")
    # Mean-pooled MiniLM embeddings are anisotropic (a large component shared by every text), so RAMEN's raw
    # "cosine > 0" keeps everything: true and random pairs alike pass. Centred on the mean embedding, the
    # threshold separates link edges from random pairs (`benchmarks/bench_graphs.py --part prune` measures both;
    # docs/graphs.md has the figures).
    prune_center: bool = Field(default=True, description="centre embeddings on their mean before the cosine "
                               "(corrects the anisotropy of mean-pooled embeddings); False: RAMEN's raw cosine")


@dataclass
class AnchorStage:
    anchor_sets: dict[str, AnchorSet]
    coverage: pl.DataFrame
    similar_text: pl.DataFrame
    prune_counts: dict[str, PruneCounts]
    reachable_train_labels: float


def _with_proxies(anchors: AnchorSet, doc_emb: np.ndarray, label_emb: np.ndarray, doc_texts: list[str],
                  label_texts: list[str]) -> tuple[AnchorSet, list[pl.DataFrame]]:
    tables = []
    new_edges: dict[str, np.ndarray] = {}
    for side, edges, emb, texts in (("doc", anchors.doc_edges, doc_emb, doc_texts),
                                    ("label", anchors.label_edges, label_emb, label_texts)):
        has = np.zeros(len(texts), bool)
        has[edges[:, 0]] = True
        if not len(edges) or has.all():
            new_edges[side] = np.empty((0, 2), np.int64)
            continue
        table = similar_text(texts, has, emb, k=1, node_type="document" if side == "doc" else "label")
        tables.append(table.with_columns(anchor_set=pl.lit(anchors.name)))
        mapping = dict(zip(table.get_column("node_idx").to_list(), table.get_column("neighbour_idx").to_list(),
                           strict=True))
        new_edges[side] = proxy_edges(edges, len(texts), mapping)
    out = AnchorSet(
        anchors.name, anchors.texts,
        np.concatenate([anchors.doc_edges, new_edges["doc"]]),
        np.concatenate([anchors.label_edges, new_edges["label"]]),
        doc_proxy=np.r_[np.asarray(anchors.doc_proxy, bool), np.ones(len(new_edges["doc"]), bool)],
        label_proxy=np.r_[np.asarray(anchors.label_proxy, bool), np.ones(len(new_edges["label"]), bool)],
    )
    return out, tables


def build_anchor_stage(dataset: XCDataset, cfg: AnchorConfig, embed: Embed | None = None,
                       progress: bool = False) -> AnchorStage:
    """Run every stage the config and the encoder allow; coverage is measured after each."""
    stages: dict[str, dict[str, AnchorSet]] = {}
    current = dict(dataset.anchor_sets)
    doc_emb = embed(dataset.train_texts) if embed is not None else None
    label_emb = embed(dataset.label_texts) if embed is not None else None
    similar = []
    if cfg.proxies and embed is not None:
        assert doc_emb is not None and label_emb is not None  # embedded above whenever embed is given
        for name, anchors in current.items():
            current[name], tables = _with_proxies(anchors, doc_emb, label_emb, dataset.train_texts,
                                                  dataset.label_texts)
            similar += tables
        stages["with_proxy"] = dict(current)
    with_graph = dataclasses.replace(dataset, anchor_sets=current)
    current = {name: expand_anchor_set(with_graph, name, cfg.rwr, progress=progress) for name in current}
    stages["after_rwr"] = dict(current)
    counts: dict[str, PruneCounts] = {}
    if cfg.prune and embed is not None:
        assert doc_emb is not None and label_emb is not None  # embedded above whenever embed is given
        anchor_emb = {name: embed(anchors.texts) for name, anchors in current.items()}
        # One centre for every set, as the trainer's re-pruning uses: the mean of all texts embedded here.
        center = (embedding_center(doc_emb, label_emb, *anchor_emb.values())
                  if cfg.prune_center else None)
        for name, anchors in current.items():
            current[name], counts[name] = prune_anchor_set(anchors, doc_emb, label_emb, anchor_emb[name],
                                                           cfg.prune_threshold, center=center)
        stages["after_pruning"] = dict(current)
    current = {name: dataclasses.replace(anchors, test_edges=dataset.anchor_sets[name].test_edges)
               for name, anchors in current.items()}
    table = coverage_table(dataset, stages)
    log.info("anchor coverage\n%s", table)
    return AnchorStage(current, table, pl.concat(similar) if similar else pl.DataFrame(), counts,
                       reachable_train_label_share(dataset, current))
