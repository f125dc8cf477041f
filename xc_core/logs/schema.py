"""The canonical event schema: one row per (query event, shown or clicked item).

Every source (AOL logs, generic files, the simulator) is read into these columns. A query event with
no item (no impression, no click) is one row with ``item_id`` null, so sessions stay whole; a query
event that showed k items is k rows sharing ``ts``, ``user_id`` and ``query_text``.

``event_id`` and ``session_id`` are derived by ingestion and never trusted from the input.
"""

from __future__ import annotations

from enum import StrEnum

import polars as pl

#: Columns a source provides (generic files must carry the required ones).
INPUT_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Datetime("us", "UTC"),
    "user_id": pl.String(),
    "market": pl.String(),
    "query_text": pl.String(),
    "item_id": pl.String(),
    "item_text": pl.String(),
    "position": pl.Int32(),
    "impressed": pl.Boolean(),
    "clicked": pl.Boolean(),
    "brand": pl.String(),
    "location": pl.String(),
    "bid": pl.Float64(),
}
REQUIRED_INPUT_COLUMNS: tuple[str, ...] = ("ts", "user_id", "market", "query_text")

#: Columns of the event store, in order.
EVENT_SCHEMA: dict[str, pl.DataType] = {
    "event_id": pl.String(),
    "ts": pl.Datetime("us", "UTC"),
    "user_id": pl.String(),
    "session_id": pl.String(),
    **{k: v for k, v in INPUT_SCHEMA.items() if k not in ("ts", "user_id")},
}

#: Columns of the quarantine table.
QUARANTINE_SCHEMA: dict[str, pl.DataType] = {
    "source_file": pl.String(),
    "line_no": pl.Int64(),
    "raw": pl.String(),
    "reason": pl.String(),
    "disposition": pl.String(),  # "rejected" (not in the store) or "kept" (stored, but flagged)
    "detail": pl.String(),
    "ingested_at": pl.Datetime("us", "UTC"),
}


class Reason(StrEnum):
    """Why a raw record was quarantined. The value is what the quarantine table stores."""

    MALFORMED_LINE = "malformed_line"  # wrong field count, bad JSON, click line outside a query block
    UNPARSABLE_TIMESTAMP = "unparsable_timestamp"
    TIMESTAMP_OUT_OF_RANGE = "timestamp_out_of_range"
    EMPTY_QUERY = "empty_query"
    QUERY_TOO_LONG = "query_too_long"
    INVALID_UTF8 = "invalid_utf8"  # flagged only: decoded with replacement and kept
    UNPARSABLE_URL = "unparsable_url"
    DUPLICATE_EVENT = "duplicate_event"
    INVALID_POSITION = "invalid_position"
    CLICK_WITHOUT_IMPRESSION = "click_without_impression"
    UNKNOWN_MARKET = "unknown_market"
    MISSING_FIELD = "missing_field"  # a required field (user_id, market) is null
    PARENT_REJECTED = "parent_rejected"  # an AOL click line whose query line was rejected
