"""``oak`` and ``oak-oracle``: the two-stage GCN baseline of RAMEN's Tables 1-3 (OAK, Mohan et al. 2024).

Stage one links a query to graph nodes (the anchors of the data set's anchor sets); one GCN layer convolves the
query's embedding with theirs (``model.py``); stage two retrieves labels with the result. The encoder and the
layer train together on train documents with their true neighbours (``train.py``). ``oak`` links test queries by
text (the *predicted* linker: an index over the node table); ``oak-oracle`` gives a test query its true
neighbours (``AnchorSet.test_edges``) where it has any — the upper bound RAMEN's Table 2 reports, never available
to a live query, so both serve ``xc predict`` through the predicted linker. Both train identically (same seed:
the same model), so the report's ``oak-oracle − oak`` is what the linker costs — and ``oak-oracle`` takes an
already trained ``oak`` model of the same home, data set, profile and settings instead of training it again
(:func:`reusable_oak`; its summary says ``reused_model_from: oak``), training only when there is none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.methods.base import (
    Fitted,
    Predictions,
    Requires,
    Roles,
    Scorer,
    Served,
    TrainJob,
    register,
    stage_one_encoder,
    stage_one_of,
    stage_one_record,
)
from xc_core.methods.oak.config import OakConfig
from xc_core.training.record import TrainedModel


@dataclass(frozen=True)
class OakMethod:
    name: str
    description: str
    docs: str = "docs/gnn.md"  # the page that explains it
    oracle: bool = False  # test queries with true neighbours get them instead of the predicted linker's
    needs_anchor_sets: bool = True
    baselines: tuple[str, ...] = ()
    ablation_of: str | None = None
    roles: Roles = Roles()
    cfg: OakConfig = field(default_factory=OakConfig)
    reuses: tuple[str, ...] = ()  # methods whose trained model this one takes instead of training (oak-oracle: oak)

    @property
    def requires(self) -> Requires:
        """The query's linked nodes at inference; the model it reuses and the configured stage I, trained first."""
        stage = (self.cfg.stage_one,) if self.cfg.stage_one else ()
        return Requires(methods=(*self.reuses, *stage), graph_at_inference=True)

    def preflight(self, job: TrainJob) -> None:
        """Refuse a missing stage I, or one whose validation rows differ, before the model folder is emptied."""
        self.stage_one(job, *self.settings(job))

    def stage_one(self, job: TrainJob, cfg: OakConfig, train_cfg: Any) -> TrainedModel | None:
        """The configured stage I's trained model (checked: :func:`stage_one_of`), or None without one."""
        return stage_one_of(job, cfg.stage_one, train_cfg, "OAK") if cfg.stage_one else None

    def train(self, job: TrainJob) -> Fitted:
        import mlflow

        from xc_core.methods.oak.inference import ARTEFACT
        from xc_core.methods.oak.pyfunc import log_oak
        from xc_core.profiles import encoder_config

        if not any(len(a.doc_edges) for a in job.dataset.anchor_sets.values()):
            raise ValueError(f"{self.name} convolves over graph neighbours, but data set '{job.dataset.name}' has no "
                             "anchor set with document edges: materialize anchor sets first (`xc anchors`)")
        cfg, train_cfg = self.settings(job)
        enc_cfg = encoder_config(job.profile, job.home)
        stage = self.stage_one(job, cfg, train_cfg)
        enc_cfg = stage_one_encoder(enc_cfg, stage)  # stage I's folder, its light tower included
        fingerprint = settings_fingerprint(cfg, train_cfg, enc_cfg)
        mlflow.log_params({"method": self.name, "linker": "oracle" if self.oracle else "predicted",
                           **{f"oak.{k}": str(v) for k, v in cfg.model_dump().items()},
                           **{f"train.{k}": str(v)[:250] for k, v in train_cfg.model_dump().items()},
                           **{f"encoder.{k}": str(v)[:250] for k, v in enc_cfg.model_dump().items()}})
        base = reusable_oak(job, fingerprint) if self.oracle else None
        if base is not None:
            encoder_dir, summary = copy_oak(base, job.out)
        else:
            encoder_dir, summary = self._fit(job, cfg, train_cfg, enc_cfg)
        summary = {**summary, "linker": "oracle" if self.oracle else "predicted", "settings": fingerprint,
                   "light_tower": bool(train_cfg.tower), **stage_one_record(stage)}
        for row in summary["history"]:
            mlflow.log_metrics({f"epoch_{k.replace('/', '_').replace('@', '_at_')}": float(v)
                                for k, v in row.items() if k != "epoch"}, step=int(row["epoch"]))
        mlflow.log_metrics({k.replace("@", "_at_"): float(v) for k, v in summary.items()
                            if isinstance(v, int | float) and not isinstance(v, bool) and k != "seed"})
        mlflow.log_dict({"history": summary["history"], "selected_epoch": summary["selected_epoch"]},
                        "validation_history.json")
        info = log_oak(encoder_dir, enc_cfg.max_length, job.out / ARTEFACT, job.out)
        return Fitted(info.model_uri, summary)

    def settings(self, job: TrainJob) -> tuple[OakConfig, Any]:
        """(OakConfig, TrainConfig): the profile's recipe, then the caller's overrides for either."""
        from xc_core.profiles import finetune_settings, train_settings
        from xc_core.training.config import TrainConfig

        own = {k: v for k, v in job.overrides.items() if k in OakConfig.model_fields}
        cfg = OakConfig(**{**self.cfg.model_dump(), "seed": job.profile.seed, **own})
        recipe = train_settings if cfg.stage_one else finetune_settings  # on a stage I: the encoder methods' recipe
        train_cfg = recipe(job.profile).model_copy(
            update={k: v for k, v in job.overrides.items() if k in TrainConfig.model_fields})
        return cfg, train_cfg

    def _fit(self, job: TrainJob, cfg: OakConfig, train_cfg: Any, enc_cfg: Any) -> tuple[Path, dict[str, Any]]:
        """Train (``train.py``), save the OAK artefact beside the encoder; the summary of the run."""
        from xc_core.methods.encoder.training import MlflowSink
        from xc_core.methods.oak.inference import ARTEFACT
        from xc_core.methods.oak.train import train_oak

        training = train_oak(job.dataset, enc_cfg, train_cfg, cfg, job.out, job.progress,
                             MlflowSink(job.on_metrics).log_metrics)
        training.model.save(job.out / ARTEFACT)
        encoder_parameters, own_parameters, epochs = training.encoder_parameters, training.model.parameters, \
            train_cfg.epochs
        return training.encoder_dir, {
            "encoder_dir": str(training.encoder_dir), "max_length": enc_cfg.max_length, "seed": train_cfg.seed,
            "train_seconds": training.seconds, "epochs": epochs, "steps": training.steps,
            "seconds_per_epoch": round(sum(h.get("seconds", 0.0) for h in training.history) / max(epochs, 1), 2),
            "train_documents": training.train_documents, "graph_nodes": len(training.model.node_texts),
            "parameters": encoder_parameters + sum(own_parameters.values()),
            "parameters_encoder": encoder_parameters, "parameters_gcn": own_parameters["gcn"],
            "parameters_node_table": own_parameters["node_table"],
            "loss_before": round(training.loss_before, 4), "loss_after": round(training.loss_after, 4),
            "final_task_loss": round(training.loss_after, 4), **training.selection, "history": training.history}

    def predict(self, dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, reuse: bool = False,
                progress: bool = False) -> Predictions:
        from xc_core.methods.oak.scorer import predict

        return predict(dataset, trained, index_dir, oracle=self.oracle, reuse=reuse, progress=progress)

    def analyse(self, dataset: XCDataset, trained: TrainedModel, predictions: Predictions,
                out: Path) -> dict[str, Any]:
        """The time per query split into encoder / linker + GCN / search, and the oracle's share."""
        from xc_core.methods.oak.scorer import measurements

        return dict(measurements(predictions.index_dir))

    def scorer(self, served: Served) -> Scorer:
        from xc_core.methods.oak.scorer import oak_scorer

        return oak_scorer(self.name, served)


