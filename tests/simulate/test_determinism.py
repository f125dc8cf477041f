"""The same seed gives the same bytes; another seed gives other data; days stream independently."""

from __future__ import annotations

from pathlib import Path

import pytest

from xc_core.simulate import SimulationSummary, World, scale_config, simulate, write_events


def _bytes(paths: list[Path]) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in paths}


def test_same_seed_gives_byte_identical_event_and_world_files(tiny_run: SimulationSummary, tmp_path: Path) -> None:
    again = simulate("tiny", seed=0, out_dir=tmp_path / "again")
    assert _bytes(again.files) == _bytes(tiny_run.files)
    assert tiny_run.world_dir is not None and again.world_dir is not None
    assert _bytes(sorted(again.world_dir.iterdir())) == _bytes(sorted(tiny_run.world_dir.iterdir()))


def test_another_seed_gives_different_events(tiny_run: SimulationSummary, tmp_path: Path) -> None:
    other = simulate("tiny", seed=1, out_dir=tmp_path / "other")
    assert [p.name for p in other.files] == [p.name for p in tiny_run.files]  # same calendar
    assert all(a.read_bytes() != b.read_bytes() for a, b in zip(other.files, tiny_run.files, strict=True))


def test_a_single_day_written_alone_equals_that_day_of_the_full_run(tiny_run: SimulationSummary,
                                                                      tmp_path: Path) -> None:
    only = write_events(scale_config("tiny", seed=0), tmp_path / "day4", days=[4])
    assert len(only) == 1 and only[0].name == tiny_run.files[4].name
    assert only[0].read_bytes() == tiny_run.files[4].read_bytes()


def test_loaded_world_writes_the_same_events_as_the_built_one(tiny_run: SimulationSummary, tmp_path: Path) -> None:
    assert tiny_run.world_dir is not None
    loaded = World.load(tiny_run.world_dir)
    paths = write_events(loaded, tmp_path / "from_loaded", days=[0, 6])
    assert [p.read_bytes() for p in paths] == [tiny_run.files[0].read_bytes(), tiny_run.files[6].read_bytes()]


def test_days_outside_the_period_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside the simulated period"):
        write_events(scale_config("tiny"), tmp_path, days=[7])
