"""Readers for event files already in the canonical schema: Parquet, CSV/TSV and JSON Lines.

Each reader yields *record batches* (see :mod:`xc_core.logs.validate`) of at most ``batch_rows`` rows,
so a 10M-row file never sits in memory as Python objects. Values are coerced to the canonical dtypes
here; a value that cannot be coerced becomes a structural reason instead of an exception.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import polars as pl

from xc_core.logs.errors import IngestError
from xc_core.logs.schema import INPUT_SCHEMA, REQUIRED_INPUT_COLUMNS, Reason

SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_EXPECTED = (f"a canonical event file ({', '.join(SUFFIXES)}) with at least the columns "
             f"{', '.join(REQUIRED_INPUT_COLUMNS)}")
_TS_FORMATS = ("%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.fZ", "%Y-%m-%d %H:%M:%S")
_TRUE = ["true", "1", "t", "yes", "y"]
_FALSE = ["false", "0", "f", "no", "n", ""]


def file_kind(path: Path) -> str:
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise IngestError(path, f"unknown file type '{path.suffix}'", _EXPECTED)
    if not path.exists():
        raise IngestError(path, "file not found", _EXPECTED)
    return kind


def _check_columns(path: Path, columns: list[str]) -> None:
    missing = [c for c in REQUIRED_INPUT_COLUMNS if c not in columns]
    if missing:
        raise IngestError(path, f"missing required column(s) {', '.join(missing)} (found: {', '.join(columns)})",
                          _EXPECTED)


def _parse_ts(column: pl.Expr) -> pl.Expr:
    as_text = column.cast(pl.String).str.strip_chars()
    attempts = [as_text.str.strptime(pl.Datetime("us"), fmt, strict=False) for fmt in _TS_FORMATS]
    with_zone = as_text.str.strptime(pl.Datetime("us", "UTC"), "%Y-%m-%dT%H:%M:%S%.f%z", strict=False)
    return pl.coalesce([*(a.dt.replace_time_zone("UTC") for a in attempts), with_zone])


def _coerce_ts(df: pl.DataFrame) -> pl.DataFrame:
    dtype = df.schema["ts"]
    if isinstance(dtype, pl.Datetime):  # a typed time is null or valid: no text to quote in a message
        ts = pl.col("ts").dt.cast_time_unit("us")
        ts = ts.dt.replace_time_zone("UTC") if dtype.time_zone is None else ts.dt.convert_time_zone("UTC")
        return df.with_columns(ts_raw=pl.lit(None, dtype=pl.String), ts=ts)
    return df.with_columns(ts_raw=pl.col("ts").cast(pl.String), ts=_parse_ts(pl.col("ts")))


def _bool(df: pl.DataFrame, name: str, default: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(parsed value, parse failed) for a boolean column that may arrive typed or as text."""
    if df.schema[name] == pl.Boolean:
        return pl.col(name).fill_null(default), pl.lit(False)
    text = pl.col(name).cast(pl.String).str.strip_chars().str.to_lowercase()
    value = pl.when(text.is_in(_TRUE)).then(True).when(text.is_in(_FALSE)).then(False)
    failed = text.is_not_null() & value.is_null()
    return value.fill_null(default), failed


