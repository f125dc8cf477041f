"""Event logs: sessions, queries, served ads and clicks, generated one day at a time.

Each day is a pure function of (world, seed, day index): it has its own random stream, so days can
be generated in any order or in parallel and a ``large`` run never holds more than one day in memory.
Everything is sampled as arrays: sessions, their queries, the ads served (from per-query candidate
lists) and the clicks (position-based model). One Parquet file per day, columns exactly
:data:`xc_core.logs.schema.INPUT_SCHEMA`.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa

from xc_core.logs.schema import INPUT_SCHEMA
from xc_core.simulate.config import SimConfig
from xc_core.simulate.world import World, write_table

log = logging.getLogger(__name__)

#: Sessions stay inside [MARGIN, 24h - MARGIN], so a user's sessions on consecutive days are more than
#: 30 minutes apart even across midnight; sessions of one user on one day are >= SESSION_GAP apart.
MARGIN_S = 16 * 60
SESSION_GAP_S = 31 * 60
DAY_S = 86_400
MAX_QUERY_GAP_S = 20 * 60
_HOURLY = np.array([0.6, 0.4, 0.3, 0.25, 0.25, 0.35, 0.6, 1.0, 1.4, 1.6, 1.7, 1.75,
                    1.8, 1.8, 1.75, 1.7, 1.7, 1.75, 1.9, 2.0, 2.0, 1.8, 1.4, 1.0])
_WEEKDAY = np.array([1.0, 1.03, 1.02, 1.0, 0.95, 0.82, 0.86])  # Monday..Sunday


def day_file(out_dir: Path, cfg: SimConfig, day: int) -> Path:
    return out_dir / f"events-{cfg.day_date(day).isoformat()}.parquet"


@dataclass
class DayStats:
    """What one day produced (the summary and calibration need no re-read of the files)."""

    day: int
    sessions: int
    rows: int
    query_events: int
    impressions: int
    clicks: int
    keyword_clicks: np.ndarray
    keyword_impressions: np.ndarray
    position_impressions: np.ndarray
    position_clicks: np.ndarray


@dataclass
class EventStats:
    """Totals over the days written; ``train_keyword_clicks`` counts only the training period."""

    sessions: int = 0
    rows: int = 0
    query_events: int = 0
    impressions: int = 0
    clicks: int = 0
    train_keyword_clicks: np.ndarray | None = None
    keyword_clicks: np.ndarray | None = None
    keyword_impressions: np.ndarray | None = None
    position_impressions: np.ndarray | None = None
    position_clicks: np.ndarray | None = None
    days: list[int] = field(default_factory=list)

    def add(self, s: DayStats, train_days: int) -> None:
        self.sessions += s.sessions
        self.rows += s.rows
        self.query_events += s.query_events
        self.impressions += s.impressions
        self.clicks += s.clicks
        self.days.append(s.day)
        zero = np.zeros_like(s.keyword_clicks)
        self.keyword_clicks = _plus(self.keyword_clicks, s.keyword_clicks)
        self.keyword_impressions = _plus(self.keyword_impressions, s.keyword_impressions)
        self.train_keyword_clicks = _plus(self.train_keyword_clicks, s.keyword_clicks if s.day < train_days else zero)
        self.position_impressions = _plus(self.position_impressions, s.position_impressions)
        self.position_clicks = _plus(self.position_clicks, s.position_clicks)


def _plus(total: np.ndarray | None, part: np.ndarray) -> np.ndarray:
    return part.copy() if total is None else total + part


class Sampler:
    """Everything a day needs from the world, as arrays: query and user samplers, serving cache."""

    def __init__(self, world: World) -> None:
        self.world = world
        cfg = world.config
        self.n_intents = len(world.intents)
        weight = world.queries["weight"].to_numpy()
        self._market_cum, self._market_order = _group_cdf(world.q_market.astype(np.int64), weight)
        group = world.q_market.astype(np.int64) * self.n_intents + world.q_intent
        # Reformulations favour less common phrasings than first queries do (flatter weights).
        self._group_cum, self._group_order = _group_cdf(group, weight ** cfg.reformulation_flattening)
        shares = np.array([m.traffic_share for m in cfg.markets])
        self.market_p = shares / shares.sum()
        self._users()
        self.candidates = np.full((len(world.queries), cfg.candidate_width), -1, dtype=np.int64)
        self._ready = np.zeros(len(world.queries), dtype=bool)
        self.always_eligible = world.kw_start_day <= 0

    def _users(self) -> None:
        """Users per market in proportion to traffic; activity is log-normal (a few heavy users)."""
        cfg = self.world.config
        rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 2]))
        counts = np.maximum(1, np.rint(cfg.users * self.market_p).astype(np.int64))
        market = np.repeat(np.arange(len(counts)), counts)
        self._user_cum, self._user_order = _group_cdf(market, rng.lognormal(0.0, 1.0, len(market)))
        self.user_ids = pl.Series("user_id", [f"u{i:07d}" for i in range(len(market))], dtype=pl.String)

    def first_queries(self, u: np.ndarray, market: np.ndarray) -> np.ndarray:
        return _draw(self._market_cum, self._market_order, market, u)

    def reformulations(self, u: np.ndarray, market: np.ndarray, intent: np.ndarray) -> np.ndarray:
        return _draw(self._group_cum, self._group_order, market * self.n_intents + intent, u)

    def users(self, u: np.ndarray, market: np.ndarray) -> np.ndarray:
        return _draw(self._user_cum, self._user_order, market, u)

    def served(self, queries: np.ndarray, day: int) -> np.ndarray:
        """Keyword rows shown per query event (n, k), -1 where fewer than k ads qualify; position = slot + 1."""
        cfg = self.world.config
        todo = np.unique(queries[~self._ready[queries]])
        if len(todo):
            self.candidates[todo] = self.world.server.candidates(todo, self.always_eligible, cfg.ads_per_query,
                                                                 cfg.candidate_width)
            self._ready[todo] = True
        cand = self.candidates[queries]
        eligible = (cand >= 0) & (self.world.kw_start_day[np.maximum(cand, 0)] <= day)
        rank = np.cumsum(eligible, axis=1)
        show = eligible & (rank <= cfg.ads_per_query)
        out = np.full((len(queries), cfg.ads_per_query), -1, dtype=np.int64)
        e, slot = np.nonzero(show)
        out[e, rank[e, slot] - 1] = cand[e, slot]
        return out

    @cached_property
    def texts(self) -> dict[str, pl.Series]:
        w = self.world
        return {"query": w.queries["text"], "item_id": w.keywords["keyword_id"], "item_text": w.keywords["text"],
                "brand": w.keywords["brand"], "location": w.keywords["location"], "bid": w.keywords["bid"],
                "market": pl.Series(list(w.config.market_names), dtype=pl.String)}


def _group_cdf(group: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offset CDF for sampling within groups: value g + cdf_g(x), each group's last value exactly g + 1."""
    order = np.lexsort((np.arange(len(group)), group))
    g, w = group[order], weight[order].astype(np.float64)
    cum = np.cumsum(w)
    starts = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
    ends = np.r_[starts[1:], len(g)] - 1
    base = np.repeat(cum[starts] - w[starts], np.diff(np.r_[starts, len(g)]))
    total = np.repeat(cum[ends] - cum[starts] + w[starts], np.diff(np.r_[starts, len(g)]))
    cdf = g + (cum - base) / total
    cdf[ends] = g[ends] + 1.0
    return cdf, order


