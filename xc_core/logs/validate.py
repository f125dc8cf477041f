"""Validation rules shared by every reader: each record gets at most one quarantine reason.

Readers hand over a *records* frame: ``source_file, line_no, raw`` (the original text, kept for the
quarantine), the candidate canonical fields (``ts`` already parsed, null when unparsable, with
``ts_raw`` for the message), ``structural_reason/structural_detail`` for format-specific failures
(wrong field count, bad JSON, bad URL) and ``invalid_utf8``. The first failing rule, in the order
below, names the reason; ``invalid_utf8`` is a flag, not a rejection (the row is kept, decoded with
replacement characters, and also listed in the quarantine with disposition ``kept``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
import polars as pl

from xc_core.logs.config import IngestConfig
from xc_core.logs.schema import INPUT_SCHEMA, Reason

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then


def _rule(condition: pl.Expr, reason: Reason, detail: pl.Expr) -> tuple[pl.Expr, Reason, pl.Expr]:
    return condition, reason, detail


def field_rules(cfg: IngestConfig) -> list[tuple[pl.Expr, Reason, pl.Expr]]:
    """The field checks in priority order: (failing condition, reason, human-readable detail)."""
    query = pl.col("query_text")
    return [
        _rule(pl.col("user_id").is_null() | (pl.col("user_id").str.strip_chars() == "")
              | pl.col("market").is_null(),
              Reason.MISSING_FIELD, pl.lit("user_id and market are required")),
        _rule(pl.col("ts").is_null(), Reason.UNPARSABLE_TIMESTAMP,
              pl.format("timestamp '{}' is not 'YYYY-MM-DD hh:mm:ss' or ISO 8601", pl.col("ts_raw").fill_null(""))),
        _rule((pl.col("ts") < cfg.min_ts) | (pl.col("ts") >= cfg.max_ts), Reason.TIMESTAMP_OUT_OF_RANGE,
              pl.format("{} outside [{}, {})", pl.col("ts"), pl.lit(str(cfg.min_ts)), pl.lit(str(cfg.max_ts)))),
        _rule(query.is_null() | (query.str.strip_chars() == ""), Reason.EMPTY_QUERY, pl.lit("query text is empty")),
        _rule(query.str.len_chars() > cfg.max_query_chars, Reason.QUERY_TOO_LONG,
              pl.format("query has {} characters, limit {}", query.str.len_chars(), pl.lit(cfg.max_query_chars))),
        _rule(~pl.col("market").is_in(list(cfg.known_markets)), Reason.UNKNOWN_MARKET,
              pl.format("market '{}' not in the configured markets", pl.col("market"))),
        _rule(pl.col("position_invalid"), Reason.INVALID_POSITION,
              pl.format("position '{}' is not an integer >= 1", pl.col("position_raw").fill_null(""))),
        _rule(pl.col("clicked") & ~pl.col("impressed"), Reason.CLICK_WITHOUT_IMPRESSION,
              pl.lit("clicked is true but impressed is false")),
    ]


def apply_rules(records: pl.DataFrame, cfg: IngestConfig) -> pl.DataFrame:
    """Add ``reason`` and ``detail`` (null when the record passes) to a records frame."""
    reason: Then | ChainedThen = pl.when(pl.col("structural_reason").is_not_null()).then(pl.col("structural_reason"))
    detail: Then | ChainedThen = pl.when(pl.col("structural_reason").is_not_null()).then(pl.col("structural_detail"))
    for condition, code, message in field_rules(cfg):
        reason = reason.when(condition.fill_null(False)).then(pl.lit(code.value))
        detail = detail.when(condition.fill_null(False)).then(message)
    return records.with_columns(reason=reason.otherwise(None), detail=detail.otherwise(None))


def event_ids(events: pl.DataFrame) -> pl.Series:
    """Deterministic 16-hex-digit ids: md5 of the fields that identify an event (not the source file).

    duckdb's md5 is vectorised and stable across versions, unlike polars' ``hash``.
    """
    key = events.select(  # noqa: F841 - read by name in the SQL below (duckdb's replacement scan)
        key=pl.concat_str(
            [pl.col("user_id"), pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%S%.6f"), pl.col("market"),
             pl.col("query_text"), pl.col("item_id").fill_null(""),
             pl.col("position").cast(pl.String).fill_null("")],
            separator="\x1f",
        )
    )
    relation = duckdb.sql("SELECT substr(md5(key), 1, 16) AS event_id FROM key")
    assert relation is not None  # a SELECT always gives a relation (None is for statements)
    hashed = relation.pl()
    return hashed.get_column("event_id")


def mark_duplicates(events: pl.DataFrame, seen: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Flag rows whose ``event_id`` repeats an earlier row of this ingestion; return the grown ``seen``.

    ``seen`` holds the ids (as UInt64) accepted by earlier batches, so duplicates are found across batch
    boundaries without keeping the rows themselves (8 bytes per event).
    """
    as_int = events.get_column("event_id").str.to_integer(base=16, dtype=pl.UInt64)
    duplicate = ~as_int.is_first_distinct()
    if seen.len():
        duplicate = duplicate | as_int.is_in(seen.implode())
    return duplicate.alias("duplicate"), pl.concat([seen, as_int.filter(~duplicate)])


def no_ids_seen() -> pl.Series:
    return pl.Series("seen", [], dtype=pl.UInt64)


def canonical(events: pl.DataFrame) -> pl.DataFrame:
    """Select the canonical input columns with their schema dtypes (missing optional ones as nulls)."""
    columns = [
        (pl.col(name) if name in events.columns else pl.lit(None)).cast(dtype).alias(name)
        for name, dtype in INPUT_SCHEMA.items()
    ]
    return events.select(columns)
