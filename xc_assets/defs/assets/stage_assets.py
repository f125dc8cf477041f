"""The assets the stages declare (``xc_core.stages.StageAsset``), built for one data set: a stage that adds an asset
to every data set's family says so where it registers its command, and this is the only Dagster code it gets.

No ``from __future__ import annotations`` here: Dagster reads the config annotation at runtime."""

from pathlib import Path
from typing import Any

import dagster as dg
import pydantic

from xc_assets.defs.assets.model_assets import method_partitions
from xc_assets.defs.constants import prefix
from xc_assets.defs.freshness import stage_code_version
from xc_assets.defs.resources import XcHome
from xc_core.stages import Markdown, StageAsset


def _metadata(found: dict[str, Any]) -> dict[str, Any]:
    """A stage's metadata in Dagster's terms: markdown and paths shown as such, lists and dicts as JSON."""
    def one(value: Any) -> Any:
        if isinstance(value, Markdown):
            return dg.MetadataValue.md(str(value))
        if isinstance(value, Path):
            return dg.MetadataValue.path(str(value))
        if isinstance(value, (list, dict)):
            return dg.MetadataValue.json(value)
        return value

    return {key: one(value) for key, value in found.items()}


def stage_asset(dataset: str, spec: StageAsset) -> dg.AssetsDefinition:
    """``spec`` as ``<data set>/<name>``: its options as run config, one partition per method if it says so."""
    p = prefix(dataset)
    fields: dict[str, Any] = ({name: (field.annotation, field) for name, field in spec.options.model_fields.items()}
                              if spec.options is not None else {})
    config_type = pydantic.create_model(f"{p}_{spec.name}_config", __base__=dg.Config, **fields)

    @dg.asset(key=[p, spec.name], deps=[[p, d] for d in spec.deps], group_name=p, description=spec.description,
              partitions_def=method_partitions if spec.per_method else None, kinds=set(spec.kinds) or None,
              code_version=stage_code_version(spec.code_stage) if spec.code_stage else None)
    def asset(context: dg.AssetExecutionContext, config: config_type, xc_home: XcHome) -> dg.MaterializeResult:  # type: ignore[valid-type]
        options = spec.options(**config.model_dump()) if spec.options is not None else None  # type: ignore[attr-defined]
        method = context.partition_key if spec.per_method else None
        return dg.MaterializeResult(metadata=_metadata(spec.materialize(xc_home.path, dataset, method, options)))

    return asset


def declared_assets(dataset: str) -> dict[str, dg.AssetsDefinition]:
    """Every registered command's declared asset for ``dataset``, by asset name."""
    from xc_core.stages import commands

    return {c.asset.name: stage_asset(dataset, c.asset) for c in commands() if c.asset is not None}