def _draw(cdf: np.ndarray, order: np.ndarray, group: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One item per draw, from the given group, with probability proportional to its weight."""
    pos = np.searchsorted(cdf, group + u, side="right")
    return order[np.minimum(pos, len(order) - 1)]


@dataclass
class _Sessions:
    market: np.ndarray
    user: np.ndarray
    start: np.ndarray  # seconds after midnight
    length: np.ndarray
    gaps: np.ndarray  # per query: seconds since the session's previous query (0 for the first)


def _sessions(rng: np.random.Generator, sampler: Sampler, day: int) -> _Sessions:
    """Sessions of the day, placed so one user's sessions are >= SESSION_GAP_S apart and inside margins."""
    cfg = sampler.world.config
    weekday = cfg.day_date(day).weekday()
    n = int(rng.poisson(cfg.query_events_per_day * _WEEKDAY[weekday] / cfg.mean_session_length))
    market = rng.choice(len(sampler.market_p), size=n, p=sampler.market_p)
    user = sampler.users(rng.random(n), market)
    length = np.minimum(rng.geometric(1.0 - cfg.session_continue, n), cfg.max_session_queries)
    gaps = np.clip(rng.lognormal(np.log(45.0), 1.0, int(length.sum())), 2.0, MAX_QUERY_GAP_S)
    first = np.cumsum(length) - length
    gaps[first] = 0.0
    duration = np.add.reduceat(gaps, first) if n else np.zeros(0)
    hour = rng.choice(24, size=n, p=_HOURLY / _HOURLY.sum())
    # The diurnal curve, squeezed into the margins so no session is clipped onto the same instant.
    desired = MARGIN_S + (hour + rng.random(n)) / 24.0 * np.maximum(0.0, DAY_S - 2 * MARGIN_S - duration)
    start = _place(user, desired, duration)
    keep = start + duration <= DAY_S - MARGIN_S
    return _Sessions(market[keep], user[keep], start[keep], length[keep], gaps[np.repeat(keep, length)])


def _place(user: np.ndarray, desired: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """Push each user's sessions later until they are SESSION_GAP_S apart (vectorised Lindley recursion).

    start_i = max(desired_i, start_{i-1} + duration_{i-1} + gap) per user, solved with a segmented
    running maximum: start_i = c_i + max_{j<=i}(desired_j - c_j), c = cumulative (duration + gap).
    """
    if len(user) == 0:
        return desired
    order = np.lexsort((desired, user))
    u, t, d = user[order], desired[order], duration[order]
    new = np.r_[True, u[1:] != u[:-1]]
    gid = np.cumsum(new) - 1
    step = d + SESSION_GAP_S
    cs = np.cumsum(step)
    first = np.flatnonzero(new)[gid]
    c = cs - step - (cs[first] - step[first])
    v = t - c
    big = float(v.max() - v.min()) + 1.0  # lifts each user's values above every earlier user's
    best = np.maximum.accumulate(v + gid * big) - gid * big
    start = np.empty_like(desired)
    start[order] = c + best
    return start


def draw_query_events(sampler: Sampler, day: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray]:
    """(user, market, query row) of one day's query events drawn from ``rng`` by the logs' traffic model (sessions,
    reformulations, drift), without serving or clicks: the A/B tests' traffic (``xc_core.abtest``)."""
    s = _sessions(rng, sampler, day)
    session = np.repeat(np.arange(len(s.length)), s.length)
    first = (np.cumsum(s.length) - s.length).astype(np.int64)
    market = s.market[session]
    return s.user[session], market, _session_queries(rng, sampler, market, session, first)


def simulate_day(sampler: Sampler, day: int) -> tuple[pl.DataFrame, DayStats]:
    """One day's events in the canonical input schema, sorted by time, user and position."""
    cfg = sampler.world.config
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 1, day]))
    s = _sessions(rng, sampler, day)
    session = np.repeat(np.arange(len(s.length)), s.length)
    first = (np.cumsum(s.length) - s.length).astype(np.int64)
    elapsed = np.cumsum(s.gaps)
    offset = elapsed - np.repeat(elapsed[first], s.length)
    market = s.market[session]
    query = _session_queries(rng, sampler, market, session, first)
    day_us = int((np.datetime64(cfg.day_date(day), "us") - np.datetime64(0, "us")).astype(np.int64))
    ts = day_us + np.floor((s.start[session] + offset) * 1e6).astype(np.int64)
    user = s.user[session]
    order = np.lexsort((user, ts))
    ts, user, market, query = ts[order], user[order], market[order], query[order]
    shown = sampler.served(query, day)
    return _rows(rng, sampler, day, len(s.length), ts, user, market, query, shown)


