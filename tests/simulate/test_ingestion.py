"""Simulated logs go through the same ingestion path as real logs: clean files pass with zero rejects, and
a deliberately corrupted copy produces exactly the rejects that were planted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from xc_core.logs.config import IngestConfig
from xc_core.logs.ingest import Source, ingest
from xc_core.logs.store import EventStore
from xc_core.simulate.pipeline import current_simulation, simulate_into_store


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    home = tmp_path_factory.mktemp("sim")
    return home, simulate_into_store("tiny", 0, home)


def test_simulated_events_pass_ingestion_with_zero_rejects(simulated: tuple[Path, dict[str, Any]]) -> None:
    home, summary = simulated
    ingested = summary["ingest"]
    assert ingested["rejected"] == 0 and ingested["read"] == summary["events"] == ingested["stored"]
    stored = EventStore(home).scan().collect()
    assert stored.height == summary["events"]
    assert set(stored.get_column("market").unique().to_list()) <= {"MC-1", "MC-2", "MC-3", "MC-4"}
    simulation = current_simulation(home)
    assert simulation is not None and simulation["scale"] == "tiny"


def test_a_corrupted_copy_produces_exactly_the_planted_rejects(simulated: tuple[Path, dict[str, Any]],
                                                               tmp_path: Path) -> None:
    home, _ = simulated
    day = sorted((home / "simulate" / "tiny-seed0" / "events").glob("*.parquet"))[0]
    frame = pl.read_parquet(day).head(200).with_row_index("i")
    shown = frame.filter(pl.col("impressed")).get_column("i").to_list()
    corrupt = frame.with_columns(
        market=pl.when(pl.col("i") == shown[0]).then(pl.lit("MC-9")).otherwise(pl.col("market")),
        position=pl.when(pl.col("i") == shown[1]).then(pl.lit(0, dtype=pl.Int32)).otherwise(pl.col("position")),
        query_text=pl.when(pl.col("i") == shown[2]).then(pl.lit("  ")).otherwise(pl.col("query_text")),
        impressed=pl.when(pl.col("i") == shown[3]).then(False).otherwise(pl.col("impressed")),
        clicked=pl.when(pl.col("i") == shown[3]).then(True).otherwise(pl.col("clicked")),
    ).drop("i")
    corrupt = pl.concat([corrupt, corrupt.slice(shown[4], 1)])  # one exact duplicate row at the end
    path = tmp_path / "corrupt.parquet"
    corrupt.write_parquet(path)
    # the simulator's markets, as a home that only serves them would configure (the default accepts any market)
    simulator_markets = IngestConfig(markets=("MC-1", "MC-2", "MC-3", "MC-4"))
    summary = ingest([Source("events", path)], tmp_path / "home", simulator_markets, progress=False)
    assert summary.reasons == {"unknown_market": 1, "invalid_position": 1, "empty_query": 1,
                               "click_without_impression": 1, "duplicate_event": 1}
    assert summary.accepted + summary.rejected == summary.read == 201


def test_a_second_world_is_refused_in_a_home_that_holds_another(simulated: tuple[Path, dict[str, Any]]) -> None:
    home, _ = simulated
    with pytest.raises(ValueError, match="use another --home"):
        simulate_into_store("tiny", 1, home)


def test_xc_simulate_prints_the_summary_keys(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "xc_core.cli", "simulate", "--scale", "tiny", "--home",
                           str(tmp_path), "--quiet"], capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout)
    assert {"intents", "keywords", "queries", "events", "clicks", "ctr", "tail_keyword_share", "novel_keywords",
            "seconds"} <= set(summary)
    assert summary["tail_keyword_share"] >= 0.75 and summary["ingest"]["rejected"] == 0
