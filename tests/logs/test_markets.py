"""Accepted markets are configuration: any by default, narrowed by <home>/xc.yaml or `xc ingest --markets`; a
file whose rows are all rejected is reported loudly, and `xc ingest` exits 2 when nothing at all was accepted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xc_core.logs.config import IngestConfig, load_ingest_config
from xc_core.logs.errors import IngestError
from xc_core.logs.ingest import Source, ingest
from xc_core.logs.store import EventStore


def _events(path: Path, market: str, rows: int = 20) -> Path:
    path.write_text("".join(json.dumps({"ts": f"2006-03-01 10:{i:02d}:00", "user_id": f"u{i % 3}", "market": market,
                                        "query_text": f"query {i}"}) + "\n" for i in range(rows)))
    return path


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xc_core.cli", "ingest", "--source", "events", *args,
                           "--home", str(home), "--quiet"], capture_output=True, text=True, check=False)


def test_any_market_is_accepted_by_default(tmp_path: Path) -> None:
    summary = ingest([Source("events", _events(tmp_path / "zh.jsonl", "zh-CN"))], tmp_path / "home", progress=False)
    assert (summary.accepted, summary.rejected, summary.stored) == (20, 0, 20)
    assert IngestConfig().markets is None


def test_home_file_narrows_the_markets_and_the_detail_names_the_market(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "xc.yaml").write_text("ingest:\n  markets: [en-US, MC-1]\n")
    summary = ingest([Source("events", _events(tmp_path / "zh.jsonl", "zh-CN"))], home, progress=False)
    assert summary.reasons == {"unknown_market": 20} and summary.stored == 0
    assert summary.rejected_files == [{"file": str(tmp_path / "zh.jsonl"), "rows": 20,
                                       "reasons": {"unknown_market": 20}, "markets": ["zh-CN"]}]
    detail = EventStore(home).read_quarantine().item(0, "detail")
    assert "'zh-CN'" in detail and "en-US, MC-1" in detail


def test_overrides_beat_the_home_file_which_beats_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "xc.yaml").write_text("ingest:\n  markets: [en-US]\n  max_query_chars: 100\n")
    assert load_ingest_config(tmp_path / "elsewhere") == IngestConfig()
    from_file = load_ingest_config(tmp_path)
    assert (from_file.markets, from_file.max_query_chars) == (("en-US",), 100)
    overridden = load_ingest_config(tmp_path, markets="zh-CN, en-US", max_query_chars=None)
    assert (overridden.markets, overridden.max_query_chars) == (("zh-CN", "en-US"), 100)
    assert load_ingest_config(tmp_path, markets=["*"]).markets is None  # '*' re-opens a narrowed file


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ingest:\n  market: [en-US]\n", "unknown key 'ingest.market'"),
        ("ingest:\n  max_query_chars: -1\n", "bad value -1 for 'ingest.max_query_chars'"),
        ("ingest:\n  markets: ['', en-US]\n", "for 'ingest.markets'"),
        ("ingset:\n  markets: [en-US]\n", "unknown top-level key(s) ingset"),
        ("ingest: [en-US]\n", "'ingest' is a list, not a mapping"),
        ("ingest: {markets: [en-US\n", "not valid YAML"),
    ],
)
def test_a_bad_home_file_is_an_error_naming_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "xc.yaml").write_text(text)
    with pytest.raises(IngestError) as error:
        load_ingest_config(tmp_path)
    assert str(tmp_path / "xc.yaml") in str(error.value) and message in str(error.value)


def test_cli_exits_2_and_says_why_when_every_row_is_rejected(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "xc.yaml").write_text("ingest:\n  markets: [en-US]\n")
    done = _cli(home, str(_events(tmp_path / "zh.jsonl", "zh-CN")))
    assert done.returncode == 2 and done.stdout == ""
    first, second = done.stderr.strip().splitlines()
    assert "all 20 rows of" in first and "zh.jsonl" in first and "unknown_market 20" in first
    assert "--markets zh-CN" in first and f"ingest.markets in {home / 'xc.yaml'}" in first
    assert "nothing accepted" in second
    store = EventStore(home)
    assert store.days() == []  # no event file was written ...
    assert store.read_quarantine().height == 20  # ... and the rejects are recorded, as for any ingestion

    # the flag beats the file (in this process: the subprocess above showed the command's output as a shell sees it)
    from xc_core.cli import main

    capsys.readouterr()
    assert main(["ingest", "--source", "events", str(tmp_path / "zh.jsonl"), "--markets", "zh-CN", "--home",
                 str(home), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["stored"] == 20


def test_cli_warns_about_a_fully_rejected_file_beside_a_good_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _cli(home, str(_events(tmp_path / "zh.jsonl", "zh-CN")), str(_events(tmp_path / "us.jsonl", "en-US")),
                "--markets", "en-US")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stored"] == 20
    assert "all 20 rows of" in done.stderr and "zh.jsonl" in done.stderr and "us.jsonl" not in done.stderr