def _session_queries(rng: np.random.Generator, sampler: Sampler, market: np.ndarray, session: np.ndarray,
                     first: np.ndarray) -> np.ndarray:
    """First query by popularity; later ones reformulate the session's intent, sometimes drift off it."""
    n = len(session)
    u_first, u_kind, u_reform = rng.random(n), rng.random(n), rng.random(n)
    query = sampler.first_queries(u_first, market)
    later = np.ones(n, dtype=bool)
    later[first] = False
    intent = sampler.world.q_intent[query[first]][session]
    reform = later & (u_kind >= sampler.world.config.unrelated_rate)
    query[reform] = sampler.reformulations(u_reform[reform], market[reform], intent[reform])
    return query


def _rows(rng: np.random.Generator, sampler: Sampler, day: int, sessions: int, ts: np.ndarray, user: np.ndarray,
          market: np.ndarray, query: np.ndarray, shown: np.ndarray) -> tuple[pl.DataFrame, DayStats]:
    """Expand query events to one row per shown ad (or one empty row) and draw the clicks."""
    world, k = sampler.world, shown.shape[1]
    n_shown = (shown >= 0).sum(axis=1)
    counts = np.maximum(n_shown, 1)
    row_start = np.cumsum(counts) - counts
    event = np.repeat(np.arange(len(query)), counts)
    keyword = np.full(len(event), -1, dtype=np.int64)
    position = np.zeros(len(event), dtype=np.int32)
    e, slot = np.nonzero(shown >= 0)
    keyword[row_start[e] + slot] = shown[e, slot]
    position[row_start[e] + slot] = slot + 1
    impressed = keyword >= 0
    clicked = np.zeros(len(event), dtype=bool)
    imp = np.flatnonzero(impressed)
    p = world.click_probabilities(query[event[imp]], keyword[imp], position[imp])
    clicked[imp] = rng.random(len(imp)) < p
    frame = _frame(sampler, ts[event], user[event], market[event], query[event], keyword, position, impressed,
                   clicked)
    n_kw = len(world.keywords)
    stats = DayStats(
        day=day, sessions=sessions, rows=len(event), query_events=len(query), impressions=len(imp),
        clicks=int(clicked.sum()),
        keyword_clicks=np.bincount(keyword[clicked], minlength=n_kw),
        keyword_impressions=np.bincount(keyword[imp], minlength=n_kw),
        position_impressions=np.bincount(position[imp], minlength=k + 1),
        position_clicks=np.bincount(position[clicked], minlength=k + 1))
    return frame, stats


