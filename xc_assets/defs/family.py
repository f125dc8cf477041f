"""One data set's asset family: its lineage (graph tables for an event log → xc_dataset → anchor sets, with their
checks), one method's training → index → evaluation → A/B against the control, the report, the promotion gate and
IRENE's streamed keywords — all under the data set's group and key prefix.

The code location (``definitions.py``) builds one family per data set of the home it serves; ``xc run`` builds the
family of the data set it runs, for the home it runs in, so a data set defined in any home runs without editing
code or restarting anything.
"""

from dataclasses import dataclass
from functools import lru_cache

import dagster as dg

from xc_assets.defs.assets import (
    abtest_assets,
    graph_assets,
    model_assets,
    registry_assets,
    results_assets,
    stage_assets,
)
from xc_assets.defs.constants import METHOD_STEPS


@dataclass(frozen=True)
class DatasetFamily:
    name: str
    graph_tables: dg.AssetsDefinition | None  # event logs only
    xc_dataset: dg.AssetsDefinition
    anchor_sets: dg.AssetsDefinition
    lineage_checks: tuple[dg.AssetChecksDefinition, ...]
    encoder: dg.AssetsDefinition
    ab_vs_control: dg.AssetsDefinition
    challenger: dg.AssetsDefinition
    ab_test: dg.AssetsDefinition
    promotion_check: dg.AssetChecksDefinition
    champion: dg.AssetsDefinition
    results: dg.AssetsDefinition  # the data set's tables of the results page
    #: the assets the stages declare where they register their command (``xc_core.stages.StageAsset``), by name
    declared: dict[str, dg.AssetsDefinition]

    @property
    def label_index(self) -> dg.AssetsDefinition:
        return self.declared["label_index"]

    @property
    def offline_eval(self) -> dg.AssetsDefinition:
        return self.declared["offline_eval"]

    @property
    def eval_report(self) -> dg.AssetsDefinition:
        return self.declared["eval_report"]

    @property
    def streamed_keywords(self) -> dg.AssetsDefinition:
        return self.declared["streamed_keywords"]

    @property
    def lineage(self) -> list[dg.AssetsDefinition]:
        return [a for a in (self.graph_tables, self.xc_dataset, self.anchor_sets) if a is not None]

    @property
    def method_steps(self) -> list[dg.AssetsDefinition]:
        """One method (partition): train → index → evaluate → A/B against the control (``METHOD_STEPS``)."""
        return [getattr(self, step) for step in METHOD_STEPS]

    @property
    def promotion(self) -> list[dg.AssetsDefinition | dg.AssetChecksDefinition]:
        """challenger → ab_test (challenger vs champion) with the blocking check beats_champion → champion."""
        return [self.challenger, self.ab_test, self.promotion_check, self.champion]

    @property
    def assets(self) -> list[dg.AssetsDefinition]:
        return [*self.lineage, self.encoder, self.ab_vs_control, self.challenger, self.ab_test, self.champion,
                self.results, *self.declared.values()]

    @property
    def checks(self) -> list[dg.AssetChecksDefinition]:
        return [*self.lineage_checks, self.promotion_check]


@lru_cache(maxsize=64)
def family(dataset: str, events: bool) -> DatasetFamily:
    """The asset family of ``dataset`` (``events``: an event log, whose lineage starts at its graph tables)."""
    checks = (graph_assets._graph_table_check(dataset),) if events else ()
    return DatasetFamily(
        name=dataset,
        graph_tables=graph_assets._graph_tables(dataset) if events else None,
        xc_dataset=graph_assets._xc_dataset(dataset, events),
        anchor_sets=graph_assets._anchor_sets(dataset),
        lineage_checks=(*checks, graph_assets._coverage_check(dataset), graph_assets._graph_worth_check(dataset)),
        encoder=model_assets._encoder(dataset),
        ab_vs_control=abtest_assets._ab_vs_control(dataset),
        challenger=registry_assets._challenger(dataset),
        ab_test=abtest_assets._ab_test(dataset),
        promotion_check=registry_assets._check(dataset),
        champion=registry_assets._champion(dataset),
        results=results_assets._dataset_results(dataset),
        declared=stage_assets.declared_assets(dataset),
    )


def served_families() -> list[DatasetFamily]:
    """One family per data set of the home the code location serves, plus ``xc-repo`` (a folder in run config)."""
    return [family(name, name in graph_assets.EVENT_DATASETS) for name in graph_assets.DATASETS]
