"""The batched, staged ingestion gives the same store whatever the batch size, and its ids and sessions match
plain-Python references of the documented rules (md5 keys, 30-minute gaps, sessions across midnight)."""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from xc_core.logs.config import IngestConfig
from xc_core.logs.ingest import Source, ingest
from xc_core.logs.sessions import assign_sessions
from xc_core.logs.store import EventStore

T0 = datetime(2006, 3, 1, 21, 0, tzinfo=UTC)


def _md5_16(*parts: str) -> str:
    return hashlib.md5("\x1f".join(parts).encode()).hexdigest()[:16]


def _iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%f")


def _reference_sessions(rows: list[tuple[str, datetime]], gap: timedelta,
                        context: list[tuple[str, datetime, str]]) -> list[str]:
    """Per user in time order, a new session after ``gap``; its id is md5(user, start); a user's first event
    continues the context's last session within ``gap``."""
    last = {}
    for user, ts, sid in sorted(context, key=lambda r: r[1]):
        last[user] = (ts, sid)
    ids = [""] * len(rows)
    for i in sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1])):
        user, ts = rows[i]
        before = last.get(user)
        sid = before[1] if before is not None and ts - before[0] <= gap else _md5_16(user, _iso(ts))
        last[user] = (ts, sid)
        ids[i] = sid
    return ids


def test_sessions_match_a_plain_python_reference_with_ties_and_context() -> None:
    rng = random.Random(7)
    rows = [(f"u{rng.randrange(6)}", T0 + timedelta(minutes=rng.choice([0, 10, 29, 31, 45, 70, 200, 200]) * k / 3))
            for k in range(400)]
    context = [(f"u{u}", T0 - timedelta(minutes=m), f"{u:08x}{m:08x}") for u in range(4) for m in (50, 20 + 5 * u)]
    events = pl.DataFrame({"user_id": [u for u, _ in rows], "ts": [t for _, t in rows]})
    ctx = pl.DataFrame({"user_id": [u for u, _, _ in context], "ts": [t for _, t, _ in context],
                        "session_id": [s for _, _, s in context]})
    for gap in (30.0, 7.5):
        got = assign_sessions(events, gap, ctx).get_column("session_id").to_list()
        assert got == _reference_sessions(rows, timedelta(minutes=gap), context)
        assert assign_sessions(events, gap).get_column("session_id").to_list() == _reference_sessions(
            rows, timedelta(minutes=gap), [])


def test_sessions_stay_right_when_users_share_hash_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Users are grouped by the top bits of their hash; keeping only one bit makes most users collide, which
    must be detected (and the strings sorted instead)."""
    import xc_core.logs.sessions as sessions

    rng = random.Random(5)
    rows = [(f"user{rng.randrange(40)}", T0 + timedelta(minutes=rng.randrange(600))) for _ in range(300)]
    events = pl.DataFrame({"user_id": [u for u, _ in rows], "ts": [t for _, t in rows]})
    monkeypatch.setattr(sessions, "_ROW_BITS", 63)
    got = assign_sessions(events, 30).get_column("session_id").to_list()
    assert got == _reference_sessions(rows, timedelta(minutes=30), [])


def _canonical_file(path: Path) -> Path:
    """Shuffled rows over three days, repeated events far apart, several items per query event."""
    rng = random.Random(3)
    rows = []
    for k in range(300):
        ts = T0 + timedelta(minutes=rng.randrange(0, 3 * 24 * 60, 7))
        user, query = f"u{rng.randrange(20)}", f"query {rng.randrange(40)}"
        for position in range(1, rng.randrange(1, 4) + 1):
            rows.append({"ts": ts.strftime("%Y-%m-%d %H:%M:%S"), "user_id": user, "market": "MC-1",
                         "query_text": query, "item_id": f"k{k}-{position}", "position": position,
                         "impressed": True, "clicked": position == 1})
    rows += [rows[5], rows[100], {**rows[7], "position": 0}]
    rng.shuffle(rows)
    pl.DataFrame(rows).write_parquet(path)
    return path


def test_batch_and_chunk_sizes_change_nothing_in_the_store_or_the_counts(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 5 or 37 rows (duplicates and days spread over many batches) and days merged one by one or
    all together give the same store and counts as one batch."""
    import xc_core.logs.store as store

    path = _canonical_file(tmp_path / "events.parquet")
    summaries, stores = [], []
    for batch_rows, chunk_bytes in ((10_000, store._CHUNK_BYTES), (37, 1), (5, store._CHUNK_BYTES)):
        monkeypatch.setattr(store, "_CHUNK_BYTES", chunk_bytes)
        home = tmp_path / f"home-{batch_rows}"
        summary = ingest([Source("events", path)], home, IngestConfig(batch_rows=batch_rows), progress=False)
        summaries.append((summary.read, summary.accepted, summary.rejected, summary.reasons, summary.stored,
                          summary.days_written))
        stores.append(EventStore(home).scan().collect().sort("event_id"))
    assert summaries[0][3] == {"duplicate_event": 2, "invalid_position": 1}
    assert summaries[0][4] == summaries[0][1] > 600 and summaries[0][5] == 4  # 21:00 + 3 days spans 4 dates
    assert summaries[1:] == summaries[:1] * 2
    assert all(store.equals(stores[0]) for store in stores[1:])


