"""The hybrid channel's settings (XR-Linear on TF-IDF ⊕ the encoder's vector)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class LinearConfig(BaseModel):
    """The hybrid channel's settings: one for every data set (PECOS's defaults where PECOS has one)."""

    features: Literal["hybrid", "sparse", "dense"] = Field(
        default="hybrid", description="TF-IDF ⊕ the encoder's vector, TF-IDF alone, or the encoder's vector alone")
    sparse_weight: float = Field(default=1.0, ge=0, description="weight of the unit TF-IDF block")
    dense_weight: float = Field(default=1.0, ge=0, description="weight of the unit encoder block")
    word_ngrams: int = Field(default=2, ge=1, le=3, description="word n-grams 1..word_ngrams")
    char_ngrams: tuple[int, int] = Field(default=(2, 4), description="character n-grams (within words)")
    char_min_df: int = Field(default=2, ge=1, description="character n-grams seen in fewer documents are dropped")
    cost: float = Field(default=1.0, gt=0, description="SVM C (PECOS/liblinear default 1)")
    bias: float = Field(default=1.0, ge=0, description="value of the constant feature (PECOS default 1)")
    max_iter: int = Field(default=100, ge=1, description="dual coordinate-descent passes per node at most (PECOS)")
    tolerance: float = Field(default=0.1, gt=0, description="stop a node when its projected gradient is this small")
    prune: float = Field(default=0.1, ge=0, description="weights with |w| below this are dropped (PECOS threshold), "
                         "in both blocks")
    max_leaf: int = Field(default=100, ge=2, description="labels per bottom cluster of the tree at most (PECOS)")
    branching: int = Field(default=16, ge=2, description="children per tree node (PECOS nr_splits)")
    beam: int = Field(default=20, ge=1, description="tree nodes kept per layer in the beam search (PECOS's default "
                      "only_topk of an upper layer)")
    seed: int = 0

    @property
    def uses_sparse(self) -> bool:
        return self.features != "dense" and self.sparse_weight > 0

    @property
    def uses_dense(self) -> bool:
        return self.features != "sparse" and self.dense_weight > 0