def _frame(sampler: Sampler, ts: np.ndarray, user: np.ndarray, market: np.ndarray, query: np.ndarray,
           keyword: np.ndarray, position: np.ndarray, impressed: np.ndarray, clicked: np.ndarray) -> pl.DataFrame:
    texts = sampler.texts
    # an arrow Array becomes a Series (from_arrow's signature also admits tables, hence its union)
    item = cast(pl.Series, pl.from_arrow(pa.array(keyword, mask=~impressed)))
    columns = {
        "ts": pl.Series(ts, dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
        "user_id": sampler.user_ids.gather(user),
        "market": texts["market"].gather(market),
        "query_text": texts["query"].gather(query),
        "item_id": texts["item_id"].gather(item),
        "item_text": texts["item_text"].gather(item),
        "position": cast(pl.Series, pl.from_arrow(pa.array(position, mask=~impressed))).cast(pl.Int32),
        "impressed": pl.Series(impressed, dtype=pl.Boolean),
        "clicked": pl.Series(clicked, dtype=pl.Boolean),
        "brand": texts["brand"].gather(item),
        "location": texts["location"].gather(item),
        "bid": texts["bid"].gather(item),
    }
    return pl.DataFrame([s.alias(name).cast(INPUT_SCHEMA[name]) for name, s in columns.items()])


def _as_world(world_or_config: World | SimConfig | str) -> World:
    if isinstance(world_or_config, World):
        return world_or_config
    return World.build(world_or_config)


def write_days(world: World, out_dir: str | Path, days: list[int] | None = None) -> tuple[list[Path], EventStats]:
    """Write the given days (default: all) and return the files and the totals.

    A day's file is written on a background thread while the next day is generated (Parquet encoding
    releases the GIL); at most two days are in memory at once.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = world.config
    todo = list(days) if days is not None else list(range(cfg.days))
    bad = [d for d in todo if not 0 <= d < cfg.days]
    if bad:
        raise ValueError(f"days {bad} outside the simulated period (0..{cfg.days - 1})")
    sampler = Sampler(world)
    stats = EventStats()
    paths: list[Path] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="xc-sim-writer") as pool:
        pending: Future[Path] | None = None
        for day in todo:
            frame, day_stats = simulate_day(sampler, day)
            if pending is not None:
                paths.append(pending.result())
            pending = pool.submit(write_table, frame, day_file(out, cfg, day))
            stats.add(day_stats, cfg.train_days)
            log.debug("day %s: %d rows, %d clicks", cfg.day_date(day), day_stats.rows, day_stats.clicks)
        if pending is not None:
            paths.append(pending.result())
    return paths, stats


def write_events(world_or_config: World | SimConfig | str, out_dir: str | Path,
                 days: list[int] | None = None) -> list[Path]:
    """One Parquet file per simulated day (``events-YYYY-MM-DD.parquet``) in the canonical input schema.

    Accepts a built/loaded world, a config, or a scale name. Days are independent random streams,
    so writing a subset gives the same bytes as in a full run.
    """
    paths, _ = write_days(_as_world(world_or_config), out_dir, days)
    return paths