def test_event_ids_are_the_md5_of_the_documented_key(tmp_path: Path) -> None:
    path = _canonical_file(tmp_path / "events.parquet")
    ingest([Source("events", path)], tmp_path / "home", progress=False)
    stored = EventStore(tmp_path / "home").scan().collect()
    for row in stored.head(50).iter_rows(named=True):
        key = (row["user_id"], _iso(row["ts"]), row["market"], row["query_text"], row["item_id"] or "",
               "" if row["position"] is None else str(row["position"]))
        assert row["event_id"] == _md5_16(*key)
    reference = _reference_sessions(list(zip(stored["user_id"], stored["ts"], strict=True)), timedelta(minutes=30), [])
    assert stored.get_column("session_id").to_list() == reference


def test_a_late_event_relabels_a_session_that_spans_later_days(tmp_path: Path) -> None:
    """Events every 25 minutes from day 1 to day 3 are one session; an event 20 minutes before its start, ingested
    later, changes its id on all three days (not only on the day after the late event's)."""
    times = [T0 + timedelta(minutes=25 * k) for k in range(int(27.5 * 60 / 25))]
    first = pl.DataFrame({"ts": times, "user_id": "u", "market": "MC-1",
                          "query_text": [f"q{k}" for k in range(len(times))]})
    first.write_parquet(tmp_path / "first.parquet")
    home = tmp_path / "home"
    ingest([Source("events", tmp_path / "first.parquet")], home, progress=False)
    assert len(EventStore(home).days()) == 3
    assert EventStore(home).scan().collect().get_column("session_id").unique().to_list() == [_md5_16("u", _iso(T0))]
    late = T0 - timedelta(minutes=20)
    pl.DataFrame({"ts": [late], "user_id": "u", "market": "MC-1", "query_text": "early"}).write_parquet(
        tmp_path / "late.parquet")
    summary = ingest([Source("events", tmp_path / "late.parquet")], home, progress=False)
    assert summary.days_written == 3
    stored = EventStore(home).scan().collect()
    assert stored.height == len(times) + 1
    assert stored.get_column("session_id").unique().to_list() == [_md5_16("u", _iso(late))]


def test_day_order_fixes_runs_of_equal_times_like_a_full_sort() -> None:
    from xc_core.logs.store import _in_store_order

    rng = random.Random(11)
    for n_ties, shuffled in ((0, False), (3, False), (200, False), (5, True)):
        times = sorted(T0 + timedelta(seconds=rng.randrange(10_000)) for _ in range(500))
        times += [times[rng.randrange(len(times))] for _ in range(n_ties)]
        times.sort()
        frame = pl.DataFrame({"ts": times, "user_id": [f"u{rng.randrange(9)}" for _ in times],
                              "event_id": [f"{rng.getrandbits(64):016x}" for _ in times], "x": range(len(times))})
        if shuffled:
            frame = frame.sample(fraction=1.0, shuffle=True, seed=1)
        assert _in_store_order(frame).equals(frame.sort("ts", "user_id", "event_id"))
