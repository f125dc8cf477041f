"""Simulator settings: one typed place for every knob, and the three scale presets.

A world is a pure function of its :class:`SimConfig` (seed included), so the config is what a saved
world stores to prove what it is, and what the pipeline passes around instead of the world itself.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Scale = Literal["tiny", "demo", "large"]
#: the world each run profile simulates when a home has none (`xc run`, the results stage)
PROFILE_SCALE: dict[str, Scale] = {"tiny": "tiny", "demo": "demo", "cpu": "demo", "full": "large"}
#: every simulator scale (CLI choices): the one list, read off ``Scale``
SCALES: tuple[str, ...] = get_args(Scale)

#: The AOL log's window: one Dagster daily partition set (2006-03-01..2006-06-01) serves both sources.
WINDOW_START = datetime(2006, 3, 1, tzinfo=UTC)
WINDOW_END = datetime(2006, 6, 1, tzinfo=UTC)


class MarketConfig(BaseModel):
    """One market: its share of traffic and how its users phrase queries (the vocabulary mix)."""

    model_config = ConfigDict(frozen=True)

    name: str
    traffic_share: float = Field(gt=0, description="relative share of query events")
    alias_rate: float = Field(ge=0, le=1, description="share of query variants phrased with an alias")
    partial_alias_rate: float = Field(ge=0, le=1, description="share mixing canonical and alias words")
    typo_rate: float = Field(ge=0, le=1, description="share of canonical variants with a typo")
    brand_rate: float = Field(ge=0, le=1, description="share of variants naming a brand")
    location_rate: float = Field(ge=0, le=1, description="share of local-intent variants naming a place")
    refine_rate: float = Field(ge=0, le=1, description="share of variants with a refinement word")


DEFAULT_MARKETS: tuple[MarketConfig, ...] = (
    MarketConfig(name="MC-1", traffic_share=0.45, alias_rate=0.22, partial_alias_rate=0.10, typo_rate=0.08,
                 brand_rate=0.20, location_rate=0.30, refine_rate=0.25),
    MarketConfig(name="MC-2", traffic_share=0.25, alias_rate=0.32, partial_alias_rate=0.12, typo_rate=0.06,
                 brand_rate=0.15, location_rate=0.35, refine_rate=0.20),
    MarketConfig(name="MC-3", traffic_share=0.18, alias_rate=0.28, partial_alias_rate=0.08, typo_rate=0.10,
                 brand_rate=0.12, location_rate=0.25, refine_rate=0.30),
    MarketConfig(name="MC-4", traffic_share=0.12, alias_rate=0.18, partial_alias_rate=0.10, typo_rate=0.12,
                 brand_rate=0.25, location_rate=0.20, refine_rate=0.20),
)


class SimConfig(BaseModel):
    """Everything that determines a simulated world and its event logs."""

    model_config = ConfigDict(frozen=True)

    scale: str = Field(default="custom", description="preset this config came from (informational)")
    seed: int = Field(default=0, ge=0)
    start: datetime = Field(default=WINDOW_START, description="first simulated day, 00:00 UTC")
    days: int = Field(default=7, ge=2)
    intents: int = Field(default=50, ge=2, description="commercial intents (capped by the vocabulary)")
    keywords: int = Field(default=500, ge=4, description="target number of keywords (ads)")
    queries: int = Field(default=2_000, ge=8, description="target number of distinct (market, query) rows")
    users: int = Field(default=400, ge=4)
    query_events_per_day: int = Field(default=800, ge=1, description="mean query events per weekday")
    markets: tuple[MarketConfig, ...] = DEFAULT_MARKETS
    ads_per_query: int = Field(default=5, ge=1, le=20, description="k: ads shown per query event at most")
    position_decay: float = Field(default=1.0, gt=0, description="eta in examination(pos) = pos^-eta")
    attractiveness: tuple[float, float, float, float] = Field(
        default=(0.005, 0.03, 0.10, 0.25), description="P(click | examined) for relevance grade 0..3")
    novel_share: float = Field(default=0.10, ge=0, lt=1, description="keywords first appearing in the last days")
    novel_days: int = Field(default=7, ge=1, description="the last days: the novel-keyword (test) window")
    ramp_share: float = Field(default=0.05, ge=0, lt=1, description="keywords starting mid-period")
    intent_zipf: float = Field(default=1.05, gt=0, description="Zipf exponent of intent popularity")
    variant_zipf: float = Field(default=1.1, gt=0, description="Zipf exponent of phrasings within an intent")
    session_continue: float = Field(default=0.45, ge=0, lt=1, description="P(one more query in the session)")
    max_session_queries: int = Field(default=8, ge=1)
    unrelated_rate: float = Field(default=0.08, ge=0, le=1, description="P(a later session query is off-intent)")
    reformulation_flattening: float = Field(default=0.6, gt=0, le=1, description="reformulations draw phrasings "
                                            "with weight^this: rarer phrasings than first queries")
    candidate_width: int = Field(default=16, ge=1, description="stored BM25 candidates per query")
    bm25_k1: float = Field(default=1.2, gt=0)
    bm25_b: float = Field(default=0.75, ge=0, le=1)
    bm25_min_match: float = Field(default=0.6, ge=0, description="a served keyword's BM25 score must reach "
                                  "this fraction of the query's idf mass")

    @field_validator("start")
    @classmethod
    def _utc_midnight(cls, value: datetime) -> datetime:
        """Days are the partition unit, so the period starts at a UTC midnight."""
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if value.time() != datetime.min.time():
            raise ValueError("start must be midnight UTC: days are the partition unit")
        return value

    @model_validator(mode="after")
    def _check(self) -> SimConfig:
        if self.novel_days >= self.days:
            raise ValueError(f"novel_days ({self.novel_days}) must be < days ({self.days})")
        names = [m.name for m in self.markets]
        if len(set(names)) != len(names) or not names:
            raise ValueError("market names must be unique and non-empty")
        if self.candidate_width < self.ads_per_query:
            raise ValueError("candidate_width must be >= ads_per_query")
        return self

    @property
    def end(self) -> datetime:
        """Exclusive end of the simulated period."""
        return self.start + timedelta(days=self.days)

    @property
    def train_days(self) -> int:
        """Days before the novel-keyword window: the training period of the skew statistics."""
        return self.days - self.novel_days

    @property
    def mean_session_length(self) -> float:
        """E[queries per session]: geometric continuation, capped at max_session_queries."""
        k = np.arange(1, self.max_session_queries + 1)
        p = (1 - self.session_continue) * self.session_continue ** (k - 1)
        p[-1] += self.session_continue ** self.max_session_queries
        return float((k * p).sum())

    @property
    def market_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.markets)

    def day_date(self, day: int) -> date:
        return (self.start + timedelta(days=day)).date()


_PRESETS: dict[str, dict[str, object]] = {
    # A few seconds end to end: the test fixture.
    "tiny": dict(days=7, novel_days=2, intents=50, keywords=500, queries=2_000, users=500,
                 query_events_per_day=1_100),
    # The default run: methods differ measurably, a whole pipeline stays within minutes on 2 cores.
    "demo": dict(days=28, novel_days=7, intents=400, keywords=8_000, queries=40_000, users=8_000,
                 query_events_per_day=3_600),
    # Benchmarks: >= 10M event rows over the whole AOL window, generated in daily batches.
    "large": dict(days=92, novel_days=7, intents=600, keywords=150_000, queries=120_000, users=150_000,
                  query_events_per_day=31_000),
}


def scale_config(scale: Scale | str = "demo", seed: int = 0, **overrides: object) -> SimConfig:
    """The preset config of ``scale`` ("tiny", "demo", "large"), with any field overridden."""
    if scale not in _PRESETS:
        raise ValueError(f"unknown scale '{scale}': expected one of {', '.join(_PRESETS)}")
    values: dict[str, Any] = {"scale": scale, "seed": seed, **_PRESETS[scale], **overrides}  # pydantic validates
    return SimConfig(**values)
