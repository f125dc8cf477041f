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
import numpy as np
import polars as pl
import pyarrow as pa

from xc_core.logs.config import IngestConfig
from xc_core.logs.schema import INPUT_SCHEMA, Reason

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

#: How ``ts`` is written into the md5 keys of event and session ids (changing it changes every id).
TS_KEY_FORMAT = "%Y-%m-%dT%H:%M:%S%.6f"


def nulls(name: str, dtype: pl.DataType, n: int) -> pl.Series:
    """A column of ``n`` nulls to ``scatter`` values into (a Python list of Nones is slow to build)."""
    return pl.repeat(None, n, dtype=dtype, eager=True).alias(name)


def _rule(condition: pl.Expr, reason: Reason, detail: pl.Expr) -> tuple[pl.Expr, Reason, pl.Expr]:
    return condition, reason, detail


def _blank(column: pl.Expr) -> pl.Expr:
    """Null, empty or only whitespace (the common non-blank case costs no string copy)."""
    return column.is_null() | column.str.contains(r"^\s*$")


def field_rules(cfg: IngestConfig) -> list[tuple[pl.Expr, Reason, pl.Expr]]:
    """The field checks in priority order: (failing condition, reason, human-readable detail)."""
    query = pl.col("query_text")
    rules = [
        _rule(_blank(pl.col("user_id")) | _blank(pl.col("market")),
              Reason.MISSING_FIELD, pl.lit("user_id and market are required (null or blank here)")),
        _rule(pl.col("ts").is_null(), Reason.UNPARSABLE_TIMESTAMP,
              pl.format("timestamp '{}' is not 'YYYY-MM-DD hh:mm:ss' or ISO 8601", pl.col("ts_raw").fill_null(""))),
        _rule((pl.col("ts") < cfg.min_ts) | (pl.col("ts") >= cfg.max_ts), Reason.TIMESTAMP_OUT_OF_RANGE,
              pl.format("{} outside [{}, {})", pl.col("ts"), pl.lit(str(cfg.min_ts)), pl.lit(str(cfg.max_ts)))),
        _rule(_blank(query), Reason.EMPTY_QUERY, pl.lit("query text is empty")),
        # len_bytes bounds len_chars from above: the exact count runs only where the bytes exceed the limit
        _rule((query.str.len_bytes() > cfg.max_query_chars) & (query.str.len_chars() > cfg.max_query_chars),
              Reason.QUERY_TOO_LONG,
              pl.format("query has {} characters, limit {}", query.str.len_chars(), pl.lit(cfg.max_query_chars))),
    ]
    if cfg.markets is not None:  # None: any non-empty market is accepted
        rules.append(_rule(~pl.col("market").is_in(list(cfg.markets)), Reason.UNKNOWN_MARKET,
                           pl.format("market '{}' not in the configured markets ({})", pl.col("market"),
                                     pl.lit(", ".join(cfg.markets)))))
    rules += [
        _rule(pl.col("position_invalid"), Reason.INVALID_POSITION,
              pl.format("position '{}' is not an integer >= 1", pl.col("position_raw").cast(pl.String).fill_null(""))),
        _rule(pl.col("clicked") & ~pl.col("impressed"), Reason.CLICK_WITHOUT_IMPRESSION,
              pl.lit("clicked is true but impressed is false")),
    ]
    return rules


def apply_rules(records: pl.DataFrame, cfg: IngestConfig) -> pl.DataFrame:
    """Add ``reason`` and ``detail`` (null when the record passes) to a records frame.

    The reason is a chain of cheap boolean tests over every row; the human-readable detail (string
    formatting) is built only for the rows that failed, which are usually few.
    """
    rules = field_rules(cfg)
    structural = pl.col("structural_reason").is_not_null()
    reason: Then | ChainedThen = pl.when(structural).then(pl.col("structural_reason"))
    for condition, code, _ in rules:
        reason = reason.when(condition.fill_null(False)).then(pl.lit(code.value))
    records = records.with_columns(reason=reason.otherwise(None))
    failed = records.get_column("reason").is_not_null()
    if not failed.any():
        return records.with_columns(detail=pl.lit(None, dtype=pl.String))
    detail: Then | ChainedThen = pl.when(structural).then(pl.col("structural_detail"))
    for _, code, message in rules:
        detail = detail.when(pl.col("reason") == code.value).then(message)
    details = records.filter(failed).select(detail.otherwise(None).cast(pl.String)).to_series()
    column = nulls("detail", pl.String(), records.height).scatter(failed.arg_true(), details)
    return records.with_columns(column)


# Ids are 64-bit numbers while ingesting (cheap to hash, compare, sort and stage) and 16 lower-case hex
# digits in the store: the first 8 bytes of the md5, big-endian, so both sort the same way.
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_HEX_PAIRS = _HEX[np.arange(256) >> 4].astype(np.uint16) | (_HEX[np.arange(256) & 15].astype(np.uint16) << 8)
_LOW_64 = (1 << 64) - 1


def md5_64(frame: pl.DataFrame) -> pl.DataFrame:
    """The first 8 bytes of the md5 of every (non-null) string column, as UInt64. duckdb's md5 is
    vectorised and stable across versions, unlike polars' ``hash``; ``md5_number`` reads the digest
    little-endian, hence its low 64 bits byte-swapped."""
    columns = ", ".join(f'(md5_number("{name}") & {_LOW_64})::UBIGINT AS "{name}"' for name in frame.columns)
    with duckdb.connect() as con:  # a private connection: ingestion may run in several threads
        con.register("keys", frame.to_arrow())
        numbers = con.sql(f"SELECT {columns} FROM keys").pl()
    if any(numbers.null_count().row(0)):
        raise ValueError(f"md5 of null keys in {', '.join(frame.columns)}: only valid rows are hashed")
    return pl.DataFrame([pl.Series(name, numbers.get_column(name).to_numpy().byteswap(), dtype=pl.UInt64)
                         for name in numbers.columns])


