"""A trained method as the training stage leaves it (``train_summary.json`` in ``paths.model_dir``), read only
here: indexing, evaluation, the registry and the benchmarks take this typed record, not the JSON's keys."""

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
    model_uri: str  # the MLflow logged model (encoder, and W + fusion for a '-clf' method)
    encoder_dir: Path
    max_length: int
    mlflow_run_id: str
    tracking_uri: str
    classifier_dir: Path | None  # None: an encoder-only method
    summary: dict[str, Any]  # everything else the training recorded (history, selected epoch, losses …)

    @classmethod
    def load(cls, folder: Path) -> TrainedModel:
        """The record in a model folder; a clear error naming the command when nothing was trained there."""
        path = folder / SUMMARY
        if not path.exists():
            method, _, profile = folder.name.rpartition("-")
            dataset = folder.parent.name
            raise FileNotFoundError(f"{path}: no trained encoder — run `xc train --dataset {dataset} --method "
                                    f"{method} --profile {profile}` first")
        summary = json.loads(path.read_text())
        return cls(dataset=summary["dataset"], method=summary["method"], profile=summary["profile"],
                   model_uri=summary["model_uri"], encoder_dir=Path(summary["encoder_dir"]),
                   max_length=int(summary.get("max_length", 32)), mlflow_run_id=summary["mlflow_run_id"],
                   tracking_uri=summary["tracking_uri"],
                   classifier_dir=Path(summary["classifier_dir"]) if summary.get("classifier_dir") else None,
                   summary=summary)

    @classmethod
    def of(cls, home: Path, dataset: str, method: str, profile: str) -> TrainedModel:
        from xc_core.paths import model_dir

        return cls.load(model_dir(home, dataset, method, profile))
