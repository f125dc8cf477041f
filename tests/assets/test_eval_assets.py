"""Index → offline evaluation → report through Dagster, with the report attached to the MLflow runs."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import mlflow

from xc_assets.defs.family import family
from xc_assets.defs.resources import XcHome

SYNTHETIC = family("synthetic", events=True)


def test_methods_are_indexed_evaluated_and_reported(tiny_home: Path, tmp_path: Path) -> None:
    from xc_core.stages.results import share_data

    # a home of its own on the session's data lineage: the report lists every method evaluated in its home, and
    # the session's home holds whatever the tests that ran before on this worker trained there
    home = tmp_path / "home"
    share_data(tiny_home, home)
    resources = {"xc_home": XcHome(home=str(home))}
    profile = {"config": {"profile": "tiny"}}
    with dg.instance_for_test() as instance:
        for method in ("pretrained", "ramen"):
            result = dg.materialize(
                [SYNTHETIC.encoder, SYNTHETIC.label_index, SYNTHETIC.offline_eval], instance=instance,
                partition_key=method, resources=resources,
                run_config={"ops": {"synthetic__encoder": {"config": {"profile": "tiny", "epochs": 1}},
                                    "synthetic__label_index": profile, "synthetic__offline_eval": profile}})
            assert result.success
            evals = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()
                     if e.step_materialization_data.materialization.asset_key.path[-1] == "offline_eval"]
            meta = evals[0].metadata
            assert 0.0 <= meta["P@1"].value <= 1.0 and meta["hnsw_recall@10"].value >= 0.9
        report = dg.materialize([SYNTHETIC.eval_report], instance=instance, resources=resources,
                                run_config={"ops": {"synthetic__eval_report": profile}})
    assert report.success
    meta = report.get_asset_materialization_events()[0].step_materialization_data.materialization.metadata
    methods = meta["methods"].value
    assert Path(str(meta["report"].value)).exists() and isinstance(methods, list)
    assert sorted(methods) == ["pretrained", "ramen"]
    run_id = str(evals[0].metadata["mlflow_run_id"].value)
    from xc_core.tracking.store import tracking_uri

    artifacts = mlflow.MlflowClient(tracking_uri(home)).list_artifacts(run_id, "report")
    assert [a.path for a in artifacts] == ["report/synthetic-tiny.html"]
    # both evaluations carry the same test-split fingerprint, so the promotion gate may pair them
    import json

    from xc_core.paths import eval_dir

    splits = {json.loads((eval_dir(home, "synthetic", m, "tiny") / "metrics.json").read_text())["test_split"]
              for m in ("pretrained", "ramen")}
    assert len(splits) == 1 and len(splits.pop()) == 16
