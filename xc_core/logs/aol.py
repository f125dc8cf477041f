"""Reader for the AOL per-user search-log block format (``../shared/data/aol-1000``).

Each user file is a sequence of blocks separated by a blank line::

    <query text>\\t<YYYY-MM-DD hh:mm:ss>
    <clicked URL>            (zero or more lines)

The archive is streamed member by member (never unpacked to disk). Every non-blank line becomes one
*record*: the query line and each click line. Parsing is vectorised with polars; the result is a
frame of records in the shape :func:`xc_core.logs.validate.validate_records` expects.
"""

from __future__ import annotations

import gzip
import tarfile
import zlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import polars as pl

from xc_core.logs.errors import IngestError
from xc_core.logs.schema import Reason

AOL_MARKET = "en-US"
AOL_TS_FORMAT = "%Y-%m-%d %H:%M:%S"
_EXPECTED = "a gzip tar archive of <user>.txt AOL block files (like user_search_logs.tgz) or one <user>.txt file"
# scheme://[userinfo@]host[:port][/?#...]
_URL_HOST = r"^[A-Za-z][A-Za-z0-9+.\-]*://(?:[^/@\s]*@)?([A-Za-z0-9.\-_]+)(?::\d+)?(?:[/?#]\S*)?$"


def _iter_members(path: Path) -> Iterator[tuple[str, bytes]]:
    """Yield (member name, bytes) of every ``.txt`` user file, streaming the archive."""
    if not path.exists():
        raise IngestError(path, "file not found", _EXPECTED)
    if path.suffix == ".txt":
        yield path.name, path.read_bytes()
        return
    try:
        with tarfile.open(path, mode="r|gz") as archive:
            for member in archive:
                if member.isfile() and member.name.endswith(".txt"):
                    handle = archive.extractfile(member)
                    assert handle is not None  # regular files always have a payload
                    yield member.name, handle.read()
    except (tarfile.ReadError, gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise IngestError(path, f"not a readable gzip tar archive ({exc})", _EXPECTED) from exc


def _decode(data: bytes) -> tuple[str, bool]:
    """UTF-8 text of a member and whether bytes had to be replaced."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True


def read_lines(path: Path) -> pl.DataFrame:
    """All lines of all user files: ``source_file, user_id, line_no, raw, bad_utf8_file``."""
    files: list[str] = []
    users: list[str] = []
    line_nos: list[int] = []
    bad: list[bool] = []
    lines: list[str] = []
    for name, data in _iter_members(path):
        text, replaced = _decode(data)
        member_lines = text.split("\n")
        if member_lines and member_lines[-1] == "":
            member_lines.pop()  # the newline that ends the file is not a line
        n = len(member_lines)
        source = str(path) if path.suffix == ".txt" else f"{path}:{name}"
        files.extend([source] * n)
        users.extend([Path(name).stem] * n)
        bad.extend([replaced] * n)
        line_nos.extend(range(1, n + 1))
        lines.extend(member_lines)
    return pl.DataFrame(
        {"source_file": files, "user_id": users, "line_no": line_nos, "raw": lines, "bad_utf8_file": bad},
        schema={"source_file": pl.String, "user_id": pl.String, "line_no": pl.Int64, "raw": pl.String,
                "bad_utf8_file": pl.Boolean},
    )


@lru_cache(maxsize=1)
def _suffix_list():  # a third-party type
    from publicsuffixlist import PublicSuffixList  # ships the list: no download

    return PublicSuffixList()


def host_text(host: str) -> str:
    """Label text of a host: split on ``.`` and ``-`` with the public suffix dropped.

    ``bank-of-america.com`` → ``bank of america`` (the aol-1000 protocol in ``shared/data/README.md``).
    """
    suffix = _suffix_list().publicsuffix(host) or ""
    stem = host[: -len(suffix) - 1] if suffix and host.endswith("." + suffix) else host
    return " ".join(part for part in stem.replace("-", ".").split(".") if part)


def host_texts(hosts: pl.Series) -> pl.Series:
    """:func:`host_text` of many hosts: only the public-suffix lookup runs per host in Python, the string
    work is vectorised (hosts are ASCII without spaces: they match the URL pattern above)."""
    psl = _suffix_list()
    frame = pl.DataFrame({"host": hosts, "suffix": [psl.publicsuffix(h) or "" for h in hosts.to_list()]},
                         schema={"host": pl.String, "suffix": pl.String})
    host, suffix = pl.col("host"), pl.col("suffix")
    strip = (suffix != "") & host.str.ends_with(pl.lit(".") + suffix)
    stem = pl.when(strip).then(host.str.head(host.str.len_chars() - suffix.str.len_chars() - 1)).otherwise(host)
    return frame.select(stem.str.replace_all(r"[.\-]+", " ").str.strip_chars(" ").alias("item_text")).to_series()


def normalise_host(url_host: pl.Expr) -> pl.Expr:
    """Lower-case, no leading ``www.``: the aol-1000 label id."""
    return url_host.str.to_lowercase().str.strip_chars(".").str.replace(r"^www\.", "")


def parse_aol(lines: pl.DataFrame, max_query_chars: int) -> pl.DataFrame:
    """Turn AOL lines into records with candidate canonical fields and a structural ``reason``.

    Query lines carry ``ts``/``query_text``; click lines carry ``item_id``/``item_text`` and are linked
    to their query line through ``parent`` (row index of the query line). Blank lines are dropped: they
    only separate blocks.
    """
    df = lines.with_columns(pl.col("raw").str.strip_chars_end("\r"))
    df = df.with_columns(
        block=(pl.col("raw").str.strip_chars() == "").cum_sum().over("source_file"),
    ).filter(pl.col("raw").str.strip_chars() != "")
    df = df.with_row_index("record").with_columns(
        is_query=pl.col("raw").str.contains("\t", literal=True),
    )
    df = df.with_columns(
        parent=pl.when(pl.col("is_query")).then(pl.col("record")).forward_fill().over("source_file", "block"),
    )
    fields = pl.col("raw").str.split("\t")
    df = df.with_columns(
        n_fields=fields.list.len(),
        query_text=pl.when(pl.col("is_query")).then(fields.list.first()),
        ts_raw=pl.when(pl.col("is_query")).then(fields.list.get(1, null_on_oob=True).str.strip_chars()),
        url_host=pl.when(~pl.col("is_query")).then(pl.col("raw").str.strip_chars().str.extract(_URL_HOST, 1)),
    )
    df = df.with_columns(
        ts=pl.col("ts_raw").str.strptime(pl.Datetime("us"), AOL_TS_FORMAT, strict=False).dt.replace_time_zone("UTC"),
        item_id=normalise_host(pl.col("url_host")),
    )
    hosts = df.get_column("item_id").drop_nulls().unique()
    texts = pl.DataFrame({"item_id": hosts, "item_text": host_texts(hosts)},
                         schema={"item_id": pl.String, "item_text": pl.String})
    df = df.join(texts, on="item_id", how="left", maintain_order="left")
    structural = (
        pl.when(pl.col("is_query") & (pl.col("n_fields") != 2))
        .then(pl.lit(Reason.MALFORMED_LINE.value))
        .when(~pl.col("is_query") & pl.col("parent").is_null())
        .then(pl.lit(Reason.MALFORMED_LINE.value))
        .when(~pl.col("is_query") & (pl.col("item_id").is_null() | ~pl.col("item_id").str.contains(r"\.")))
        .then(pl.lit(Reason.UNPARSABLE_URL.value))
    )
    detail = (
        pl.when(pl.col("is_query") & (pl.col("n_fields") != 2))
        .then(pl.format("expected 2 tab-separated fields (query, timestamp), got {}", pl.col("n_fields")))
        .when(~pl.col("is_query") & pl.col("parent").is_null())
        .then(pl.lit("click line with no query line before it in its block"))
        .when(~pl.col("is_query") & (pl.col("item_id").is_null() | ~pl.col("item_id").str.contains(r"\.")))
        .then(pl.lit("no http(s) URL with a dotted host"))
    )
    return df.with_columns(
        structural_reason=structural,
        structural_detail=detail,
        invalid_utf8=pl.col("bad_utf8_file") & pl.col("raw").str.contains("\ufffd", literal=True),
        market=pl.lit(AOL_MARKET),
        position=pl.lit(None, dtype=pl.Int32),
        impressed=~pl.col("is_query"),
        clicked=~pl.col("is_query"),
    ).drop("block", "n_fields", "url_host", "bad_utf8_file")
