"""The training stage as the CLI and Dagster both run it: one MLflow run per (data set, method, profile)."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.datasets.registry import dataset_slug
from xc_core.profiles import Profile, encoder_config, get_profile, train_settings
from xc_core.tracking.store import ensure_experiment, git_commit, tracking_uri
from xc_core.training.config import TrainConfig

log = logging.getLogger(__name__)


def model_dir(home: Path, dataset: str, method: str, profile: str) -> Path:
    return home / "models" / dataset_slug(dataset) / f"{method}-{profile}"


class MlflowSink:
    """Forwards the trainer's metrics to the active MLflow run (and to an optional callback)."""

    def __init__(self, callback: Any = None) -> None:
        self.callback = callback

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        import mlflow

        clean = {k.replace("@", "_at_"): float(v) for k, v in metrics.items()}
        mlflow.log_metrics(clean, step=step)
        if self.callback is not None:
            self.callback(metrics, step)


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, inner in value.items() for k, v in _flat(f"{prefix}{key}.", inner).items()}
    return {prefix.rstrip("."): value}


def _curves(history: list[dict[str, float]], trajectory: list[dict[str, Any]], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    epochs = [h["epoch"] for h in history]
    axes[0].plot(epochs, [h["task_loss"] for h in history], marker="o")
    axes[0].set(title="task loss (last batch of epoch)", xlabel="epoch")
    recall_key = next((k for k in (history[0] if history else {}) if k.startswith("val_recall")), None)
    if recall_key:
        axes[1].plot(epochs, [h[recall_key] for h in history], marker="o", color="tab:green")
    axes[1].set(title=f"validation {recall_key or 'recall'}", xlabel="epoch")
    for name in (trajectory[0].get("lambda", {}) if trajectory else {}):
        axes[2].plot([t["iteration"] for t in trajectory], [t["lambda"][name] for t in trajectory], label=name)
    axes[2].set(title="bandit λ", xlabel="step")
    if trajectory:
        axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def train_config(method: Any, profile: Profile, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Profile (one recipe for every data set) → caller's overrides → the method's own switches, in that order."""
    return method.configure(train_settings(profile).model_copy(update=overrides or {}))


def train_method(dataset: XCDataset, method_name: str, profile: Profile | str, home: Path, resume: bool = False,
                 progress: bool = False, overrides: dict[str, Any] | None = None,
                 on_metrics: Any = None) -> dict[str, Any]:
    """Train (or, for ``pretrained``, just package) an encoder; log everything to one MLflow run."""
    import mlflow

    from xc_core.methods import get_method
    from xc_core.training.trainer import Trainer

    started = time.perf_counter()
    profile = get_profile(profile) if isinstance(profile, str) else profile
    method = get_method(method_name)
    cfg = train_config(method, profile, overrides)
    enc_cfg = encoder_config(profile, home).model_copy(update=method.encoder_overrides)
    out = model_dir(home, dataset.name, method.name, profile.name)
    if not resume and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    data = method.prepare(dataset, cfg)
    experiment = ensure_experiment(f"xc-{dataset_slug(dataset.name)}", home)
    tags = {"dataset": dataset.name, "method": method.name, "profile": profile.name, "git_commit": git_commit()}
    with mlflow.start_run(experiment_id=experiment, run_name=f"{dataset.name}/{method.name}/{profile.name}",
                          tags=tags) as run:
        mlflow.log_params({k: str(v)[:500] for k, v in {
            **_flat("train.", cfg.model_dump()), **_flat("encoder.", enc_cfg.model_dump()),
            "method": method.name, "method.train": method.train}.items()})
        trainer = Trainer(data, enc_cfg, cfg, out, sink=MlflowSink(on_metrics), progress=progress,
                          val_truth=dataset.y_train)  # original labels, whatever the method trains on
        if method.train:
            result = trainer.fit(resume=resume)
            encoder_dir, history = result.encoder_dir, result.history
            summary = {"epochs": result.epochs, "steps": result.steps, "final_task_loss": result.final_task_loss,
                       f"val_recall@{cfg.val_k}": result.val_recall, "examples_per_s": round(result.examples_per_s, 2),
                       "selected_epoch": result.selected_epoch, "heldout_anchor_edges": result.heldout_anchor_edges,
                       "history": history}
            mlflow.log_dict({"history": history, "selected_epoch": result.selected_epoch}, "validation_history.json")
            (out / "lambda_trajectory.json").write_text(json.dumps(result.lambda_trajectory))
            (out / "prune_log.json").write_text(json.dumps(result.prune_log))
            mlflow.log_artifact(str(out / "lambda_trajectory.json"))
            mlflow.log_artifact(str(out / "prune_log.json"))
            mlflow.log_artifact(str(_curves(history, result.lambda_trajectory, out / "training_curves.png")))
        else:
            encoder_dir = out / "encoder"
            trainer.encoder.model.save_pretrained(encoder_dir, safe_serialization=True)
            trainer.encoder.tokenizer.save_pretrained(encoder_dir)
            recall = trainer.validation_recall()
            mlflow.log_metric(f"val/recall_at_{cfg.val_k}", recall)
            summary = {"epochs": 0, "steps": 0, "final_task_loss": trainer.validation_task_loss(),
                       f"val_recall@{cfg.val_k}": recall, "examples_per_s": 0.0}
        mlflow.log_metrics({"final_task_loss": float(summary["final_task_loss"]),
                            f"final_val_recall_at_{cfg.val_k}": float(summary[f"val_recall@{cfg.val_k}"])})
        info = _log_model(encoder_dir, enc_cfg.max_length, out)
        run_id = run.info.run_id
    record = {"dataset": dataset.name, "method": method.name, "profile": profile.name, "mlflow_run_id": run_id,
              "tracking_uri": tracking_uri(home), "model_uri": info.model_uri, "encoder_dir": str(encoder_dir),
              "max_length": enc_cfg.max_length, **summary, "val_recall@10": summary.get(f"val_recall@{cfg.val_k}"),
              "seconds": round(time.perf_counter() - started, 2)}
    (out / "train_summary.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    return record


def _log_model(encoder_dir: Path, max_length: int, work_dir: Path) -> Any:
    from xc_core.tracking.pyfunc import log_encoder

    return log_encoder(encoder_dir, max_length, work_dir)
