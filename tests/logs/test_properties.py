"""Property: whatever bytes arrive, nothing raises and accepted + rejected == read."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import write_tgz
from xc_core.logs.ingest import Source, ingest

_pieces = st.sampled_from([
    "shoes\t2006-03-01 10:00:00", "\t", "", "http://www.a.com/", "https://b-c.co.uk/x", "not a url",
    "q\t2006-02-30 10:00:00", "q\tq\tq", "  ", "x" * 700 + "\t2006-03-01 10:00:00", "q\t1999-01-01 00:00:00",
    "\ufffd", "-\t2006-05-01 00:00:00",
])
_line = st.one_of(_pieces, st.text(max_size=40))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_line, max_size=30), garbage=st.binary(max_size=60))
def test_garbage_lines_are_all_accounted_for(lines: list[str], garbage: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        body = "\n".join(lines).encode("utf-8", errors="surrogatepass") + b"\n" + garbage
        archive = write_tgz(Path(tmp) / "g.tgz", {"9.txt": body})
        summary = ingest([Source("aol", archive)], Path(tmp) / "home", progress=False)
        assert summary.accepted + summary.rejected == summary.read
        assert summary.read == summary.query_events + summary.clicks
        assert sum(summary.reasons.values()) == summary.rejected
