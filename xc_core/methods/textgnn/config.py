"""TextGNN's settings. Epochs, batch size, encoder learning rate, loss scale and seed come from the profile's
training recipe (the same as the encoder methods', so the two are compared at equal budgets); what is TextGNN's
own is here. Every field can be overridden from the caller's overrides (Dagster launchpad, ``xc train``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

#: the skip layer (the model's ``Tower`` reads it); defined here so that the method registry imports no torch
Skip = Literal["add", "concat"]


class TextGNNConfig(BaseModel):
    neighbours: int = Field(default=3, ge=1, le=8, description="neighbours per node (TextGNN: 3, §4.2)")
    candidates: int = Field(default=8, ge=1, description="ranked graph neighbours kept per node, so that up to "
                            "`neighbours` remain after a training pair's exclusions (its own query)")
    skip: Skip = Field(default="add", description="skip layer: centre + GAT output, or a dense layer over both")
    min_impressions: int = Field(default=1, ge=0, description="a click-graph edge ranks by CTR only when its pair "
                                 "was shown this often (TextGNN: 50 in a year of Bing logs; the simulator's windows "
                                 "show a pair a few times)")
    proxy_candidates: int = Field(default=32, ge=1, description="nearest anchor texts searched for an ANN proxy "
                                  "before exclusions")
    lr_heads: float = Field(default=1e-3, gt=0, description="AdamW learning rate of the towers (GAT, skip)")
    encoder_trains: bool = Field(default=True, description="False: the encoder (its light tower included) stays as "
                                 "it starts and only the GAT towers train — on a stage I, what the graph adds to a "
                                 "fixed encoder")
    oracle_neighbours: bool = Field(default=False, description="a positive control that reads the test labels, "
                                    "never a method: every document's neighbours are its own positive labels' texts "
                                    "(training documents: their training labels; test queries: their test labels), "
                                    "to show whether the GAT can carry what it is handed")
    stage_one: str = Field(default="", description="a trained method of the home whose encoder TextGNN starts from "
                           "(its light tower included) and whose validation rows it keeps, trained on the profile's "
                           "encoder recipe: on the CPU profiles the transformer stays frozen and the light tower "
                           "trains with the GAT towers; '' : the shipped encoder fine-tuned on the profile's "
                           "fine-tune schedule")
    relevant_grade: int = Field(default=1, ge=1, le=3, description="relevance head: world grade ≥ this is a "
                                "positive (TextGNN §5.1 maps excellent…fair to 1, bad to 0)")
    relevance_negatives: int = Field(default=5, ge=0, description="relevance head: random ads per query beside its "
                                     "retrieved top-10 and clicked ads")
    relevance_epochs: int = Field(default=30, ge=1)
    probe_batches: int = Field(default=4, ge=1, description="fixed batches the loss before/after is measured on")
