"""A tiny simulated data set with RWR anchor sets, built once for the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from xc_core.datasets.container import XCDataset


@pytest.fixture(scope="session")
def tiny_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xc_core.datasets.stage import materialize_dataset
    from xc_core.graphs.stage import materialize_anchor_sets
    from xc_core.profiles import get_profile
    from xc_core.simulate.pipeline import simulate_into_store

    home = tmp_path_factory.mktemp("train-home")
    simulate_into_store("tiny", 0, home)
    dataset, _ = materialize_dataset("synthetic", home)
    materialize_anchor_sets(dataset, home, get_profile("tiny"), use_encoder=False)
    return home


@pytest.fixture
def tiny_data(tiny_home: Path) -> XCDataset:
    from xc_core.graphs.stage import anchors_dir

    return XCDataset.load(anchors_dir(tiny_home, "synthetic"))
