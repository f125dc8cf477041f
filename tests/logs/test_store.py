"""The event store: idempotent, day-partitioned, atomic, sessionised, queryable through duckdb."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from xc_core.logs.ingest import Source, ingest
from xc_core.logs.sessions import assign_sessions
from xc_core.logs.store import EventStore, atomic_write_parquet


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*.parquet"))}


def test_ingesting_the_same_file_twice_leaves_the_store_unchanged(aol_slice: Path, tmp_path: Path) -> None:
    first = ingest([Source("aol", aol_slice)], tmp_path, progress=False)
    before = _digest(tmp_path)
    second = ingest([Source("aol", aol_slice)], tmp_path, progress=False)
    assert _digest(tmp_path) == before
    assert second.stored == 0 and second.already_stored == first.stored > 0


def test_partitions_are_days_and_duckdb_views_read_them(aol_slice: Path, tmp_path: Path) -> None:
    summary = ingest([Source("aol", aol_slice)], tmp_path, progress=False)
    store = EventStore(tmp_path)
    for day in store.days():
        days_inside = store.read_day(day).get_column("ts").dt.date().unique().to_list()
        assert days_inside == [day]
    with duckdb.connect(str(store.duckdb_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM events").fetchone()[0] == summary.stored  # type: ignore[index]  # a count: one row
        assert con.execute("SELECT count(DISTINCT day) FROM events").fetchone()[0] == len(store.days())  # type: ignore[index]  # a count: one row


def _rows(times: list[str], user: str = "u") -> pl.DataFrame:
    return pl.DataFrame({"user_id": [user] * len(times),
                         "ts": [datetime.fromisoformat(t).replace(tzinfo=UTC) for t in times]})


def test_new_session_after_the_inactivity_gap_and_ids_are_deterministic() -> None:
    times = ["2006-03-01 10:00:00", "2006-03-01 10:29:00", "2006-03-01 10:58:59", "2006-03-01 11:30:00"]
    sessions = assign_sessions(_rows(times), gap_minutes=30).get_column("session_id").to_list()
    assert sessions[0] == sessions[1] == sessions[2] != sessions[3]
    assert assign_sessions(_rows(list(reversed(times))), 30).get_column("session_id").to_list() == sessions[::-1]
    other_user = assign_sessions(_rows(times, "v"), 30).get_column("session_id").to_list()
    assert set(other_user).isdisjoint(sessions)


def test_a_session_crossing_midnight_keeps_one_id_across_day_partitions(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    rows = [{"ts": t, "user_id": "u", "market": "MC-1", "query_text": q}
            for t, q in [("2006-03-01 23:50:00", "a"), ("2006-03-02 00:10:00", "b"), ("2006-03-02 03:00:00", "c")]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ingest([Source("events", path)], tmp_path / "h", progress=False)
    stored = EventStore(tmp_path / "h").scan().collect().sort("ts")
    ids = stored.get_column("session_id").to_list()
    assert ids[0] == ids[1] != ids[2]
    assert len(EventStore(tmp_path / "h").days()) == 2


def test_the_sessions_query_gives_the_ids_ingestion_stored(aol_slice: Path, tmp_path: Path) -> None:
    """The one SQL definition engines run over a whole span (``sessions_sql``; Spark runs it in tests/engines) cuts
    the sessions ingestion cut day by day, with the same ids — midnight crossings and same-second ties included."""
    from xc_core.logs.sessions import sessions_sql

    ingest([Source("aol", aol_slice)], tmp_path / "h", progress=False)
    stored = EventStore(tmp_path / "h").scan().select("event_id", "user_id", "ts", "session_id").collect()
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.register("events", stored.to_arrow())
        recut = con.sql(sessions_sql("events", 30, "duckdb")).pl()
    both = stored.join(recut, on="event_id", suffix="_sql")
    assert both.height == stored.height and stored.get_column("session_id").n_unique() > 100
    assert (both.get_column("session_id") == both.get_column("session_id_sql")).all()
    # the comparison can fail: a shorter gap cuts other sessions
    with duckdb.connect() as con:
        con.register("events", stored.to_arrow())
        shorter = con.sql(sessions_sql("events", 5, "duckdb")).pl().get_column("session_id").n_unique()
    assert shorter > stored.get_column("session_id").n_unique()


def test_late_events_merge_into_existing_days_and_resessionise(tmp_path: Path) -> None:
    base = {"user_id": "u", "market": "MC-1"}
    first = tmp_path / "first.jsonl"
    first.write_text("".join(json.dumps({**base, "ts": t, "query_text": q}) + "\n"
                             for t, q in [("2006-03-01 10:00:00", "a"), ("2006-03-01 10:50:00", "c")]))
    late = tmp_path / "late.jsonl"
    late.write_text(json.dumps({**base, "ts": "2006-03-01 10:25:00", "query_text": "b"}) + "\n")
    home = tmp_path / "h"
    ingest([Source("events", first)], home, progress=False)
    assert EventStore(home).scan().collect().get_column("session_id").n_unique() == 2
    ingest([Source("events", late)], home, progress=False)
    stored = EventStore(home).scan().collect()
    assert stored.height == 3 and stored.get_column("session_id").n_unique() == 1  # b bridges the gap


def test_a_crash_before_rename_leaves_the_previous_file_readable(tmp_path: Path) -> None:
    target = tmp_path / "day=2006-03-01" / "events.parquet"
    atomic_write_parquet(pl.DataFrame({"x": [1, 2]}), target)

    class Boom(pl.DataFrame):
        def write_parquet(self, file, *args, **kwargs):
            Path(file).write_bytes(b"PAR1 half written")
            raise OSError("disk full")

    try:
        atomic_write_parquet(Boom({"x": [3]}), target)
    except OSError:
        pass
    assert pl.read_parquet(target).get_column("x").to_list() == [1, 2]
    assert [p.name for p in target.parent.iterdir()] == ["events.parquet"]  # no temp file left behind


def test_events_outside_the_window_are_counted_not_stored(aol_slice: Path, tmp_path: Path) -> None:
    start = datetime(2006, 4, 1, tzinfo=UTC)
    summary = ingest([Source("aol", aol_slice)], tmp_path, window=(start, start + timedelta(days=1)), progress=False)
    assert summary.accepted + summary.rejected + summary.outside_window == summary.read
    assert EventStore(tmp_path).days() in ([], [start.date()])
    assert summary.outside_window > 0
