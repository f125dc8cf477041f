"""`xc run` on the engines ads teams run (issue #42): the graph tables on Spark (``XC_GRAPH_ENGINE=spark``,
``local[2]``) and the method partitions on a dask cluster (``--executor dask``, two workers started here) give the
default run's tables, metrics and promotion decisions. Slow (three whole runs): ``make test-scale`` runs it;
``make test`` keeps one Spark test (tests/engines/test_spark.py) and one executor test
(tests/assets/test_dask_executor.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.assets.test_dask_executor import Cluster, cluster  # noqa: F401  # the module's two-worker cluster

pytestmark = pytest.mark.scale
METHODS = "pretrained,ramen"
TABLES = ("click_graph", "cosession_queries", "coclick_items")


def _run(home: Path, *extra: str) -> dict[str, Any]:
    from xc_assets.cli import main

    assert main(["run", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home), "--quiet", "--json",
                 "--methods", METHODS, *extra]) == 0
    return json.loads((home / "last-run.json").read_text())


def _tables(home: Path) -> dict[str, pl.DataFrame]:
    folder = home / "graphs" / "synthetic"
    return {name: pl.read_parquet(folder / f"{name}.parquet").sort(pl.all()) for name in TABLES}


def _outcome(run: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the engine: each method's metrics and each promotion decision."""
    return {"metrics": {m: {k: v for k, v in r.items() if k in ("P@1", "P@5", "PSP@1", "PSP@5", "R@10")}
                        for m, r in run["methods"].items()},
            "promotion": [(d["method"], d["promoted"]) for d in run["promotion"]], "checks": run["checks"]}


def test_xc_run_on_spark_and_on_dask_matches_the_default_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             cluster: Cluster) -> None:  # noqa: F811
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # each run's instance lives under its home
    default = _run(tmp_path / "default")
    with monkeypatch.context() as patch:
        patch.setenv("XC_GRAPH_ENGINE", "spark")
        patch.setenv("XC_SPARK_MASTER", "local[2]")
        spark = _run(tmp_path / "spark")
    dask = _run(tmp_path / "dask", "--executor", "dask", "--dask-address", cluster.address)
    assert default["success"] and spark["success"] and dask["success"]
    reference = _tables(tmp_path / "default")
    for home in ("spark", "dask"):
        assert all(_tables(tmp_path / home)[name].equals(reference[name]) for name in TABLES), home
    assert _outcome(spark) == _outcome(default)
    assert _outcome(dask) == _outcome(default)
