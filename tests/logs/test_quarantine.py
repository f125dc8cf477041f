"""One bad-input fixture per reason code: the record lands in quarantine with that reason and its raw
text, file and line; everything else is stored; accepted + rejected == read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import write_tgz
from xc_core.logs.errors import IngestError
from xc_core.logs.ingest import IngestSummary, Source, SourceKind, ingest
from xc_core.logs.store import EventStore

GOOD = b"good query\t2006-03-01 10:00:00\nhttp://www.example.com/\n\n"


def _aol(tmp_path: Path, body: bytes) -> tuple[IngestSummary, pl.DataFrame]:
    archive = write_tgz(tmp_path / "in.tgz", {"42.txt": GOOD + body})
    summary = ingest([Source("aol", archive)], tmp_path / "home", progress=False)
    assert summary.accepted + summary.rejected == summary.read
    return summary, EventStore(tmp_path / "home").read_quarantine()


@pytest.mark.parametrize(
    ("body", "reason", "line"),
    [
        (b"three\tfields\t2006-03-01 10:00:00\nhttp://a.com/\n\n", "malformed_line", 4),
        (b"\nhttp://orphan.com/\n\n", "malformed_line", 5),
        (b"bad time\t2006-13-45 99:00:00\nhttp://a.com/\n\n", "unparsable_timestamp", 4),
        (b"old query\t1995-03-01 10:00:00\nhttp://a.com/\n\n", "timestamp_out_of_range", 4),
        (b"   \t2006-03-01 11:00:00\nhttp://a.com/\n\n", "empty_query", 4),
        (b"x" * 600 + b"\t2006-03-01 11:00:00\n\n", "query_too_long", 4),
        (b"fine query\t2006-03-01 12:00:00\nnot a url at all\n\n", "unparsable_url", 5),
        (b"good query\t2006-03-01 10:00:00\nhttp://example.com/other\n\n", "duplicate_event", 5),
    ],
)
def test_aol_bad_record_is_quarantined_with_its_reason(tmp_path: Path, body: bytes, reason: str, line: int) -> None:
    summary, quarantine = _aol(tmp_path, body)
    rejected = quarantine.filter(pl.col("disposition") == "rejected")
    assert reason in summary.reasons
    first = rejected.filter(pl.col("reason") == reason).row(0, named=True)
    assert first["line_no"] == line
    assert first["source_file"].endswith("42.txt")
    assert first["raw"] == body.decode().split("\n")[line - 4]
    assert first["detail"]
    assert EventStore(tmp_path / "home").scan().collect().height >= 1  # the good block is stored


def test_clicks_of_a_rejected_query_are_quarantined_as_parent_rejected(tmp_path: Path) -> None:
    summary, quarantine = _aol(tmp_path, b"bad time\tyesterday\nhttp://a.com/\nhttp://b.com/\n\n")
    assert summary.reasons == {"parent_rejected": 2, "unparsable_timestamp": 1}
    assert quarantine.filter(pl.col("reason") == "parent_rejected").get_column("line_no").to_list() == [5, 6]


def test_invalid_utf8_is_kept_decoded_and_flagged(tmp_path: Path) -> None:
    summary, quarantine = _aol(tmp_path, b"caf\xe9 menu\t2006-03-01 12:00:00\nhttp://cafe.com/\n\n")
    assert summary.rejected == 0 and summary.flagged == {"invalid_utf8": 1}
    flagged = quarantine.filter(pl.col("reason") == "invalid_utf8").row(0, named=True)
    assert flagged["disposition"] == "kept" and flagged["line_no"] == 4
    stored = EventStore(tmp_path / "home").scan().collect()
    assert "caf\ufffd menu" in stored.get_column("query_text").to_list()


def _generic(tmp_path: Path, rows: list[dict[str, object]]) -> tuple[IngestSummary, pl.DataFrame]:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = ingest([Source("events", path)], tmp_path / "home", progress=False)
    assert summary.accepted + summary.rejected == summary.read == len(rows)
    return summary, EventStore(tmp_path / "home").read_quarantine()


BASE = {"ts": "2006-03-01 10:00:00", "user_id": "u1", "market": "MC-1", "query_text": "running shoes",
        "item_id": "k1", "item_text": "running shoes sale", "position": 1, "impressed": True, "clicked": False}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"position": 0}, "invalid_position"),
        ({"position": "second"}, "invalid_position"),
        ({"impressed": False, "clicked": True}, "click_without_impression"),
        ({"user_id": None}, "missing_field"),
        ({"market": " "}, "missing_field"),
        ({"clicked": "maybe"}, "malformed_line"),
        ({"ts": "2041-01-01 00:00:00"}, "timestamp_out_of_range"),
        ({"ts": "not a time"}, "unparsable_timestamp"),
        ({"query_text": ""}, "empty_query"),
    ],
)
def test_generic_bad_row_is_quarantined_with_its_reason(tmp_path: Path, change: dict[str, object], reason: str) -> None:
    summary, quarantine = _generic(tmp_path, [BASE, {**BASE, "item_id": "k2", **change}])
    assert summary.reasons == {reason: 1}
    assert quarantine.row(0, named=True)["line_no"] == 2
    assert json.loads(quarantine.row(0, named=True)["raw"])["item_id"] == "k2"


def test_invalid_utf8_in_csv_is_kept_and_listed_as_kept(tmp_path: Path) -> None:
    path = tmp_path / "events.csv"
    path.write_bytes(b"ts,user_id,market,query_text\n2006-03-01 10:00:00,u1,MC-1,shoes\n"
                     b"2006-03-01 10:05:00,u2,MC-1,caf\xe9 menu\n2006-03-01 10:09:00,u3,MC-1,caf\xc3\xa9\n")
    summary = ingest([Source("events", path)], tmp_path / "home", progress=False)
    assert (summary.accepted, summary.rejected, summary.flagged) == (3, 0, {"invalid_utf8": 1})
    quarantine = EventStore(tmp_path / "home").read_quarantine()
    assert quarantine.select("source_file", "line_no", "reason", "disposition").rows() == [
        (str(path), 3, "invalid_utf8", "kept")]
    assert quarantine.item(0, "raw") == "2006-03-01 10:05:00,u2,MC-1,caf\ufffd menu"
    stored = EventStore(tmp_path / "home").scan().collect().get_column("query_text").to_list()
    assert sorted(stored) == sorted(["caf\ufffd menu", "café", "shoes"])  # valid UTF-8 (line 4) is not flagged


def test_invalid_utf8_in_jsonl_is_kept_and_listed_as_kept(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    bad = json.dumps({**BASE, "item_id": "k2", "query_text": "caf@"}).encode().replace(b"@", b"\xff")
    path.write_bytes(json.dumps(BASE).encode() + b"\n" + bad + b"\n")
    summary = ingest([Source("events", path)], tmp_path / "home", progress=False)
    assert (summary.accepted, summary.rejected, summary.flagged) == (2, 0, {"invalid_utf8": 1})
    row = EventStore(tmp_path / "home").read_quarantine().row(0, named=True)
    assert (row["line_no"], row["reason"], row["disposition"]) == (2, "invalid_utf8", "kept")
    assert row["source_file"] == str(path) and "U+FFFD" in row["detail"]
    stored = EventStore(tmp_path / "home").scan().collect()
    assert stored.filter(pl.col("item_id") == "k2").item(0, "query_text") == "caf\ufffd"


def test_generic_duplicate_row_is_rejected_once(tmp_path: Path) -> None:
    summary, _ = _generic(tmp_path, [BASE, BASE, {**BASE, "item_id": "k2"}])
    assert summary.reasons == {"duplicate_event": 1} and summary.stored == 2


def test_malformed_json_and_csv_rows_are_quarantined(tmp_path: Path) -> None:
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text(json.dumps(BASE) + "\n{not json\n[1, 2]\n")
    summary = ingest([Source("events", jsonl)], tmp_path / "h1", progress=False)
    assert summary.reasons == {"malformed_line": 2} and summary.accepted == 1
    csv = tmp_path / "bad.csv"
    csv.write_text("ts,user_id,market,query_text\n2006-03-01 10:00:00,u1,MC-1,shoes\n2006-03-01,u2\n")
    summary = ingest([Source("events", csv)], tmp_path / "h2", progress=False)
    assert summary.reasons == {"malformed_line": 1} and summary.accepted == 1
    row = EventStore(tmp_path / "h2").read_quarantine().row(0, named=True)
    assert (row["line_no"], row["raw"], row["detail"]) == (3, "2006-03-01,u2", "expected 4 fields, got 2")


@pytest.mark.parametrize(
    ("name", "content", "kind", "message"),
    [
        ("missing.tgz", None, "aol", "file not found"),
        ("plain.tgz", b"this is not gzip", "aol", "not a readable gzip tar archive"),
        ("wrong.parquet", b"PAR1 nope", "events", "not a readable Parquet file"),
        ("cols.csv", b"when,who\n1,2\n", "events", "missing required column(s) ts, user_id, market, query_text"),
        ("events.xlsx", b"", "events", "unknown file type"),
    ],
)
def test_unreadable_file_raises_naming_the_file_and_writes_nothing(
    tmp_path: Path, name: str, content: bytes | None, kind: SourceKind, message: str
) -> None:
    good = write_tgz(tmp_path / "good.tgz", {"1.txt": GOOD})
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    home = tmp_path / "home"
    with pytest.raises(IngestError) as error:
        ingest([Source("aol", good), Source(kind, path)], home, progress=False)
    assert str(path) in str(error.value) and message in str(error.value) and "expected" in str(error.value)
    assert not (home / "events").exists() and not (home / "quarantine").exists()


def test_cli_reports_unreadable_file_and_exits_non_zero(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "xc_core.cli", "ingest", "--source", "aol", str(tmp_path / "no.tgz"),
                           "--home", str(tmp_path / "home"), "--quiet"], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "no.tgz: file not found" in done.stderr and done.stdout == ""
