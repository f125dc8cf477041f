"""IRENE's stage-II settings (IRENE, Table 10 for the paper's values). The same defaults for every data set; the
association threshold τ0, how seen labels associate, the combiner's loss — and whether the encoder alone serves
better — are chosen out of fold (stage II refit per fold of the training queries, scoring only queries the
encoder never trained on), with held-out seen labels standing in for novel ones; never on the test split."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from xc_core.evaluation.fallback import FallbackPolicy

Pooling = Literal["attention", "sum", "max", "weighted_sum"]


class IreneConfig(BaseModel):
    stage_one: str = Field(default="ramen", description="stage I: the method whose trained encoder (this home, data "
                                                         "set and profile) IRENE freezes and builds on")
    pooling: Pooling = Field(default="attention", description="IRENE's self-attention with type embeddings, or the "
                                                              "simpler poolings of its Table 8")
    inputs: Literal["classifiers", "embeddings"] = Field(
        default="classifiers", description="what the associated seen labels contribute: their classifiers w_j "
                                           "(IRENE) or their text embeddings (Table 8's ablation)")
    heads: int = Field(default=4, ge=1, description="attention heads of the combiner")
    associations: int = Field(default=3, ge=0, le=8, description="|S| at most (IRENE: 3)")
    seen_associations: tuple[Literal["co-clicked", "text"], ...] = Field(
        default=("co-clicked", "text"),
        description="how a seen label's associations are found in training — seen labels sharing its training "
                    "queries, most text-similar first, or its most text-similar seen labels (the rule novel labels "
                    "follow); with both, the better on held-out seen labels is used")
    shortlist: int = Field(default=100, ge=1, description="K: seen labels retrieved by text similarity for a novel "
                                                          "label before the classifier refinement")
    tau0_grid: tuple[float, ...] = Field(default=(0.2, 0.4, 0.5, 0.6, 0.7, 0.8),
                                         description="candidate τ0 (w_j · E(z_u) ≥ τ0 keeps an association); the "
                                                     "best on held-out seen labels is used")
    tau1: float = Field(default=0.3, description="one-shot: w_j · E(x_u) ≥ τ1 for the revealed query")
    margin_classifier: float = Field(default=0.1, description="γ1: triplet margin of the classifiers' loss")
    margin_combiner: float = Field(default=0.3, description="γ2: triplet margin of the combined representations")
    combiner_loss: tuple[Literal["triplet", "softmax"], ...] = Field(
        default=("triplet", "softmax"),
        description="the combined representations' loss: IRENE's triplet (γ2, hardest in-batch negative) or an "
                    "in-batch softmax (``softmax_scale``), which keeps the representations apart where the triplet "
                    "collapses (aol-1000); with both, the better on validation is used")
    encoder_competes: bool = Field(
        default=True, description="the encoder alone (every label by its text embedding) is the fallback: IRENE "
                                  "serves its combiner only when it beats the encoder on held-out validation "
                                  "queries (``fallback``), else the text embeddings (never worse than doing nothing)")
    fallback: FallbackPolicy = Field(default_factory=FallbackPolicy, description="how the combiner must beat the "
                                     "encoder alone out of sample")
    softmax_scale: float = Field(default=20.0, gt=0, description="inverse temperature of the in-batch softmax")
    lr_classifiers: float = Field(default=1e-3, gt=0)
    lr_combiner: float = Field(default=2e-4, gt=0)
    epochs: int = Field(default=4, ge=1)
    batch_size: int = Field(default=256, ge=8)
    validation_labels: float = Field(default=0.1, gt=0, lt=0.5, description="share of seen labels held out as "
                                                                            "pseudo-novel to choose the settings")
    folds: int = Field(default=4, ge=2, description="document folds of the out-of-fold choice (classifier/folds.py; "
                       "XC folders, wikispeedia): stage II is refit once per fold and (loss, seen association)")
    time_blocks: int = Field(default=4, ge=2, description="event logs: blocks of days over the window's last "
                             "temporal_span, each scored by a stage II refit on the days before it (rolling origin)")
    temporal_span: float = Field(default=0.3, gt=0, lt=1, description="share of the training window's last days "
                                 "cut into the temporal blocks")
    fold_kind: Literal["auto", "temporal", "documents"] = Field(
        default="auto", description="temporal blocks where the data set records click days, else document folds")
    oof_max_rows: int = Field(default=6000, ge=10, description="out-of-fold queries scored at most (a seeded "
                              "sample, split over the folds): ~6,000 rows detect a gain of ~1.5 R@10")
    seed: int = 0

    @field_validator("seen_associations", "combiner_loss", mode="before")
    @classmethod
    def _one_is_a_tuple(cls, value: object) -> object:
        """A single choice (``combiner_loss: softmax``) means only that candidate."""
        return (value,) if isinstance(value, str) else value
