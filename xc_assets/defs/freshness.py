"""What is current, read from the Dagster instance: the results job materializes only what is missing or stale.

Each materialization of a data set's lineage (``anchor_sets``) and of a method partition (``encoder``,
``offline_eval``, ``ab_vs_control``) records where and how it was made (``xc_core.provenance.record_stamp``): the
home, the profile and seed, the code version of what it ran (``xc_core.methods.versions``, per method and stage)
and what it was made from (the lineage's materialization, the model's MLflow run). A record is current when the
latest materialization for that home and profile carries today's code version and the same upstream; a home or
profile never materialized through Dagster is simply missing. Nothing here reads marker files.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from xc_assets.defs.constants import prefix

#: how far back the latest materialization of one home and profile is looked for among a partition's events
LOOKBACK = 200
#: the lineage stages an ``anchor_sets`` materialization ran (its code version covers their imports)
LINEAGE_MODULES = ("xc_core.stages.ingest", "xc_core.stages.simulate", "xc_core.stages.graph_tables",
                   "xc_core.stages.dataset", "xc_core.stages.anchor_sets")
#: modules the lineage imports that change none of its tables: the later stages' settings (the typed profiles hold
#: them) and the validation split the dataset stage only *prints* a share of (``seen_query_text``). Without this
#: stop every edit to the classifier or the trainer rebuilt every home's data sets and anchors (aol-1000: ~25 min).
#: The trainer and the gradient agreement are stops too: the anchor stage's graph-worth check builds a
#: Trainer to measure how each set's regularizer gradient agrees with the task's, which changes no table; a trainer
#: edit leaves the anchor sets current (the check is advice: `xc anchors` again refreshes its agreement column).
LATER_STAGES = ("xc_core.training.config", "xc_core.training.validation", "xc_core.classifier.config",
                "xc_core.training.trainer", "xc_core.training.agreement")


def lineage_code_version() -> str:
    from xc_core.methods.versions import REGISTRY
    from xc_core.provenance import sources_version

    return sources_version(LINEAGE_MODULES, stop=(*REGISTRY, *LATER_STAGES))


@functools.cache
def lineage_asset_version() -> str:
    """Dagster's own ``code_version`` of the lineage's assets (graph tables, data set, anchor sets): the lineage code
    version their records carry, computed once per code location load."""
    return lineage_code_version()


@functools.cache
def stage_code_version(stage: str) -> str:
    """Dagster's own ``code_version`` of the per-method assets of ``stage`` (``train``: encoder; ``evaluate``:
    label_index, offline_eval; ``abtest``: ab_vs_control), so the UI marks them stale when their code changes: every
    registered method's code version of the stage, hashed together — the partitions share one definition, so an
    edit to any method's code of that stage marks the asset's partitions stale in the UI. What the results job
    retrains stays per method (``method_code_version`` in the records), so only the method whose code changed
    trains again."""
    from xc_core.methods import method_names
    from xc_core.methods.versions import method_code_version

    joined = ",".join(f"{name}={method_code_version(name, stage)}" for name in sorted(method_names()))
    return hashlib.sha256(joined.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Found:
    storage_id: int
    metadata: dict[str, Any]

    def stale(self, **expected: Any) -> str | None:
        """Why this record is not current (the first differing field), or None when every field matches."""
        for key, value in expected.items():
            if self.metadata.get(key) != value:
                return f"{key} {self.metadata.get(key)!r}, now {value!r}"
        return None


def latest(instance: dg.DagsterInstance, key: list[str], partition: str | None = None,
           **match: Any) -> Found | None:
    """The newest materialization of ``key`` (``partition``) whose metadata has every ``match`` value."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition] if partition else None),
        limit=LOOKBACK).records
    for record in records:  # newest first
        materialization = record.asset_materialization
        if materialization is None:
            continue
        metadata = {k: v.value for k, v in materialization.metadata.items()}
        if all(metadata.get(k) == v for k, v in match.items()):
            return Found(record.storage_id, metadata)
    return None


def lineage(instance: dg.DagsterInstance, dataset: str, home: Path) -> Found | None:
    """The anchor sets a training in ``home`` reads: the latest ``anchor_sets`` materialization of that folder
    (a seed home links its main home's)."""
    from xc_core.paths import anchors_dir

    return latest(instance, [prefix(dataset), "anchor_sets"], path=str(anchors_dir(home, dataset).resolve()))

