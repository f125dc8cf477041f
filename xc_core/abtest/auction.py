"""The shared ad-selection step and the outcomes the ground truth gives each shown ad, per query event.

Selection (the same for every arm): an arm's top-K candidates of the query's market → ads started by the event's
day, bidding at least the reserve and scoring above ``min_score`` → ranked by ad rank = score × bid → the first
``slots`` shown. Price per click: generalised second price, ``max(reserve, next ad rank / own score)`` capped at
the bid (scale-free, so BM25 and cosine arms are priced alike).

Outcomes: a click when u < P(click) of the position-based model (u shared across arms for the same event and
slot: common random numbers), a quick-back when a second shared uniform falls below the grade's quick-back
probability, relevance, brand and location bad matches from the true attributes, revenue = Σ clicks × price.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from xc_core.abtest.config import OutcomeConfig, SelectionConfig
from xc_core.abtest.traffic import Traffic
from xc_core.simulate.world import World


@dataclass(frozen=True)
class Shown:
    """Per event and slot (n, slots): keyword row (-1 empty) and price per click."""

    keyword: np.ndarray
    price: np.ndarray


@dataclass(frozen=True)
class Outcomes:
    """Per query event counts (the units every metric is a ratio of)."""

    impressions: np.ndarray
    clicks: np.ndarray
    relevant: np.ndarray
    brand_eligible: np.ndarray
    brand_bad: np.ndarray
    location_eligible: np.ndarray
    location_bad: np.ndarray
    quickbacks: np.ndarray
    revenue: np.ndarray

    def take(self, rows: np.ndarray) -> Outcomes:
        return Outcomes(*(getattr(self, f.name)[rows] for f in fields(self)))


def select(world: World, traffic: Traffic, slot_of_query: np.ndarray, scores: np.ndarray, keywords: np.ndarray,
           cfg: SelectionConfig) -> Shown:
    """Ads shown per event. ``scores``/``keywords``: the arm's candidates per distinct query row;
    ``slot_of_query``: each event's row in them."""
    kw = keywords[slot_of_query]
    score = scores[slot_of_query].astype(np.float64)
    safe = np.maximum(kw, 0)
    bid = world.kw_bid[safe]
    eligible = (kw >= 0) & (world.kw_market[safe] == traffic.market[:, None]) \
        & (world.kw_start_day[safe] <= traffic.day[:, None]) & (bid >= cfg.reserve) & (score > cfg.min_score)
    rank = np.where(eligible, score * bid, -np.inf)
    width = min(cfg.slots + 1, rank.shape[1])
    best = np.argpartition(-rank, width - 1, axis=1)[:, :width] if width < rank.shape[1] else \
        np.broadcast_to(np.arange(rank.shape[1]), rank.shape).copy()
    best = np.take_along_axis(best, np.argsort(-np.take_along_axis(rank, best, axis=1), axis=1, kind="stable"), 1)
    top_rank = np.take_along_axis(rank, best, axis=1)
    top_kw = np.where(np.isfinite(top_rank), np.take_along_axis(kw, best, axis=1), -1)
    top_score = np.take_along_axis(score, best, axis=1)
    slots = min(cfg.slots, top_kw.shape[1])
    shown = np.full((len(kw), cfg.slots), -1, dtype=np.int64)
    shown[:, :slots] = top_kw[:, :slots]
    next_rank = np.full((len(kw), cfg.slots), -np.inf)
    next_rank[:, :width - 1] = top_rank[:, 1:width]
    with np.errstate(divide="ignore", invalid="ignore"):
        second = np.where(np.isfinite(next_rank[:, :slots]), next_rank[:, :slots] / top_score[:, :slots], 0.0)
    price = np.zeros((len(kw), cfg.slots))
    price[:, :slots] = np.minimum(world.kw_bid[np.maximum(shown[:, :slots], 0)], np.maximum(cfg.reserve, second))
    price[shown < 0] = 0.0
    return Shown(shown, price)


def common_uniforms(n: int, slots: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The click and quick-back uniforms per (event, slot), shared by every arm serving the event."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 5]))
    return rng.random((n, slots)), rng.random((n, slots))


def outcomes(world: World, traffic: Traffic, shown: Shown, u_click: np.ndarray, u_back: np.ndarray,
             cfg: OutcomeConfig) -> Outcomes:
    on = shown.keyword >= 0
    e, slot = np.nonzero(on)
    q, kw = traffic.query[e], shown.keyword[e, slot]
    grade = world.grades(q, kw)
    p_click = world.click_probabilities(q, kw, slot + 1)
    click = u_click[e, slot] < p_click
    back = click & (u_back[e, slot] < np.asarray(cfg.quickback)[grade])
    qb, kb, ql, kl = world.q_brand[q], world.kw_brand[kw], world.q_location[q], world.kw_location[kw]
    n = len(traffic)

    def per_event(values: np.ndarray) -> np.ndarray:
        return np.bincount(e, weights=values, minlength=n)

    return Outcomes(
        impressions=per_event(np.ones(len(e))), clicks=per_event(click),
        relevant=per_event(grade >= cfg.relevant_grade),
        brand_eligible=per_event(qb >= 0), brand_bad=per_event((qb >= 0) & (kb >= 0) & (kb != qb)),
        location_eligible=per_event(ql >= 0), location_bad=per_event((ql >= 0) & (kl >= 0) & (kl != ql)),
        quickbacks=per_event(back), revenue=per_event(click * shown.price[e, slot]))
