"""Sessionisation: per user, a new session after ``gap`` of inactivity; ids are deterministic.

A session's id is md5(user_id, start time)[:16]. Earlier, already-sessionised events (the store's day
before) are summarised by each user's last ``ts`` and ``session_id`` (the *tail*): a user's first event
here continues that session when it is within ``gap`` of it, so a session crossing midnight keeps the id
it got when its first day was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from xc_core.logs.validate import TS_KEY_FORMAT, hex16, md5_64, nulls, parse_hex16, session_key

if TYPE_CHECKING:
    from polars._typing import SchemaDict

_TAIL_SCHEMA: SchemaDict = {"user_id": pl.String, "ctx_ts": pl.Datetime("us", "UTC"), "ctx_sid": pl.UInt64}


def last_session_per_user(context: pl.DataFrame | None) -> pl.DataFrame:
    """The tail of sessionised events (``user_id, ts, session_id``, hex or numeric): each user's latest ``ts``
    and its session as a number (rows at a user's latest time share one session)."""
    if context is None or context.is_empty():
        return pl.DataFrame(schema=_TAIL_SCHEMA)
    sid = context.get_column("session_id")
    return (context.select("user_id", ctx_ts="ts").with_columns(
        ctx_sid=parse_hex16(sid) if sid.dtype == pl.String else sid)
            .sort("ctx_ts").unique("user_id", keep="last", maintain_order=False))


_ROW_BITS = 20  # rows of one frame sorted by packed (hash, row) keys: up to 2**20


def _by_user_then_time(events: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame]:
    """(row order grouping each user's rows in time order, ``user_id, ts`` in that order).

    A user's rows must be contiguous and in time order, not users in any particular order: so instead of
    sorting strings, the time-ordered rows are sorted by one packed number per row, the user's hash (its top
    44 bits) then the row's time rank. Should two users share those bits, which the check below sees, the
    strings are sorted instead.
    """
    frame = events.select("user_id", "ts", h=pl.col("user_id").hash())
    if frame.get_column("ts").is_sorted():  # the store's days are: no permutation to time order needed
        by_time = None
        hashes = frame.get_column("h").to_numpy()
    else:
        by_time = frame.select(pl.arg_sort_by("ts", maintain_order=True)).to_series()
        hashes = frame.get_column("h").gather(by_time).to_numpy()
    if frame.height < 1 << _ROW_BITS:
        row_mask = np.uint64((1 << _ROW_BITS) - 1)
        keys = (hashes & ~row_mask) | np.arange(frame.height, dtype=np.uint64)
        in_time = pl.Series(np.sort(keys) & row_mask).cast(pl.get_index_type())
        order = in_time if by_time is None else by_time.gather(in_time)
        work = frame[order].with_columns(h=pl.col("h") // (1 << _ROW_BITS))
        collision = work.select(((pl.col("h") == pl.col("h").shift(1))
                                 & (pl.col("user_id") != pl.col("user_id").shift(1))).any()).item()
        if not collision:
            return order, work.drop("h")
    order = frame.select(pl.arg_sort_by("user_id", "ts", maintain_order=True)).to_series()
    return order, frame[order].drop("h")


@dataclass(frozen=True)
class Sessions:
    """Session ids of some events computed without earlier context, and what continuing one needs."""

    ids: pl.Series  # ``session_id`` per row, in the events' order (UInt64; ``hex16`` spells it)
    first_of: pl.Series  # per row: its user's number (row of ``firsts``) if in that user's first session, else null
    firsts: pl.DataFrame  # per user: ``user_id, first_ts`` (when the user's first session here starts)
    tail: pl.DataFrame  # per user: ``user_id, ctx_ts, ctx_sid`` (the user's last session here), ``user_no``,
    #                     ``in_first`` (that last session is also the first)

    def after(self, tail: pl.DataFrame | None, gap_minutes: float) -> tuple[pl.Series, pl.DataFrame]:
        """(session ids, tail) once the events before these are known by their ``tail``: a user's first
        session here continues the tail's session when it starts within ``gap`` of it, and takes its id."""
        own_tail = self.tail.select("user_id", "ctx_ts", "ctx_sid")
        if tail is None or tail.is_empty():
            return self.ids, own_tail
        gap = timedelta(minutes=gap_minutes)
        # only a first session that starts within the gap of the tail's end can continue it (for a day and
        # the day before: the users active around midnight), so the join sees few rows
        latest = tail.select(pl.col("ctx_ts").max()).item()
        earliest = self.firsts.select(pl.col("first_ts").min()).item()
        firsts = self.firsts.with_row_index("user_no").filter(pl.col("first_ts") <= latest + gap)
        near = tail.filter(pl.col("ctx_ts") >= earliest - gap)
        continued = (firsts.join(near, on="user_id", how="inner")
                     .filter(pl.col("first_ts") - pl.col("ctx_ts") <= gap))
        if continued.is_empty():
            return self.ids, own_tail
        # the continued session's id per user number (null for users whose first session starts afresh)
        by_user = nulls("sid", pl.UInt64(), self.firsts.height).scatter(continued.get_column("user_no"),
                                                                           continued.get_column("ctx_sid"))
        ids = pl.select(pl.coalesce(by_user.gather(self.first_of), self.ids)).to_series().alias(self.ids.name)
        patched = self.tail.select("user_id", "ctx_ts", ctx_sid=pl.coalesce(
            pl.when(pl.col("in_first")).then(by_user.gather(self.tail.get_column("user_no"))), pl.col("ctx_sid")))
        return ids, patched


def sessionise(events: pl.DataFrame, gap_minutes: float) -> Sessions:
    """Sessions of ``events`` (``user_id, ts``, any order; an optional ``session_seed`` column from
    :func:`xc_core.logs.validate.event_ids` saves hashing the starts again) as if nothing came before them;
    :meth:`Sessions.after` then links them to the events before."""
    gap = timedelta(minutes=gap_minutes)
    order, work = _by_user_then_time(events)
    work = work.with_columns(first=(pl.col("user_id") != pl.col("user_id").shift(1)).fill_null(True))
    starts = work.select(pl.col("first") | ((pl.col("ts") - pl.col("ts").shift(1)) > gap)).to_series()
    # a start's id is its seed: given by ingestion (``session_seed``) or computed here (rows already stored)
    given = "session_seed" in events.columns
    seeds = events.get_column("session_seed")[order] if given else nulls("seed", pl.UInt64(), work.height)
    missing = starts & seeds.is_null() if given else starts
    if missing.any():
        keys = work.filter(missing).select(session_key(pl.col("user_id"), pl.col("ts").dt.to_string(TS_KEY_FORMAT)))
        seeds = seeds.scatter(missing.arg_true(), md5_64(keys).to_series())
    # every user's first row starts a session, so filling forward never crosses users
    session_no = starts.cum_sum()
    work = work.with_columns(
        sid=pl.when(starts).then(seeds).forward_fill(),
        user_no=(pl.col("first").cum_sum() - 1).cast(pl.UInt32),
        in_first=session_no == pl.when("first").then(session_no).forward_fill(),
    )
    firsts = work.filter("first").select("user_id", first_ts="ts")
    tail = work.filter(pl.col("first").shift(-1).fill_null(True)).select(
        "user_id", "user_no", "in_first", ctx_ts="ts", ctx_sid="sid")
    ids = nulls("session_id", pl.UInt64(), events.height).scatter(order, work.get_column("sid"))
    in_first = work.select(pl.when("in_first").then("user_no")).to_series()
    first_of = nulls("first_of", pl.UInt32(), events.height).scatter(order, in_first)
    return Sessions(ids, first_of, firsts, tail)


def session_ids(events: pl.DataFrame, gap_minutes: float, tail: pl.DataFrame | None = None) -> pl.Series:
    """``session_id`` (16 hex digits) of each row of ``events`` (``user_id, ts``; any order), continuing ``tail``."""
    return hex16(sessionise(events, gap_minutes).after(tail, gap_minutes)[0])


def assign_sessions(events: pl.DataFrame, gap_minutes: float, context: pl.DataFrame | None = None) -> pl.DataFrame:
    """Return ``events`` with ``session_id`` set; ``context``: already-sessionised earlier events
    (``user_id, ts, session_id`` — the store's day before)."""
    return events.with_columns(session_ids(events, gap_minutes, last_session_per_user(context)))


# -- the same sessions as one SQL definition ------------------------------------------------------------
# Ingestion cuts sessions incrementally above (polars, a day at a time, continuing each user's tail). An engine that
# holds a whole span of events at once (Spark, where an ads team's logs live; duckdb) cuts them with this one query:
# per user in time order, a row starts a session when it is the user's first or comes more than the gap after the
# row before; a session's id is the md5 of (user, start time) as :func:`~xc_core.logs.validate.session_key` spells
# it, first 16 hex digits — so both give the store's ids, row for row (tests/engines).

#: the dialect pieces the query needs: microseconds since the epoch, and a timestamp as ``TS_KEY_FORMAT`` spells it
SQL_DIALECTS: dict[str, dict[str, str]] = {
    "duckdb": {"micros": "epoch_us({})", "ts_text": "strftime({}, '%Y-%m-%dT%H:%M:%S.%f')"},
    "spark": {"micros": "unix_micros({})", "ts_text": "date_format({}, \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS\")"},
}


def sessions_sql(table: str, gap_minutes: float, dialect: str) -> str:
    """``event_id, session_id`` of every row of ``table`` (``event_id, user_id, ts``; timestamps in UTC)."""
    micros, ts_text = SQL_DIALECTS[dialect]["micros"], SQL_DIALECTS[dialect]["ts_text"]
    gap_us = round(gap_minutes * 60_000_000)
    return f"""
    WITH ordered AS (
      SELECT event_id, user_id, ts, lag(ts) OVER (PARTITION BY user_id ORDER BY ts) AS prev_ts FROM {table}),
    starts AS (
      SELECT event_id, user_id, ts,
             CASE WHEN prev_ts IS NULL OR {micros.format('ts')} - {micros.format('prev_ts')} > {gap_us} THEN 1 ELSE 0
             END AS is_start,
             CASE WHEN prev_ts IS NULL OR {micros.format('ts')} - {micros.format('prev_ts')} > {gap_us}
                  THEN substr(md5(concat(user_id, chr(31), {ts_text.format('ts')})), 1, 16) END AS seed
      FROM ordered),
    numbered AS (
      SELECT event_id, user_id, seed,
             sum(is_start) OVER (PARTITION BY user_id ORDER BY ts, is_start DESC
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS session_no
      FROM starts)
    SELECT event_id, max(seed) OVER (PARTITION BY user_id, session_no) AS session_id FROM numbered"""


def sessionise_on_spark(spark: Any, events: Any, gap_minutes: float) -> Any:
    """A Spark DataFrame of events (``event_id, user_id, ts``, …) with ``session_id`` cut by :func:`sessions_sql` on
    the given session (``engines.spark.spark_session``) — the ids ingestion gives the store, computed where the
    events are, over a whole span at once (a session crossing midnight is one session, as the store's day-by-day
    cut continues it). pyspark is the optional extra ``scale``."""
    import uuid

    view = f"xc_events_{uuid.uuid4().hex[:8]}"  # a session-scoped name: concurrent callers do not collide
    events.createOrReplaceTempView(view)
    return events.drop("session_id").join(spark.sql(sessions_sql(view, gap_minutes, "spark")), "event_id")
