"""A trained method as the training stage leaves it (``train_summary.json`` in ``paths.model_dir``), read only
here: indexing, evaluation, the registry and the benchmarks take this typed record, not the JSON's keys.

The fields are what every method has (an MLflow run and model); what a method keeps of its own (an encoder
folder, a classifier stage, a prior) is in ``summary``, read by that method alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUMMARY = "train_summary.json"


@dataclass(frozen=True)
class TrainedModel:
    dataset: str
    method: str
    profile: str
    model_uri: str  # the MLflow model the method logged (what the registry registers)
    mlflow_run_id: str
    tracking_uri: str
    folder: Path  # the model folder the method trained into
    summary: dict[str, Any]  # everything the training recorded, the method's own entries included

    @classmethod
    def load(cls, folder: Path) -> TrainedModel:
        """The record in a model folder; a clear error naming the command when nothing was trained there."""
        path = folder / SUMMARY
        if not path.exists():
            method, _, profile = folder.name.rpartition("-")
            dataset = folder.parent.name
            raise FileNotFoundError(f"{path}: nothing trained — run `xc train --dataset {dataset} --method "
                                    f"{method} --profile {profile}` first")
        summary = json.loads(path.read_text())
        return cls(dataset=summary["dataset"], method=summary["method"], profile=summary["profile"],
                   model_uri=summary["model_uri"], mlflow_run_id=summary["mlflow_run_id"],
                   tracking_uri=summary["tracking_uri"], folder=folder, summary=summary)

    @classmethod
    def save(cls, folder: Path, summary: dict[str, Any]) -> TrainedModel:
        (folder / SUMMARY).write_text(json.dumps(summary, indent=2, default=str) + "\n")
        return cls.load(folder)

    @classmethod
    def of(cls, home: Path, dataset: str, method: str, profile: str) -> TrainedModel:
        from xc_core.paths import model_dir

        return cls.load(model_dir(home, dataset, method, profile))