def hex16(ids: pl.Series) -> pl.Series:
    """UInt64 ids as their 16 hex digits (the store's spelling), built with numpy: no per-row formatting."""
    if ids.null_count():
        raise ValueError(f"{ids.name}: {ids.null_count()} null id(s) cannot be spelled in hex")
    digits = _HEX_PAIRS[ids.to_numpy().astype(">u8").view(np.uint8).reshape(-1, 8)].view(np.uint8).reshape(-1)
    offsets = np.arange(0, 16 * (ids.len() + 1), 16, dtype=np.int64)
    array = pa.LargeStringArray.from_buffers(ids.len(), pa.py_buffer(offsets), pa.py_buffer(digits))
    return pl.Series(ids.name, array, dtype=pl.String)


def parse_hex16(ids: pl.Series) -> pl.Series:
    """Stored hex ids as UInt64 (null stays null)."""
    return ids.str.to_integer(base=16, dtype=pl.UInt64)


def session_key(user_id: pl.Expr, ts_text: pl.Expr) -> pl.Expr:
    """The md5 input of the id of a session that starts at this user's event at this time."""
    return pl.concat_str([user_id, ts_text], separator="\x1f")


def event_ids(events: pl.DataFrame) -> pl.DataFrame:
    """As UInt64 (:func:`hex16` gives the stored text): ``event_id``, the md5 of user, time, market, query,
    item and position; and ``session_seed``, the md5 of user and time: the id of the session this event
    starts if it starts one.

    The two keys share their text (the event's key extends the session's), so the time is formatted once
    here, where each row is hashed anyway, and sessionisation later only picks seeds.
    """
    session = session_key(pl.col("user_id"), pl.col("ts").dt.to_string(TS_KEY_FORMAT))
    keys = events.select(session_seed=session).with_columns(
        event_id=pl.concat_str(
            [pl.col("session_seed"), events.get_column("market"), events.get_column("query_text"),
             events.get_column("item_id").fill_null(""), events.get_column("position").cast(pl.String).fill_null("")],
            separator="\x1f",
        )
    )
    return md5_64(keys.select("event_id", "session_seed"))


class SeenIds:
    """The event ids (as UInt64) accepted so far in one ingestion, to find duplicates across batches.

    8 bytes per event in sorted per-batch chunks, plus a 16 MiB bit filter on the ids' top bits: a new
    id is looked up in the chunks only when its filter bit is set, so a 1M-row batch costs a few
    milliseconds however many ids were seen before (instead of rebuilding a hash set of all of them).
    """

    _FILTER_BITS = 27
    _MAX_CHUNKS = 8  # then merge them: lookups stay cheap when an ingestion has many batches

    def __init__(self) -> None:
        self._filter = np.zeros(1 << (self._FILTER_BITS - 6), dtype=np.uint64)
        self._chunks: list[np.ndarray] = []

    def _slots(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        top = ids >> np.uint64(64 - self._FILTER_BITS)
        return (top >> np.uint64(6)).astype(np.intp), np.uint64(1) << (top & np.uint64(63))

    def _seen_before(self, ordered: np.ndarray) -> np.ndarray:
        """Which of these sorted, distinct ids were remembered (sorted: the filter and the chunks are read in
        order, which is several times faster than random access)."""
        word, bit = self._slots(ordered)
        candidates = np.flatnonzero((self._filter[word] & bit) != 0)
        found = np.zeros(len(ordered), dtype=bool)
        if candidates.size:
            wanted = ordered[candidates]
            hit = np.zeros(candidates.size, dtype=bool)
            for chunk in self._chunks:
                pos = np.minimum(np.searchsorted(chunk, wanted), chunk.size - 1)
                hit |= chunk[pos] == wanted
            found[candidates] = hit
        return found

    def add(self, event_id: pl.Series) -> pl.Series:
        """Mark which ids (UInt64) repeat an id seen before (in this batch or an earlier one); remember the rest."""
        ids = event_id.to_numpy()
        ordered = np.sort(ids)
        repeated = ordered[1:] == ordered[:-1]
        if repeated.any():  # rare: the first occurrence in read order is kept
            duplicate = ~pl.Series(ids).is_first_distinct().to_numpy()
            ordered = ordered[np.concatenate([[True], ~repeated])]
        else:
            duplicate = np.zeros(len(ids), dtype=bool)
        before = self._seen_before(ordered)
        if before.any():
            duplicate |= np.isin(ids, ordered[before])
            ordered = ordered[~before]
        if ordered.size:  # now distinct and new
            word, bit = self._slots(ordered)
            np.bitwise_or.at(self._filter, word, bit)
            self._chunks.append(ordered)
        if len(self._chunks) > self._MAX_CHUNKS:
            self._chunks = [np.sort(np.concatenate(self._chunks))]
        return pl.Series("duplicate", duplicate)


def canonical(events: pl.DataFrame) -> pl.DataFrame:
    """Select the canonical input columns with their schema dtypes (missing optional ones as nulls)."""
    columns = [
        (pl.col(name) if name in events.columns else pl.lit(None)).cast(dtype).alias(name)
        for name, dtype in INPUT_SCHEMA.items()
    ]
    return events.select(columns)
