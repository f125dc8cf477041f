"""The training stage as the CLI and Dagster both run it: one MLflow run per (data set, method, profile).

The stage owns what every method shares — the model folder, the run and its tags, the record
(``train_summary.json``); the method owns what happens inside the run (``Method.train``): its trainer, its
parameters and metrics, and the MLflow model it logs."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.methods import TrainJob, get_method
from xc_core.methods.base import MetricsCallback
from xc_core.paths import dataset_slug, model_dir
from xc_core.profiles import Profile, get_profile
from xc_core.provenance import code_stamp
from xc_core.tracking.store import ensure_experiment, tracking_uri
from xc_core.training.record import TrainedModel


def train_method(dataset: XCDataset, method_name: str, profile: Profile | str, home: Path, resume: bool = False,
                 progress: bool = False, overrides: dict[str, Any] | None = None,
                 on_metrics: MetricsCallback | None = None) -> dict[str, Any]:
    """Train one method in its own MLflow run and record it; returns the record (``TrainedModel.summary``)."""
    import mlflow

    started = time.perf_counter()
    profile = get_profile(profile) if isinstance(profile, str) else profile
    method = get_method(method_name)
    out = model_dir(home, dataset.name, method.name, profile.name)
    if not resume and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    experiment = ensure_experiment(f"xc-{dataset_slug(dataset.name)}", home)
    stamp = code_stamp()  # taken before training: the sources this run starts from
    tags = {"dataset": dataset.name, "method": method.name, "profile": profile.name, **stamp}
    job = TrainJob(dataset, profile, home, out, resume, progress, overrides or {}, on_metrics)
    with mlflow.start_run(experiment_id=experiment, run_name=f"{dataset.name}/{method.name}/{profile.name}",
                          tags=tags) as run:
        fitted = method.train(job)
    record = {"dataset": dataset.name, "method": method.name, "profile": profile.name,
              "mlflow_run_id": run.info.run_id, "tracking_uri": tracking_uri(home), "model_uri": fitted.model_uri,
              **fitted.summary, **stamp, "seconds": round(time.perf_counter() - started, 2)}
    TrainedModel.save(out, record)
    return record