OAK = register(OakMethod(
    "oak", "OAK (two-stage GCN): a query linked to graph nodes by text, one GCN layer over their embeddings, "
           "labels retrieved with the result; encoder and layer trained on true neighbours",
    baselines=("ramen", "dual_encoder"), roles=Roles(results=True)))
OAK_ORACLE = register(OakMethod(
    "oak-oracle", "OAK with the oracle linker: a test query's true graph neighbours where it has any (RAMEN "
                  "Table 2's upper bound; served through the predicted linker)",
    oracle=True, baselines=(OAK.name, "ramen"),
    # trains identically: reuses the oak model trained before it (reusable_oak) rather than training it again
    reuses=(OAK.name,), roles=Roles(results=True)))


def settings_fingerprint(cfg: OakConfig, train_cfg: Any, enc_cfg: Any) -> str:
    """What decides the trained weights (OAK's, the training recipe's and the encoder's settings), hashed: a model
    is reused only under the same fingerprint."""
    import hashlib
    import json

    text = json.dumps({"oak": cfg.model_dump(), "train": train_cfg.model_dump(), "encoder": enc_cfg.model_dump()},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def reusable_oak(job: TrainJob, fingerprint: str) -> dict[str, Any] | None:
    """``oak``'s finished run when ``oak-oracle`` can take its model instead of training the same one again: same
    home, data set and profile, same settings (seed included), trained by oak's current code (the per-method rule)
    and its files still there."""
    import json

    from xc_core.methods.oak.inference import ARTEFACT
    from xc_core.methods.versions import record_outdated
    from xc_core.paths import model_dir
    from xc_core.training.record import SUMMARY

    folder = model_dir(job.home, job.dataset.name, OAK.name, job.profile.name)
    path = folder / SUMMARY
    if not path.exists():
        return None
    base = json.loads(path.read_text())
    usable = (base.get("settings") == fingerprint and Path(base.get("encoder_dir", "")).exists()
              and (folder / ARTEFACT / "gcn.pt").exists() and record_outdated(base, OAK.name, "train") is None)
    return {**base, "folder": str(folder)} if usable else None


def copy_oak(base: dict[str, Any], out: Path) -> tuple[Path, dict[str, Any]]:
    """Copy ``oak``'s encoder and OAK artefact into this run (a later retrain of ``oak`` must not change it); its
    summary, marked as reused (no training time spent here)."""
    import shutil

    import mlflow

    from xc_core.methods.oak.inference import ARTEFACT

    encoder_dir = out / "encoder"
    shutil.copytree(base["encoder_dir"], encoder_dir, dirs_exist_ok=True)
    shutil.copytree(Path(base["folder"]) / ARTEFACT, out / ARTEFACT, dirs_exist_ok=True)
    mlflow.set_tag("model_from_run", base.get("mlflow_run_id", ""))
    drop = ("dataset", "method", "profile", "mlflow_run_id", "tracking_uri", "model_uri", "seconds", "folder")
    summary = {k: v for k, v in base.items() if k not in drop}
    return encoder_dir, {**summary, "encoder_dir": str(encoder_dir), "reused_model_from": OAK.name,
                         "model_from_run": base.get("mlflow_run_id"), "base_train_seconds": base.get("train_seconds"),
                         "train_seconds": 0.0}
