"""The aol-1000 lineage materializes on a real Dagster instance, and a thin graph blocks downstream."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from xc_assets.defs.family import family
from xc_assets.defs.resources import XcHome
from xc_core.logs.ingest import Source, ingest


@dg.asset(deps=[["aol_1000", "anchor_sets"]])
def downstream_training() -> dg.MaterializeResult:
    """Stands in for the encoder asset in this test: it must only run when the gate passes."""
    return dg.MaterializeResult(metadata={"ran": True})


def _lineage() -> list[dg.AssetsDefinition]:
    return family("aol-1000", events=True).lineage


def _run(home: Path, min_coverage: float) -> dg.ExecuteInProcessResult:
    checks = list(family("aol-1000", events=True).lineage_checks)
    with dg.instance_for_test() as instance:
        return dg.materialize(
            [*_lineage(), *checks, downstream_training],
            instance=instance, resources={"xc_home": XcHome(home=str(home))}, raise_on_error=False,
            run_config={"ops": {"aol_1000_anchor_sets": {"config": {"profile": "tiny", "min_coverage": min_coverage,
                                                                   "use_encoder": False}}}},
        )


def _materializations(result: dg.ExecuteInProcessResult, key: str) -> list[dg.AssetMaterialization]:
    events = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    return [m for m in events if m.asset_key.to_user_string() == key]


@pytest.fixture(scope="module")
def aol_home(aol_slice: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    ingest([Source("aol", aol_slice)], home, progress=False)
    return home


def test_aol_lineage_materializes_with_passing_checks(aol_home: Path) -> None:
    result = _run(aol_home, min_coverage=0.3)
    assert result.success
    evaluations = {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}
    assert {name: e.passed for name, e in evaluations.items() if name != "graph_worth"} == {
        "graph_tables_valid": True, "coverage_gate": True}
    # the graph-worth check advises (WARN) with a verdict per anchor set, whatever it finds
    worth = evaluations["graph_worth"]
    assert worth.severity == dg.AssetCheckSeverity.WARN
    verdicts = worth.metadata["verdicts"].value
    assert isinstance(verdicts, dict) and set(verdicts) == {"cosession_queries", "click_graph", "coclick_items"}
    meta = _materializations(result, "aol_1000/xc_dataset")[0].metadata
    assert meta["leaked_test_nodes"].value == 0 and meta["test_documents"].value > 0
    assert _materializations(result, "downstream_training")


def test_thin_graph_fails_the_coverage_gate_and_downstream_does_not_run(aol_home: Path) -> None:
    result = _run(aol_home, min_coverage=1.0)  # no real graph covers every node: deliberately too thin
    gate = next(e for e in result.get_asset_check_evaluations() if e.asset_check_key.name == "coverage_gate")
    assert not gate.passed
    assert "coverage below threshold" in (gate.description or "")
    assert not _materializations(result, "downstream_training")
    assert _materializations(result, "aol_1000/anchor_sets")  # the asset itself exists: it is the gate that fails
