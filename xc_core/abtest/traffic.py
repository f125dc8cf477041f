"""A/B traffic: query events drawn from the simulated world's test period, and the users' split into arms.

The events follow the logs' own traffic model (markets, sessions, head/torso/tail phrasings) over the days of
the test period (the simulator's last ``novel_days``, the ``synthetic`` data set's test window), in rounds of
those days with fresh random streams until ``n`` events are drawn. Users are assigned to arms the way a live
test does it: a salted hash of the user id, stable across tests with the same salt.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from xc_core.simulate.events import Sampler, draw_query_events
from xc_core.simulate.world import World

#: the random stream id of A/B traffic (the logs use 0 for the world, 1 for days, 2 for users)
_TRAFFIC_STREAM = 3


@dataclass(frozen=True)
class Traffic:
    """Aligned per-event arrays: world query row (text + market), user, market, day index, decile and segment."""

    query: np.ndarray
    user: np.ndarray
    market: np.ndarray
    day: np.ndarray
    decile: np.ndarray
    segment: np.ndarray  # "head" | "torso" | "tail" (world deciles 1-3, 4-7, 8-10)

    def __len__(self) -> int:
        return len(self.query)

    def take(self, rows: np.ndarray) -> Traffic:
        return Traffic(*(getattr(self, f)[rows] for f in ("query", "user", "market", "day", "decile", "segment")))


def period_days(world: World) -> list[int]:
    cfg = world.config
    return list(range(cfg.days - cfg.novel_days, cfg.days))


def validation_days(world: World) -> list[int]:
    """The as many days before the test period (the training window's last): traffic to develop on, so a design
    choice judged on simulated traffic never reads the test period."""
    cfg = world.config
    start = cfg.days - cfg.novel_days
    return list(range(max(0, start - cfg.novel_days), start))


def draw_traffic(world: World, n: int, seed: int, sampler: Sampler | None = None,
                 days: list[int] | None = None) -> Traffic:
    """``n`` query events of the world's test period, or of ``days`` (deterministic in ``seed``)."""
    sampler = sampler or Sampler(world)
    days = period_days(world) if days is None else days
    parts: list[tuple[np.ndarray, ...]] = []
    drawn, round_ = 0, 0
    while drawn < n:
        for day in days:
            rng = np.random.default_rng(np.random.SeedSequence([world.config.seed, _TRAFFIC_STREAM, seed, round_, day]))
            user, market, query = draw_query_events(sampler, day, rng)
            parts.append((query, user, market, np.full(len(query), day, dtype=np.int64)))
            drawn += len(query)
            if drawn >= n:
                break
        round_ += 1
        if round_ > 10_000:
            raise ValueError("the world's test period draws no query events")
    query, user, market, days_of = (np.concatenate([p[i] for p in parts])[:n].astype(np.int64) for i in range(4))
    decile = world.queries["decile"].to_numpy()[query].astype(np.int64)
    segment = world.queries["segment"].to_numpy()[query]
    return Traffic(query, user, market, days_of, decile, segment)


def treatment_users(user_ids: list[str], salt: str, share: float = 0.5) -> np.ndarray:
    """True for users the salted hash puts in the treatment arm (blake2b of ``salt:user``, uniform in [0, 1))."""
    out = np.empty(len(user_ids), dtype=bool)
    for i, user in enumerate(user_ids):
        digest = hashlib.blake2b(f"{salt}:{user}".encode(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "big") / 2.0**64 < share
    return out
