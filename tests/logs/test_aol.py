"""Ingestion of the real AOL block format, checked against counts computed independently here."""

from __future__ import annotations

import tarfile
from pathlib import Path

import polars as pl

from xc_core.logs.aol import host_text
from xc_core.logs.ingest import Source, ingest
from xc_core.logs.store import EventStore


def _independent_counts(archive: Path) -> dict[str, object]:
    """Plain-Python reading of the block format: the test's own oracle, sharing no code with xc."""
    queries = clicks = 0
    pairs: set[tuple[str, str, str, str]] = set()
    users: set[str] = set()
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            user = Path(member.name).stem
            users.add(user)
            text = tar.extractfile(member).read().decode("utf-8", errors="replace")  # type: ignore[union-attr]  # a regular file: extractfile gives its reader
            for block in text.split("\n\n"):
                lines = [line for line in block.split("\n") if line.strip()]
                if not lines:
                    continue
                query, ts = lines[0].split("\t")
                queries += 1
                for url in lines[1:]:
                    clicks += 1
                    host = url.split("://", 1)[1].split("/", 1)[0].lower()
                    host = host[4:] if host.startswith("www.") else host
                    pairs.add((user, ts, query, host))
    return {"queries": queries, "clicks": clicks, "distinct_click_events": len(pairs), "users": len(users)}


def test_real_aol_slice_counts_match_an_independent_reading(aol_slice: Path, tmp_path: Path) -> None:
    expected = _independent_counts(aol_slice)
    summary = ingest([Source("aol", aol_slice)], tmp_path, progress=False)
    assert summary.query_events == expected["queries"]
    assert summary.clicks == expected["clicks"]
    assert summary.read == expected["queries"] + expected["clicks"]
    assert summary.accepted + summary.rejected == summary.read
    stored = EventStore(tmp_path).scan().collect()
    # every query of this sample has a click, so stored rows are the distinct (user, time, query, host)
    assert stored.height == expected["distinct_click_events"] == summary.stored
    assert stored.get_column("user_id").n_unique() == expected["users"]
    assert stored.get_column("event_id").is_unique().all()
    assert stored.filter(pl.col("clicked")).height == stored.height


def test_label_text_drops_public_suffix_and_splits_on_dots_and_dashes() -> None:
    assert host_text("bank-of-america.com") == "bank of america"
    assert host_text("ring.miniature.net") == "ring miniature"
    assert host_text("bbc.co.uk") == "bbc"


def test_clicked_host_is_lowercased_without_www(tmp_path: Path) -> None:
    from tests.conftest import write_tgz

    archive = write_tgz(tmp_path / "a.tgz", {"7.txt": b"my bank\t2006-03-01 10:00:00\nhttp://WWW.Bank-Of-America.com/x?y\n\n"})
    ingest([Source("aol", archive)], tmp_path / "home", progress=False)
    row = EventStore(tmp_path / "home").scan().collect().row(0, named=True)
    assert (row["item_id"], row["item_text"], row["user_id"], row["market"]) == (
        "bank-of-america.com", "bank of america", "7", "en-US")


def test_vectorised_host_texts_match_host_text(aol_slice: Path) -> None:
    from xc_core.logs.aol import host_texts, normalise_host, read_lines

    urls = read_lines(aol_slice).get_column("raw").str.extract(r"://(?:[^/@\s]*@)?([A-Za-z0-9.\-_]+)", 1)
    hosts = pl.select(normalise_host(pl.lit(urls.drop_nulls().unique()))).to_series()
    odd = ["", "com", "co.uk", "x.blogspot.com", "-a-.com", "a..b.com", "under_score.org"]
    hosts = pl.concat([hosts, pl.Series(odd)])
    assert hosts.len() > 100
    assert host_texts(hosts).to_list() == [host_text(h) for h in hosts.to_list()]
