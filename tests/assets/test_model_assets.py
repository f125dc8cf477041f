"""The encoder asset trains one method per partition on a real Dagster instance and links its MLflow run."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import mlflow

from xc_assets.defs.family import family
from xc_assets.defs.resources import XcHome


def test_encoder_partition_trains_and_records_its_mlflow_run(tiny_home: Path) -> None:
    synthetic = family("synthetic", events=True).encoder
    with dg.instance_for_test() as instance:
        result = dg.materialize([synthetic], instance=instance, partition_key="dual_encoder",
                                resources={"xc_home": XcHome(home=str(tiny_home))},
                                run_config={"ops": {"synthetic__encoder": {"config": {"profile": "tiny",
                                                                                      "epochs": 1}}}})
    assert result.success
    meta = result.get_asset_materialization_events()[0].step_materialization_data.materialization.metadata
    run = mlflow.MlflowClient(str(meta["tracking_uri"].value)).get_run(str(meta["mlflow_run_id"].value))
    assert run.data.tags["method"] == "dual_encoder" and run.data.params["train.epochs"] == "1"
    assert 0.0 <= meta["val_recall@10"].value <= 1.0
