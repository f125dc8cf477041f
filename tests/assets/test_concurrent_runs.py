"""Two partition-range runs at once on Dagster's multiprocess executor, on one home and one instance:
the event store loses nothing and the graph tables equal a serial rebuild from the final store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from xc_core.datasets.events import event_window
from xc_core.datasets.graph_tables import TABLES, build_graph_tables
from xc_core.datasets.registry import events_config
from xc_core.logs.store import EventStore
from xc_core.paths import graphs_dir

REPO = Path(__file__).resolve().parents[2]


def _events(path: Path, first_day: int, days: int, tag: str) -> Path:
    """Canonical events over ``days`` days: 40 users, sessions of related queries, clicks on shared items."""
    rows = [(f"2006-03-{first_day + d:02d} {h % 20:02d}:{(h * 7) % 60:02d}:00", f"u{h % 40}",
             f"query {(h + d) % 60}", f"k{(h + d) % 25}", h % 3 == 0, f"{tag}{d}-{h}")
            for d in range(days) for h in range(240)]
    frame = pl.DataFrame(rows, schema=["ts", "user_id", "query_text", "item_id", "clicked", "nonce"], orient="row")
    # the nonce makes every row a distinct event (it enters the event id through the item text)
    frame.with_columns(market=pl.lit("MC-1"), position=1, impressed=True,
                       item_text=pl.col("item_id") + " " + pl.col("nonce")).drop("nonce").write_csv(path)
    return path


def _launch(home: Path, dagster_home: Path, path: Path, start: str, end: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    return subprocess.Popen([sys.executable, "-m", "tests.assets.concurrent_job", str(home), str(path), start, end],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_two_partition_runs_at_once_on_the_multiprocess_executor_stay_consistent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, dagster_home = tmp_path / "home", tmp_path / "dagster"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    with dg.DagsterInstance.get():  # the instance exists before the runs, as in any deployment: two processes
        pass                        # creating a fresh sqlite instance at once race in Dagster's own migrations
    a = _events(tmp_path / "a.csv", 1, 12, "a")   # days 1-12
    b = _events(tmp_path / "b.csv", 9, 12, "b")   # days 9-20: days 9-12 written by both runs
    runs = [_launch(home, dagster_home, a, "2006-03-01", "2006-03-12"),
            _launch(home, dagster_home, b, "2006-03-09", "2006-03-20")]
    outputs = [p.communicate(timeout=600)[0] for p in runs]
    assert [p.returncode for p in runs] == [0, 0], "\n".join(o[-3000:] for o in outputs)

    with dg.DagsterInstance.get() as instance:
        records = instance.get_run_records()
        assert len(records) == 2 and all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in records)
        for record in records:  # each step ran in its own worker process
            kinds = {e.dagster_event_type for e in instance.all_logs(record.dagster_run.run_id) if e.is_dagster_event}
            assert dg.DagsterEventType.STEP_WORKER_STARTED in kinds

    store = EventStore(home)
    events = store.scan().collect()
    assert events.height == 2 * 12 * 240 and events.get_column("event_id").is_unique().all()
    assert len(store.days()) == 20

    # The published tables come from one snapshot of the final store: a serial rebuild gives the same rows.
    cfg = events_config("synthetic", home)
    first, split, _ = event_window(store, cfg)
    rebuilt = tmp_path / "rebuilt"
    build_graph_tables(store, rebuilt, first, split, cfg.graph.model_copy(update={"markets": cfg.markets}),
                       register=False)
    published = graphs_dir(home, "synthetic")
    for table in TABLES:
        got, want = pl.read_parquet(published / f"{table}.parquet"), pl.read_parquet(rebuilt / f"{table}.parquet")
        assert want.height > 0
        assert got.sort(got.columns).equals(want.sort(want.columns)), table
    assert not list(published.glob(".*tmp*"))  # no writer debris
