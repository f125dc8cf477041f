"""One tiny simulation per test session (about a second), shared by the simulator tests."""

from __future__ import annotations

import polars as pl
import pytest

from xc_core.simulate import SimulationSummary, World, simulate


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> SimulationSummary:
    return simulate("tiny", seed=0, out_dir=tmp_path_factory.mktemp("sim") / "tiny")


@pytest.fixture(scope="session")
def tiny_world(tiny_run: SimulationSummary) -> World:
    assert tiny_run.world_dir is not None
    return World.load(tiny_run.world_dir)


@pytest.fixture(scope="session")
def tiny_events(tiny_run: SimulationSummary) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in tiny_run.files])
