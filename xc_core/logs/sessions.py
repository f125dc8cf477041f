"""Sessionisation: per user, a new session after ``gap`` of inactivity; ids are deterministic."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import duckdb
import polars as pl

if TYPE_CHECKING:
    from polars._typing import SchemaDict

_CONTEXT_SCHEMA: SchemaDict = {"user_id": pl.String, "ts": pl.Datetime("us", "UTC"), "session_id": pl.String}


def assign_sessions(events: pl.DataFrame, gap_minutes: float, context: pl.DataFrame | None = None) -> pl.DataFrame:
    """Return ``events`` with ``session_id`` set.

    A session's id is md5(user_id, start time)[:16]. ``context`` holds already-sessionised earlier
    events (``user_id, ts, session_id`` — the store's day before), so a session that crosses midnight
    keeps the id it got when its first day was written: in time order a context row comes first in its
    session, and its id is carried forward onto the new rows.
    """
    ctx = context.select(list(_CONTEXT_SCHEMA)) if context is not None else pl.DataFrame(schema=_CONTEXT_SCHEMA)
    work = pl.concat(
        [ctx.with_columns(row=pl.lit(None, dtype=pl.UInt32)),
         events.select("user_id", "ts").with_row_index("row").with_columns(session_id=pl.lit(None, dtype=pl.String))],
        how="diagonal",
    ).sort("user_id", "ts", "row", nulls_last=False)
    gap = timedelta(minutes=gap_minutes)
    work = work.with_columns(
        starts=(pl.col("user_id") != pl.col("user_id").shift(1)).fill_null(True)
        | ((pl.col("ts") - pl.col("ts").shift(1)) > gap).fill_null(True),
    )
    # ``starts`` is read by name in the SQL below (duckdb's replacement scan)
    starts = work.filter(pl.col("starts") & pl.col("session_id").is_null()).select(  # noqa: F841
        "row", key=pl.concat_str([pl.col("user_id"), pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%S%.6f")],
                                 separator="\x1f"))
    relation = duckdb.sql("SELECT row, substr(md5(key), 1, 16) AS sid FROM starts")
    assert relation is not None  # a SELECT always gives a relation (None is for statements)
    hashed = relation.pl()
    work = work.join(hashed, on="row", how="left", maintain_order="left").with_columns(
        sid=pl.when(pl.col("starts") | pl.col("session_id").is_not_null())
        .then(pl.coalesce("session_id", "sid")).forward_fill()
    )
    ids = work.filter(pl.col("row").is_not_null()).sort("row").get_column("sid")
    return events.with_columns(session_id=ids)
