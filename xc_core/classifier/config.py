"""Settings of the classifier stage: one typed object, the same for every data set."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from xc_core.classifier.lexical import LexicalConfig, channel_weights
from xc_core.classifier.xrlinear.config import LinearConfig
from xc_core.evaluation.fallback import FallbackPolicy

#: metrics the validation curve computes (``evaluate(..., k=5)``): what ``select_metric`` may name
SELECTABLE = tuple(f"{m}@{k}" for m in ("P", "nDCG", "PSP", "PSnDCG") for k in range(1, 6))

#: what a fusion may not lose against the encoder alone out of fold: the gate's primary metric and its guards (PSP@5,
#: the tail bin's P@5: ``tracking.registry.PromotionPolicy``) and PSP@1, so the stage never builds a model the gate
#: must reject
FUSION_GUARDS = ("P@1", "PSP@1", "PSP@5", "tail_P@5")


class ClassifierConfig(BaseModel):
    """Per-label vectors trained over cached (frozen) encoder embeddings, then fused with the encoder.

    Scores are cosines on both sides (the query embedding against the unit-normalised label vector), so
    ``alpha * encoder + (1 - alpha) * classifier`` mixes numbers on one scale and the classifier side is
    itself an inner-product ANN index."""

    epochs: int = Field(default=5, ge=1)
    batch_size: int = Field(default=1024, ge=2, description="(document, positive label) pairs per step")
    lr: float = Field(default=2e-3, gt=0, description="SparseAdam step: only the rows a batch touches move")
    scale: float = Field(default=20.0, gt=0, description="softmax inverse temperature (as the encoder's loss)")
    hard_negatives: int = Field(default=8, ge=0, description="negatives per pair drawn from the encoder's "
                                "shortlist of its document (NGAME's M4 negatives), besides in-batch labels")
    in_batch_negatives: bool = Field(default=False, description="the batch's other positive labels are negatives "
                                     "too (frequent labels then get pushed more often: favours the tail)")
    random_negatives: int = Field(default=8192, ge=0, description="labels drawn uniformly once per batch and shared "
                                  "by its rows (a sampled softmax): every label gets pushed from queries that are "
                                  "not its own, not only those the encoder confuses it with")
    shortlist_k: int = Field(default=32, ge=1, description="encoder shortlist the hard negatives come from")
    alphas: tuple[float, ...] = Field(default=tuple(round(0.1 * i, 1) for i in range(11)),
                                      description="fusion weights tried on the validation rows")
    select_metric: str = Field(default="P@1", description="validation metric that picks alpha and the lexical "
                               "weight: the registry gate's primary metric, so the stage cannot buy P@5 with P@1")
    untrained_offsets: tuple[float, ...] = Field(default=(-0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2), description=(
        "offsets tried on the score of labels without a training positive (their text score against the trained "
        "labels' fused one); 0 is the fallback, and the only value when the tuple is (0.0,)"))
    search_k: int = Field(default=100, ge=1, description="candidates taken from each index before re-scoring")
    lexical: LexicalConfig = Field(default_factory=LexicalConfig, description="the TF-IDF nearest-document "
                                   "channel fused with the dense ones (weight 0 on validation = not used)")
    linear: LinearConfig = Field(default_factory=LinearConfig, description="the hybrid channel: XR-Linear on "
                                 "TF-IDF ⊕ the encoder's vector (classifier/xrlinear/)")
    linear_weights: tuple[float, ...] = Field(default=(0.0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2), description=(
        "hybrid-channel weights tried out of fold with every alpha and lexical weight (0 = channel off; its score "
        "lies in [0, 1]: from 1.6 up it outranks the cosines, 3.2 ranks by it almost alone)"))
    memory_weights: tuple[float, ...] = Field(default=(0.0, 0.8, 1.6, 3.2, 6.4), description=(
        "click-memory weights tried out of fold after alpha, the lexical and the hybrid weight (memory.py; 0 = off; "
        "its score lies in [0, 1]: 6.4 outranks every other channel together, so a repeated query's most clicked "
        "labels come first)"))
    popularity_weights: tuple[float, ...] = Field(default=(0.0, 0.05, 0.1, 0.2, 0.3), description=(
        "label-popularity weights tried out of fold after the memory, chosen in the seen-label view before the "
        "untrained-label offset (memory.py; 0 = off; its value lies in [0, 1])"))
    name_weights: tuple[float, ...] = Field(default=(0.0, 0.1, 0.2, 0.4, 0.8, 1.6), description=(
        "name-channel weights tried out of fold after the memory (names.py: a label whose text, without spaces, the "
        "query writes out; 0 = off; its score lies in [0, 1], 1 for the same name)"))
    channel_weights: dict[str, tuple[float, ...]] = Field(default_factory=dict, description=(
        "weights tried out of fold for a registered channel without a field of its own above (classifier/"
        "channels.py), by channel name; a channel not named here tries its registry entry's default grid"))
    tail_offsets: tuple[float, ...] = Field(default=(0.0, 0.05, 0.1, 0.2, 0.3), description=(
        "offsets tried on the score of the labels in the tail frequency bin (label_quantiles' bin 0 over W's "
        "training documents, the untrained labels included), from 0 up: the first that keeps the guards of a "
        "fusion, then the best; 0 only: off"))
    tail_offset_depth: int = Field(default=10, ge=0, description=(
        "lift the tail labels only among each query's first N candidates by the rest of the fused score (0: at every "
        "rank). The gate's tail guard reads the top 5, offline recall the top 10; a lift at every rank also raises "
        "the scores deep in the list, where an auction (score × bid over the top 100) reads them "
        "(experiments/ab_depth). 10, the deepest rank offline metrics read, is a design constant, not tuned"))
    tail_guard_margin: float = Field(default=1.0, ge=0, description=(
        "standard errors by which a candidate fusion's tail-bin P@5 must exceed the encoder's on the selection rows "
        "(the paired per-row difference's standard error; 0: its point estimate at least the encoder's). The "
        "selection maximises P@1 under the guard, so it lands on fusions whose in-sample tail margin is near 0, and "
        "on new rows half of them fall below: a margin keeps the choice off that edge (docs/results/issue-63.md, "
        "the AVX2 run; experiments/tail_margin). 1 is read on training documents only: it cost the procedure 0.2 "
        "out-of-fold P@1 on synthetic (2 cost 1.8), 1.2 on wikispeedia and nothing on aol-1000; 0 turns it off"))
    fallback: FallbackPolicy = Field(default_factory=lambda: FallbackPolicy(guards=FUSION_GUARDS), description=(
        "how the chosen fusion must beat the encoder alone on the out-of-fold rows (cross-fitted over the folds); "
        "its guards also bound every candidate of the grid"))
    folds: int = Field(default=10, ge=2, description="document folds (classifier/folds.py): W and the lexical "
                       "channel are refit without each; 10 keeps each refit on 90% of the documents, close to the "
                       "final W (wikispeedia's validation: the fused P@1 gain grew +1.4 → +3.2 points from 5 to 10)")
    time_blocks: int = Field(default=4, ge=2, description="temporal folds: blocks of days over the window's last "
                             "temporal_span, each scored by a W refit on the days before it (rolling origin)")
    oof_min_rows: int = Field(default=3000, ge=0, description=(
        "temporal folds: while the blocks score fewer rows, one more block of days is added before the first (up to "
        "max_time_blocks; the first W keeps a third of the window). A paired P@1 test whose rankings disagree on "
        "~30% of rows detects ~2 points on 3,000 of them"))
    max_time_blocks: int = Field(default=8, ge=2, description="temporal folds: the most blocks oof_min_rows may "
                                 "add up to (each is one more refit of W)")
    oof_max_rows: int = Field(default=6000, ge=10, description="out-of-fold rows scored at most (a seeded sample, "
                              "split over the folds): the fusion grid's cost; ~6,000 rows detect ~1.5 P@1")
    new_query_fallback: bool = Field(default=False, description=(
        "rank the queries the click memory does not know by the encoder alone when, on the out-of-fold rows of such "
        "queries, that beats the served fusion (cross-fitted, with the fusion test's guards; the fusion is the "
        "fallback). Off: on synthetic's validation the first form of the rule cost P@5 and tail P@5 "
        "(experiments/new_queries)"))
    new_query_min_rows: int = Field(default=200, ge=10, description="out-of-fold rows of new queries the test "
                                    "needs (fewer: no test, one fusion for every query)")
    fold_kind: Literal["auto", "temporal", "documents"] = Field(
        default="auto", description="auto: blocks of days (rolling origin) where the data set records click days "
        "(event logs), else document folds — as each data set's test split is built")
    temporal_span: float = Field(default=0.3, gt=0, lt=1, description="share of the training window's last days "
                                 "cut into the temporal folds' blocks")
    fold_workers: int = Field(default=2, ge=1, description=(
        "out-of-fold refits run this many folds at a time (threads: W's torch steps and the hybrid's numba solver "
        "release the GIL, and each fold is seeded on its own, so the grid is the same as one at a time; each "
        "worker holds its fold's W and channels in memory)"))
    hold_out_validation: bool = Field(default=True, description=(
        "fit W, the channels and the out-of-fold choice without what the encoder's validation rows are scored on "
        "(their labels in a documents split, the validation days' clicks in a temporal one), so the model can be "
        "scored there out of sample: the promotion split the registry gate decides on. False: every training "
        "document (the model then has no clean validation score and cannot be gated without the test split)"))
    seed: int = 0

    @field_validator("select_metric")
    @classmethod
    def _known_metric(cls, value: str) -> str:
        if value not in SELECTABLE:
            raise ValueError(f"select_metric {value!r} is not computed on validation: "
                             f"choose one of {', '.join(SELECTABLE)}")
        return value

    @field_validator("linear_weights", "memory_weights", "popularity_weights", "name_weights")
    @classmethod
    def _channel_weights(cls, value: tuple[float, ...], info: ValidationInfo) -> tuple[float, ...]:
        return channel_weights(str(info.field_name), value)

    @field_validator("channel_weights")
    @classmethod
    def _named_channel_weights(cls, value: dict[str, tuple[float, ...]]) -> dict[str, tuple[float, ...]]:
        return {name: channel_weights(f"channel_weights[{name!r}]", weights) for name, weights in value.items()}

    @field_validator("tail_offsets")
    @classmethod
    def _tail_offsets(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(v < 0 for v in value):
            raise ValueError(f"tail_offsets {value!r}: give at least one offset, each ≥ 0 (they lift the tail bin's "
                             "labels; 0 alone turns the offset off)")
        return value

    @field_validator("alphas")
    @classmethod
    def _weights(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(not 0.0 <= a <= 1.0 for a in value):
            raise ValueError(f"alphas {value!r}: give at least one fusion weight, each in [0, 1] (1 = encoder only)")
        return value
