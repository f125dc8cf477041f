"""Dagster's own code versions on xc's assets (issue #44): the UI marks an asset stale when the code it ran changed —
the lineage's assets follow the lineage's code version, a method step's asset follows every method's code version of
its stage — and a materialization recorded under other code is stale by Dagster's own reckoning."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from xc_assets.defs import freshness
from xc_assets.defs.freshness import lineage_code_version, stage_code_version
from xc_core.methods import versions

STAGE_OF = {"encoder": "train", "label_index": "evaluate", "offline_eval": "evaluate", "ab_vs_control": "abtest"}
LINEAGE = ("click_graph", "cosession_queries", "coclick_items", "xc_dataset", "similar_text", "anchor_sets")


def test_each_assets_code_version_is_the_code_its_records_follow() -> None:
    from xc_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    for name, stage in STAGE_OF.items():
        assert graph.get(dg.AssetKey(["synthetic", name])).code_version == stage_code_version(stage), name
    for name in LINEAGE:
        assert graph.get(dg.AssetKey(["synthetic", name])).code_version == lineage_code_version(), name


def test_a_method_step_code_version_moves_with_any_methods_code(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {stage: freshness.stage_code_version.__wrapped__(stage) for stage in ("train", "evaluate")}
    assert before["train"] == stage_code_version("train")
    real = versions.method_code_version
    monkeypatch.setattr(versions, "method_code_version",
                        lambda name, stage: "edited" if name == "ramen" else real(name, stage))
    for stage, version in before.items():
        assert freshness.stage_code_version.__wrapped__(stage) != version, f"{stage}: an edit of ramen moves it"


def test_dagster_calls_a_materialization_of_other_code_stale(tmp_path: Path) -> None:
    """The mechanism the UI shows, on a real instance: a materialization under one code version is fresh for it and
    stale once the definition's version moves (as a code location reload after an edit does)."""
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.loader import LoadingContextForTest

    def asset_at(version: str) -> dg.AssetsDefinition:
        @dg.asset(key=["synthetic", "encoder"], code_version=version)
        def encoder() -> None:
            return None

        return encoder

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        now = asset_at(stage_code_version("train"))
        assert dg.materialize([now], instance=instance).success
        key = dg.AssetKey(["synthetic", "encoder"])

        def status(asset: dg.AssetsDefinition) -> StaleStatus:
            graph = dg.Definitions(assets=[asset]).resolve_asset_graph()
            return CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance)).get_status(key)

        assert status(now) == StaleStatus.FRESH
        assert status(asset_at("edited")) == StaleStatus.STALE