def _number(df: pl.DataFrame, name: str, dtype: pl.DataType) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(value, value as read, parse failed) for a numeric column typed or as text (the value as read is
    only quoted in the messages of rejected rows, so a typed column is not turned into text here)."""
    if df.schema[name].is_numeric():
        return pl.col(name).cast(dtype, strict=False), pl.col(name), pl.lit(False)
    text = pl.col(name).cast(pl.String).str.strip_chars()
    text = pl.when(text != "").then(text)
    value = text.cast(dtype, strict=False)
    return value, text, text.is_not_null() & value.is_null()


def coerce(df: pl.DataFrame) -> pl.DataFrame:
    """Canonical dtypes plus ``ts_raw``, ``position_raw``, ``position_invalid`` and structural reasons."""
    for name in INPUT_SCHEMA:
        if name not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=INPUT_SCHEMA[name]).alias(name))
    df = _coerce_ts(df)
    strings = [pl.col(c).cast(pl.String) for c in ("user_id", "market", "query_text", "item_id", "item_text",
                                                     "brand", "location") if df.schema[c] != pl.String]
    df = df.with_columns(strings)
    impressed, impressed_bad = _bool(df, "impressed", pl.col("item_id").is_not_null())
    clicked, clicked_bad = _bool(df, "clicked", pl.lit(False))
    bid, _, bid_bad = _number(df, "bid", pl.Float64())
    position, position_raw, position_bad = _number(df, "position", pl.Int64())
    return df.with_columns(
        structural_reason=pl.when(impressed_bad | clicked_bad | bid_bad).then(pl.lit(Reason.MALFORMED_LINE.value)),
        structural_detail=pl.when(impressed_bad).then(pl.lit("impressed is not a boolean"))
        .when(clicked_bad).then(pl.lit("clicked is not a boolean"))
        .when(bid_bad).then(pl.lit("bid is not a number")),
        impressed=impressed, clicked=clicked, bid=bid,
        position_raw=position_raw,
        position_invalid=position_bad | (position < 1).fill_null(False),
        position=pl.when(position >= 1).then(position).cast(pl.Int32),
    )


def _records(df: pl.DataFrame, path: Path, first_line: int, raw: list[str] | None = None,
             invalid_utf8: list[bool] | None = None) -> pl.DataFrame:
    return coerce(df).with_columns(
        source_file=pl.lit(str(path)),
        line_no=pl.int_range(first_line, first_line + df.height, dtype=pl.Int64),
        invalid_utf8=pl.Series(invalid_utf8, dtype=pl.Boolean) if invalid_utf8 is not None else pl.lit(False),
        raw=pl.Series(raw, dtype=pl.String) if raw is not None else pl.lit(None, dtype=pl.String),
    )


def _decode(lines: list[bytes]) -> tuple[list[str], list[bool]]:
    """Each line as text (bytes that are not UTF-8 become U+FFFD) and whether that happened."""
    text: list[str] = []
    replaced: list[bool] = []
    for line in lines:
        try:
            text.append(line.decode("utf-8"))
            replaced.append(False)
        except UnicodeDecodeError:
            text.append(line.decode("utf-8", errors="replace"))
            replaced.append(True)
    return text, replaced


def _iter_parquet(path: Path, batch_rows: int) -> Iterator[pl.DataFrame]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a non-parquet file
        raise IngestError(path, f"not a readable Parquet file ({exc})", _EXPECTED) from exc
    _check_columns(path, parquet.schema_arrow.names)
    wanted = [c for c in parquet.schema_arrow.names if c in INPUT_SCHEMA]
    metadata = parquet.metadata
    largest_group = max((metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)), default=0)
    if largest_group > 4 * batch_rows:  # polars would decode a huge row group once per slice: stream it
        batches: Iterator[pl.DataFrame] = (
            _from_arrow(b) for b in parquet.iter_batches(batch_size=batch_rows, columns=wanted))
    else:  # polars' reader is several times faster than pyarrow's batch iterator
        scan = pl.scan_parquet(path).select(wanted)
        batches = (scan.slice(start, batch_rows).collect() for start in range(0, metadata.num_rows, batch_rows))
    line = 1
    while True:
        try:
            df = next(batches, None)
        except (pl.exceptions.PolarsError, OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise IngestError(path, f"rows from {line} on cannot be read ({exc})", _EXPECTED) from exc
        if df is None:
            return
        yield _records(df, path, line)
        line += df.height


def _from_arrow(batch: object) -> pl.DataFrame:
    df = pl.from_arrow(batch)
    assert isinstance(df, pl.DataFrame)  # a record batch converts to a frame
    return df


def _iter_delimited(path: Path, delimiter: str, batch_rows: int) -> Iterator[pl.DataFrame]:
    with open(path, "rb") as handle:  # bytes: each line's UTF-8 is checked, so a bad line can be flagged
        header_line = handle.readline().decode("utf-8", errors="replace")
        header = next(csv.reader([header_line], delimiter=delimiter), [])
        _check_columns(path, [h.strip() for h in header])
        line_no = 2
        while chunk := list(islice(handle, batch_rows)):
            lines, replaced = _decode(chunk)
            yield _delimited_batch(path, header, lines, delimiter, line_no, replaced)
            line_no += len(chunk)


def _delimited_batch(path: Path, header: list[str], lines: list[str], delimiter: str, first: int,
                     replaced: list[bool]) -> pl.DataFrame:
    names = [h.strip() for h in header]
    rows = list(csv.reader(io.StringIO("".join(lines)), delimiter=delimiter))
    if len(rows) != len(lines):  # quoted newlines: fall back to one line per record
        rows = [next(csv.reader([line], delimiter=delimiter), []) for line in lines]
    ok = [len(r) == len(names) for r in rows]
    columns = {n: [r[i] if good else None for r, good in zip(rows, ok, strict=True)] for i, n in enumerate(names)}
    df = pl.DataFrame(columns, schema={n: pl.String for n in names}).select(
        [n for n in names if n in INPUT_SCHEMA])
    for name in ("ts", "user_id", "market", "query_text", "item_id", "item_text", "brand", "location"):
        if name in df.columns:
            df = df.with_columns(pl.when(pl.col(name) != "").then(pl.col(name)).alias(name))
    df = _records(df, path, first, [line.rstrip("\r\n") for line in lines], replaced)
    bad = pl.Series("bad", [not good for good in ok])
    counts = pl.Series("n", [len(r) for r in rows])
    return df.with_columns(
        structural_reason=pl.when(bad).then(pl.lit(Reason.MALFORMED_LINE.value)).otherwise(pl.col("structural_reason")),
        structural_detail=pl.when(bad).then(pl.format("expected {} fields, got {}", pl.lit(len(names)), counts))
        .otherwise(pl.col("structural_detail")),
    )


def _iter_jsonl(path: Path, batch_rows: int) -> Iterator[pl.DataFrame]:
    with open(path, "rb") as handle:  # bytes: each line's UTF-8 is checked, so a bad line can be flagged
        line_no = 1
        while chunk := list(islice(handle, batch_rows)):
            lines, replaced = _decode(chunk)
            yield _jsonl_batch(path, lines, line_no, replaced)
            line_no += len(chunk)


def _jsonl_batch(path: Path, lines: list[str], first: int, replaced: list[bool]) -> pl.DataFrame:
    parsed: list[dict[str, object]] = []
    problems: list[str | None] = []
    for line in lines:
        try:
            value = json.loads(line)
            problem = None if isinstance(value, dict) else "line is JSON but not an object"
        except json.JSONDecodeError as exc:
            value, problem = {}, f"invalid JSON ({exc.msg})"
        parsed.append({k: (None if v is None else str(v)) for k, v in value.items() if k in INPUT_SCHEMA}
                      if problem is None else {})
        problems.append(problem)
    df = pl.DataFrame(parsed, schema={n: pl.String for n in INPUT_SCHEMA}) if parsed else pl.DataFrame()
    df = _records(df, path, first, [line.rstrip("\r\n") for line in lines], replaced)
    problem_column = pl.Series("problem", problems, dtype=pl.String)
    return df.with_columns(
        structural_reason=pl.when(problem_column.is_not_null()).then(pl.lit(Reason.MALFORMED_LINE.value))
        .otherwise(pl.col("structural_reason")),
        structural_detail=pl.coalesce(problem_column, pl.col("structural_detail")),
    )


def iter_generic(path: Path, batch_rows: int) -> Iterator[pl.DataFrame]:
    """Record batches of one canonical event file, whatever its format."""
    kind = file_kind(path)
    if kind == "parquet":
        yield from _iter_parquet(path, batch_rows)
    elif kind == "jsonl":
        yield from _iter_jsonl(path, batch_rows)
    else:
        yield from _iter_delimited(path, "," if kind == "csv" else "\t", batch_rows)
