"""Settings of a simulated A/B test: the shared ad-selection step, the outcome model and the statistics.

Defaults are product settings documented in docs/abtest.md, the same for every data set.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator


class SelectionConfig(BaseModel):
    """The one ad-selection step every arm goes through, so a test isolates the retrieval model."""

    candidates: int = Field(default=100, ge=1, description="top-K ads an arm retrieves per distinct query "
                                                            "(before the market and start-date filters)")
    slots: int = Field(default=5, ge=1, le=20, description="ads shown per query at most")
    reserve: float = Field(default=0.05, ge=0, description="reserve price: an ad bidding less is not shown, and "
                                                           "no click costs less (currency units per click)")
    min_score: float = Field(default=0.0, description="an ad's retrieval score must exceed this to be shown")


class OutcomeConfig(BaseModel):
    """How the simulator's ground truth turns a shown ad into outcomes."""

    relevant_grade: int = Field(default=2, ge=1, le=3, description="an impression is relevant (IY) when the true "
                                                                   "grade is at least this (2: same product)")
    quickback: tuple[float, float, float, float] = Field(
        default=(0.60, 0.35, 0.12, 0.05),
        description="P(a click returns quickly) for true grade 0..3 (IRENE's quick-back rate: an irrelevant "
                    "ad's landing page is left at once)")


class ABConfig(BaseModel):
    """One A/B test: how much traffic, how it is split, and how outcomes are scored."""

    queries: int = Field(default=20_000, ge=10, description="query events served (split between the arms unless "
                                                            "paired)")
    seed: int = Field(default=0, ge=0, description="traffic, clicks and the user split")
    paired: bool = Field(default=False, description="both arms serve the same events with common random numbers "
                                                    "(lower variance); else users are split by a salted hash")
    salt: str = Field(default="xc-ab", description="salt of the user-id hash that assigns users to arms")
    treatment_share: float = Field(default=0.5, gt=0, lt=1, description="share of users in the treatment arm")
    alpha: float = Field(default=0.05, gt=0, lt=1, description="significance level of the reported intervals")
    period: Literal["test", "validation"] = Field(default="test", description=(
        "whose traffic: the test period's (a result, read once), or the as many days before it — the promotion "
        "split the registry gate's A/B test runs on, so a decision never reads the test period; a "
        "replay reads the evaluation of the same split"))
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    outcomes: OutcomeConfig = Field(default_factory=OutcomeConfig)

    @model_validator(mode="after")
    def _check(self) -> ABConfig:
        if self.selection.candidates < self.selection.slots:
            raise ValueError(f"selection.candidates ({self.selection.candidates}) must be ≥ slots "
                             f"({self.selection.slots})")
        return self
