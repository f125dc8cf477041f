"""OAK's settings: the linker's fan-out, the GCN layer's aggregation and its learning rate. The encoder's own
settings (model, learning rate, batch size, epochs, seed) are the profile's, as for every encoder method."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Aggregation = Literal["attention", "mean"]


class OakConfig(BaseModel):
    neighbours: int = Field(default=5, ge=1, description="graph nodes per query: the predicted linker's top-k, and "
                                                         "the true neighbours sampled per training document")
    aggregation: Aggregation = Field(default="attention", description="how the GCN layer pools a query's "
                                     "neighbours: bilinear attention to the query, or their mean")
    gcn_lr: float = Field(default=1e-3, gt=0, description="AdamW learning rate of the GCN layer (the encoder keeps "
                                                           "the profile's)")
    linker_weight: float = Field(default=1.0, ge=0, description="weight of the linker term: in-batch softmax of a "
                                 "document against one of its true neighbours, so text retrieval finds them")
    oracle_max: int = Field(default=64, ge=1, description="true neighbours the oracle linker passes at most "
                            "(the first ones by anchor set and edge order)")
    linker_index_min: int = Field(default=20_000, ge=1, description="nodes from which the linker searches an "
                                  "HNSW index instead of an exact one")
    probe_batches: int = Field(default=4, ge=1, description="fixed training batches the loss is measured on "
                               "before and after training")
    stage_one: str = Field(default="", description="a trained method of the home whose encoder OAK starts from (its "
                           "light tower included) and whose validation rows it keeps, trained on the profile's encoder "
                           "recipe: on the CPU profiles the transformer stays frozen and the light tower trains with "
                           "the GCN layer; '' : the shipped encoder fine-tuned on the profile's fine-tune schedule")
    seed: int = 0
