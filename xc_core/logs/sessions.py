"""Sessionisation: per user, a new session after ``gap`` of inactivity; ids are deterministic."""

from __future__ import annotations

from datetime import timedelta

import duckdb
import polars as pl


def assign_sessions(events: pl.DataFrame, gap_minutes: float, context: pl.DataFrame | None = None) -> pl.DataFrame:
    """Return ``events`` with ``session_id`` set.

    ``context`` holds already-sessionised earlier events (``user_id, ts, session_id``) — the store's day
    before — so a session that crosses midnight keeps the id it got when its first day was written.
    A session's id is md5(user_id, start time) unless it continues a context session.
    """
    gap = timedelta(minutes=gap_minutes)
    ctx = (context.select("user_id", "ts", "session_id") if context is not None
           else pl.DataFrame(schema={"user_id": pl.String, "ts": pl.Datetime("us", "UTC"), "session_id": pl.String}))
    work = pl.concat(
        [ctx.with_columns(is_context=pl.lit(True), row=pl.lit(None, dtype=pl.UInt32)),
         events.select("user_id", "ts").with_row_index("row").with_columns(
             is_context=pl.lit(False), session_id=pl.lit(None, dtype=pl.String))],
        how="diagonal",
    ).sort("user_id", "ts", "is_context", "row", descending=[False, False, True, False])
    work = work.with_columns(
        starts=((pl.col("ts") - pl.col("ts").shift(1)).over("user_id") > gap).fill_null(True),
    ).with_columns(group=pl.col("starts").cum_sum())
    groups = work.group_by("group").agg(
        user_id=pl.col("user_id").first(), start=pl.col("ts").min(), inherited=pl.col("session_id").drop_nulls().first()
    )
    key = groups.select(
        "group", "inherited",
        key=pl.concat_str([pl.col("user_id"), pl.col("start").dt.to_string("%Y-%m-%dT%H:%M:%S%.6f")], separator="\x1f"),
    )
    hashed = duckdb.sql("SELECT \"group\", coalesce(inherited, substr(md5(key), 1, 16)) AS sid FROM key").pl()
    ids = (work.filter(~pl.col("is_context")).join(hashed, on="group", how="left").sort("row").get_column("sid"))
    return events.with_columns(session_id=ids)
