"""A bulk event store for scale benchmarks: ``n`` events over 30 days in the event store's layout, with Zipf-like
users, queries and items (a search log's head), written as one parquet file a day. Unlike the simulator
(:mod:`xc_core.simulate.pipeline`) its texts mean nothing: it sizes the graph and RWR stages, not a model."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

#: days in the store, the first of them
DAYS = 30
FIRST_DAY = date(2026, 1, 1)


def bulk_event_store(home: Path, n_events: int, seed: int) -> dict[str, Any]:
    """``n_events`` rows in the event store's layout under ``<home>/events`` (the same for the same seed); what
    was written: the counts, the parquet size and the seconds it took."""
    import polars as pl

    from xc_core.logs.schema import EVENT_SCHEMA

    rng = np.random.default_rng(seed)
    n_users, n_queries, n_items = max(n_events // 50, 10), max(n_events // 20, 10), max(n_events // 100, 10)
    started, per_day = time.perf_counter(), n_events // DAYS
    for d in range(DAYS):
        rows = per_day + (n_events % DAYS if d == DAYS - 1 else 0)
        day = FIRST_DAY + timedelta(days=d)
        users = zipf_ids(rng, n_users, rows)
        session = users * 8 + rng.integers(0, 8, rows)  # ~8 sessions a user a day
        clicked = rng.random(rows) < 1 / 3
        ts = (datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1e6
              + rng.integers(0, 86_400_000_000, rows)).astype("datetime64[us]")
        frame = pl.DataFrame({
            "event_id": pl.Series(np.arange(rows)).cast(pl.String).str.replace(r"^", f"{d}-"),
            "ts": pl.Series(ts).dt.replace_time_zone("UTC"),
            "user_id": pl.Series(users).cast(pl.String),
            "session_id": pl.Series(session).cast(pl.String).str.replace(r"^", f"{d}-"),
            "market": "en-US",
            "query_text": pl.Series(zipf_ids(rng, n_queries, rows)).cast(pl.String).str.replace(r"^", "query "),
            "item_id": pl.Series(zipf_ids(rng, n_items, rows)).cast(pl.String).str.replace(r"^", "item-"),
            "item_text": None, "position": pl.Series(rng.integers(1, 11, rows), dtype=pl.Int32),
            "impressed": True, "clicked": pl.Series(clicked), "brand": None, "location": None, "bid": None,
        }).cast({k: v for k, v in EVENT_SCHEMA.items()})
        folder = home / "events" / f"day={day.isoformat()}"
        folder.mkdir(parents=True, exist_ok=True)
        frame.select(list(EVENT_SCHEMA)).write_parquet(folder / "events.parquet")
    size = sum(p.stat().st_size for p in (home / "events").rglob("*.parquet"))
    return {"events": n_events, "users": n_users, "queries": n_queries, "items": n_items,
            "parquet_mb": round(size / 2**20, 1), "seconds": round(time.perf_counter() - started, 1)}


def zipf_ids(rng: np.random.Generator, n: int, size: int, exponent: float = 1.1) -> np.ndarray:
    """Ids in [0, n) with a Zipf-like head (search logs: a few queries and items take most events)."""
    return (rng.zipf(exponent, size) - 1) % n
