"""How the dual-encoder methods train, inside the run the training stage opened: the encoder (or, for a method
that does not train, the shipped one), then — for a ``-clf`` method — the classifier stage, logged as one
MLflow model (encoder + W + fusion parameters). Moved unchanged from the training stage: same numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xc_core.datasets.container import XCDataset
from xc_core.methods.base import Fitted, TrainJob
from xc_core.methods.encoder import EncoderMethod, base_method_name
from xc_core.paths import model_dir, vectors_dir
from xc_core.plotting import pyplot
from xc_core.profiles import Profile, encoder_config, train_settings
from xc_core.training.config import TrainConfig

if TYPE_CHECKING:
    import numpy as np

    from xc_core.classifier.config import ClassifierConfig
    from xc_core.classifier.folds import Fold
    from xc_core.classifier.stage import FusionGrid


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
    plt = pyplot()

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


def train_config(method: EncoderMethod, profile: Profile, overrides: dict[str, Any] | None = None,
                 dataset: XCDataset | None = None) -> TrainConfig:
    """Profile (one recipe for every data set) → caller's overrides → the method's own switches, in that order;
    with ``dataset``, ``stage_cutoff`` resolved to its day (:func:`with_stage_cutoff`). An override of one of the
    method's switches is ignored here: ``train_method`` refuses it first (``methods.base.check_settings``)."""
    cfg = method.configure(train_settings(profile).model_copy(update=overrides or {}))
    return cfg if dataset is None else with_stage_cutoff(cfg, dataset, profile.classifier)


def stage_cutoff_day(dataset: XCDataset, cfg: TrainConfig, clf_cfg: Any) -> int | None:
    """The first day of the classifier stage's first out-of-fold block of days, as the stage of a ``-clf`` method on
    this encoder cuts them (the same view, settings and seed, no row left unscored); None when the stage folds
    documents (no click days, or a window too short for its blocks)."""
    from xc_core.classifier.folds import out_of_fold
    from xc_core.training.validation import validation_split

    seen = validation_split(dataset, cfg).holdout_view(dataset) if clf_cfg.hold_out_validation else dataset
    c = clf_cfg.model_copy(update={"seed": cfg.seed})
    folds = out_of_fold(seen, c.folds, c.oof_max_rows, c.seed, c.fold_kind, c.temporal_span, None, c.time_blocks,
                        c.oof_min_rows, c.max_time_blocks)
    starts = [f.first_day for f in folds if f.first_day is not None]
    return min(starts) if starts and len(starts) == len(folds) else None


def with_stage_cutoff(cfg: TrainConfig, dataset: XCDataset, clf_cfg: Any) -> TrainConfig:
    """``cfg`` with ``stage_cutoff`` resolved: every document's clicks before the stage's first block are trained on
    (``train_before_day``; ``train_share`` 1), or ``cfg`` itself where the stage folds documents or the day is set.
    Every encoder method resolves it alike, so ``ramen`` and ``dual_encoder`` train on the same clicks and a ``-clf``
    reuses its base's encoder (the settings stamp includes the day)."""
    if not cfg.stage_cutoff or cfg.train_before_day is not None:
        return cfg
    day = stage_cutoff_day(dataset, cfg, clf_cfg)
    return cfg if day is None else cfg.model_copy(update={"train_before_day": day, "train_share": 1.0})


def fit(method: EncoderMethod, job: TrainJob) -> Fitted:
    """Train (or, for ``pretrained``, just package) an encoder, then — for a ``-clf`` method — its classifier
    stage; log everything to the active MLflow run and one MLflow model."""
    import mlflow

    profile, out = job.profile, job.out
    cfg = train_config(method, profile, job.overrides, job.dataset)
    enc_cfg = encoder_config(profile, job.home).model_copy(update=method.encoder_overrides)
    data = method.prepare(job.dataset, cfg)
    stamp = config_stamp(cfg, enc_cfg)
    reused = _reusable_base(job.home, job.dataset.name, method, profile.name, cfg.seed, stamp)
    mlflow.log_params({k: str(v)[:500] for k, v in {
        **_flat("train.", cfg.model_dump()), **_flat("encoder.", enc_cfg.model_dump()),
        "method": method.name, "method.train": method.trains}.items()})
    if reused is not None:
        encoder_dir, summary = _copy_base(reused, out)
    else:
        text_only = _text_only_base(job.home, job.dataset.name, method, profile.name, cfg.seed)
        encoder_dir, summary = _fit_encoder(data, job.dataset, method, enc_cfg, cfg, out, job.resume, job.progress,
                                            job.on_metrics, text_only)
    classifier_dir = None
    if method.classifier:
        from xc_core.classifier.stage import stage_key

        seen, rows, clf_cfg = classifier_stage_inputs(job.dataset, cfg, summary, profile)
        key = stage_key(seen, encoder_dir, enc_cfg.max_length, clf_cfg, rows)
        twin = _same_classifier(job.home, job.dataset.name, method.name, profile.name, cfg.seed, key)
        classifier_dir, clf_summary = _fit_classifier(seen, encoder_dir, enc_cfg.max_length, rows, clf_cfg,
                                                      out, job.progress, twin, vectors_dir(job.home))
        summary.update({**clf_summary, "classifier_key": key,
                        "classifier_holds_out_validation": clf_cfg.hold_out_validation})
    mlflow.log_metrics({"final_task_loss": float(summary["final_task_loss"]),
                        f"final_val_recall_at_{cfg.val_k}": float(summary[f"val_recall@{cfg.val_k}"])})
    info = _log_model(encoder_dir, enc_cfg.max_length, out, classifier_dir)
    return Fitted(info.model_uri, {
        "encoder_dir": str(encoder_dir), "max_length": enc_cfg.max_length, "seed": cfg.seed, "train_config": stamp,
        "classifier_dir": str(classifier_dir) if classifier_dir else None, **summary,
        "val_recall@10": summary.get(f"val_recall@{cfg.val_k}")})


def classifier_stage_inputs(dataset: XCDataset, cfg: TrainConfig, summary: dict[str, Any],
                            profile: Profile) -> tuple[XCDataset, np.ndarray | None, ClassifierConfig]:
    """What a ``-clf`` method's classifier stage is fit on, given its encoder's training record.

    Args:
        dataset: the method's data set.
        cfg: the encoder's training settings (:func:`train_config`).
        summary: the encoder's training record (``train_summary.json``).
        profile: the profile the method runs under.

    Returns:
        (the data set the stage sees: its validation rows held out when the profile says so; the training rows the
        stage never scores, or None; the stage's settings, seeded by the training seed).
    """
    from xc_core.training.selection import fine_tuned_rows
    from xc_core.training.validation import validation_split

    clf_cfg = profile.classifier.model_copy(update={"seed": cfg.seed})
    rows = fine_tuned_rows(dataset, cfg, summary)
    if rows is not None and cfg.train_before_day is not None:
        # the encoder trained on clicks before the stage's first block only: a block's query it trained on is a
        # repeated query, as in the test period, so the stage scores it (nothing is left out)
        rows = rows[:0]
    # the stage never sees what the validation rows are scored on, as the encoder never does: the gate decides on
    # those rows (the promotion split), so a -clf's score there must be out of sample
    seen = validation_split(dataset, cfg).holdout_view(dataset) if clf_cfg.hold_out_validation else dataset
    return seen, rows, clf_cfg


def trained_stage_grids(home: Path, data: XCDataset, method: str, profile_name: str
                        ) -> tuple[XCDataset, list[Fold], list[FusionGrid], ClassifierConfig]:
    """A trained ``-clf`` model's classifier stage rebuilt up to its choice, as the method fit it: (the data set the
    stage saw, its folds, each fold's grid, its settings), for probes that rerun the selection out of fold. The
    training seed is the model's own (``xc train --seed``, in its record): it draws the validation rows and folds."""
    from xc_core.classifier.stage import out_of_fold_grids
    from xc_core.encoders.text import encoder_for
    from xc_core.methods import get_method
    from xc_core.methods.encoder import EncoderMethod
    from xc_core.profiles import get_profile

    found = get_method(method)
    if not isinstance(found, EncoderMethod) or not found.classifier:
        raise ValueError(f"{method}: not a dual-encoder method with a classifier stage (e.g. dual_encoder-clf)")
    model = model_dir(home, data.name, method, profile_name)
    summary = json.loads((model / "train_summary.json").read_text())
    profile = get_profile(profile_name)
    if "seed" in summary:  # as `xc train --seed` set it (stages/train.py)
        profile = profile.model_copy(update={"seed": int(summary["seed"])})
    seen, rows, cfg = classifier_stage_inputs(data, train_config(found, profile, dataset=data), summary, profile)
    encoder = encoder_for(model / "encoder", int(summary.get("max_length", 32)), vectors_dir(home))
    label_vecs, doc_vecs = encoder.encode(seen.label_texts), encoder.encode(seen.train_texts)
    folds, parts, _ = out_of_fold_grids(seen, doc_vecs, label_vecs, cfg, rows)
    return seen, folds, parts, cfg


def _fit_encoder(data: XCDataset, dataset: XCDataset, method: EncoderMethod, enc_cfg: Any, cfg: TrainConfig, out: Path,
                 resume: bool, progress: bool, on_metrics: Any,
                 text_only: dict[str, Any] | None = None) -> tuple[Path, dict[str, Any]]:
    """Train the encoder (or, for a method that does not train, save the shipped one) in the active run."""
    import mlflow

    from xc_core.training.trainer import Trainer

    trainer = Trainer(data, enc_cfg, cfg, out, sink=MlflowSink(on_metrics), progress=progress,
                      val_truth=dataset.y_train)  # original labels, whatever the method trains on
    if not method.trains:
        encoder_dir = out / "encoder"
        trainer.encoder.save(encoder_dir)
        recall = trainer.validation_recall()
        mlflow.log_metric(f"val/recall_at_{cfg.val_k}", recall)
        return encoder_dir, {"epochs": 0, "steps": 0, "final_task_loss": trainer.validation_task_loss(),
                             f"val_recall@{cfg.val_k}": recall, "examples_per_s": 0.0}
    result = trainer.fit(resume=resume)
    history = result.history
    mlflow.log_dict({"history": history, "selected_epoch": result.selected_epoch,
                     "fallback_test": result.fallback_test}, "validation_history.json")
    if result.fallback_test:
        log_fallback_tests({"epoch": result.fallback_test}, "train")
    if result.graph_worth:
        mlflow.log_dict(result.graph_worth, "graph_worth.json")
        mlflow.log_param("graph_worth.muted", ",".join(result.graph_worth["muted"]) or "none")
    (out / "lambda_trajectory.json").write_text(json.dumps(result.lambda_trajectory))
    (out / "prune_log.json").write_text(json.dumps(result.prune_log))
    mlflow.log_artifact(str(out / "lambda_trajectory.json"))
    mlflow.log_artifact(str(out / "prune_log.json"))
    mlflow.log_artifact(str(_curves(history, result.lambda_trajectory, out / "training_curves.png")))
    served = _against_text_only(trainer, method, result.encoder_dir, text_only) if method.text_only else {}
    return result.encoder_dir, {**served,
        "epochs": result.epochs, "steps": result.steps, "final_task_loss": result.final_task_loss,
        f"val_recall@{cfg.val_k}": result.val_recall, "examples_per_s": round(result.examples_per_s, 2),
        "selected_epoch": result.selected_epoch, "heldout_anchor_edges": result.heldout_anchor_edges,
        "graph_worth": result.graph_worth,
        "epoch_fallback_test": result.fallback_test, "history": history}


def _text_only_base(home: Path, dataset: str, method: EncoderMethod, profile: str, seed: int) -> dict[str, Any] | None:
    """The finished run of ``method.text_only`` (``ramen``: ``dual_encoder``) in this home, same data set, profile and
    seed, trained by its current code; None when there is none (the test is then not run, and said so). Its settings
    differ from this method's by the method's own switches, so no settings stamp is compared."""
    if not method.text_only or not method.trains:
        return None
    return _current_run(home, dataset, method.text_only, profile, seed)


def _against_text_only(trainer: Any, method: EncoderMethod, encoder_dir: Path,
                       text_only: dict[str, Any] | None) -> dict[str, Any]:
    """The never-worse rule between the trained encoder and ``method.text_only``'s: when the test does not
    keep this method's encoder, the text-only one is copied in its place and served. Recorded in the summary, MLflow
    and the results page (a fallback test like the epoch's)."""
    import logging

    import mlflow

    other = method.text_only
    if text_only is None:
        note = (f"not tested against {other}: no current {other} run of this seed in this home (train {other} first "
                f"— `xc run` and the results job do)")
        logging.getLogger(__name__).warning("%s: %s", method.name, note)
        mlflow.set_tag("text_only_fallback", note)
        return {"served_encoder": method.name, "text_only_note": note}
    decision = trainer.against_encoder(Path(text_only["encoder_dir"]), other)
    log_fallback_tests({"text_only": decision.as_dict()}, "train")
    if not decision.kept:
        shutil.rmtree(encoder_dir)
        shutil.copytree(text_only["encoder_dir"], encoder_dir)
        mlflow.set_tag("encoder_from_run", text_only["mlflow_run_id"])
    # the served encoder's own epochs when it is the text-only one: the classifier stage must not score the rows that
    # encoder trained on (``fine_tuned_rows``), whatever epoch this method's training had selected
    served = {} if decision.kept else {"served_epochs": text_only.get("epochs"),
                                       "served_selected_epoch": text_only.get("selected_epoch")}
    return {"text_only_fallback_test": decision.as_dict(), "served_encoder": method.name if decision.kept else other,
            **served}


def config_stamp(cfg: TrainConfig, enc_cfg: Any) -> str:
    """A short hash of every training and encoder setting a run used, overrides included (``--set …``): two runs with
    the same stamp, seed and code trained the same encoder."""
    import hashlib

    settings = json.dumps({"train": cfg.model_dump(mode="json"), "encoder": enc_cfg.model_dump(mode="json")},
                          sort_keys=True)
    return hashlib.sha256(settings.encode()).hexdigest()[:12]


def _reusable_base(home: Path, dataset: str, method: EncoderMethod, profile: str, seed: int,
                   stamp: str) -> dict[str, Any] | None:
    """The base method's finished run when a ``-clf`` method can start from its encoder: same data set,
    profile and seed, trained by the base's current code (the per-method rule: ``versions.record_outdated``) with the
    same settings, overrides included (``config_stamp``), so the encoder is the one this method would train."""
    if not method.classifier:
        return None
    return _current_run(home, dataset, base_method_name(method.name), profile, seed, stamp)


def _current_run(home: Path, dataset: str, name: str, profile: str, seed: int,
                 stamp: str | None = None) -> dict[str, Any] | None:
    """Method ``name``'s training record in ``home`` when it is of ``seed``, its encoder is on disk, its code is
    current and (``stamp``) its settings are these; else None."""
    from xc_core.methods.versions import record_outdated

    path = model_dir(home, dataset, name, profile) / "train_summary.json"
    if not path.exists():
        return None
    run = json.loads(path.read_text())
    usable = (run.get("seed") == seed and (stamp is None or run.get("train_config") == stamp)
              and Path(run.get("encoder_dir", "")).exists() and record_outdated(run, name, "train") is None)
    return run if usable else None


def _copy_base(base: dict[str, Any], out: Path) -> tuple[Path, dict[str, Any]]:
    """Copy the base run's encoder into this run (a later retrain of the base must not change it)."""
    import mlflow

    encoder_dir = out / "encoder"
    shutil.copytree(base["encoder_dir"], encoder_dir, dirs_exist_ok=True)
    mlflow.set_tag("encoder_from_run", base["mlflow_run_id"])
    keep = ("epochs", "steps", "final_task_loss", "examples_per_s", "selected_epoch", "epoch_fallback_test",
            "history", "text_only_fallback_test", "served_encoder", "text_only_note", "graph_worth", "served_epochs",
            "served_selected_epoch")
    summary = {k: v for k, v in base.items() if k in keep or k.startswith("val_recall@")}
    return encoder_dir, {**summary, "encoder_from_run": base["mlflow_run_id"]}


def _same_classifier(home: Path, dataset: str, name: str, profile: str, seed: int, key: str) -> dict[str, Any] | None:
    """Another ``-clf`` method's current run in this home whose classifier stage had exactly this stage's inputs
    (``stage_key``): e.g. ``dual_encoder-clf`` for ``ramen-clf`` when RAMEN's encoder fell back to ``dual_encoder``'s.
    None when there is none."""
    from xc_core.methods import get_method
    from xc_core.methods.roles import method_names

    for other in method_names():
        method = get_method(other)
        if other == name or not (isinstance(method, EncoderMethod) and method.classifier):
            continue
        run = _current_run(home, dataset, other, profile, seed)
        if run and run.get("classifier_key") == key and Path(run.get("classifier_dir") or "").is_dir():
            return run
    return None


def _fit_classifier(dataset: XCDataset, encoder_dir: Path, max_length: int, encoder_rows: Any, clf_cfg: Any,
                    out: Path, progress: bool, twin: dict[str, Any] | None = None,
                    vector_cache: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """The classifier stage on the method's encoder (its vectors stored in ``vector_cache``) — or a copy of
    ``twin``'s, a run whose stage had the same inputs (the stage is deterministic in them: its seconds are not spent
    twice); its settings, alpha curve and W's size go to MLflow."""
    import mlflow

    from xc_core.classifier.fusion import LABEL_VECTORS, FusedClassifier
    from xc_core.classifier.stage import fit_classifier_stage

    folder = out / "classifier"
    if twin is not None:
        source = Path(twin["classifier_dir"])
        shutil.copytree(source, folder, dirs_exist_ok=True)
        shutil.copy2(source.parent / LABEL_VECTORS, out / LABEL_VECTORS)
        fused = FusedClassifier.load(folder)
        mlflow.set_tag("classifier_from_run", twin["mlflow_run_id"])
    else:
        fused = fit_classifier_stage(dataset, encoder_dir, max_length, clf_cfg, folder, encoder_rows,
                                     progress=progress, vector_cache=vector_cache)
    mlflow.log_params({f"classifier.{k}": str(v)[:500] for k, v in clf_cfg.model_dump().items()})
    curve = fused.info["alpha_curve"]
    # two validation curves through the chosen point: over alpha (step = 100 alpha) and over the lexical weight
    served = dict(fused.fusion)
    for prefix, fixed, varied in (("val", "lexical_weight", "alpha"), ("val_lexical", "alpha", "lexical_weight")):
        for row in (r for r in curve if r.get(fixed, 0.0) == served[fixed]
                    and r.get("linear_weight", 0.0) == served["linear_weight"]):
            metrics = {k: v for k, v in row.items() if k not in served}
            mlflow.log_metrics({f"classifier/{prefix}_{k.replace('@', '_at_')}": v for k, v in metrics.items()},
                               step=int(round(100 * row.get(varied, 0.0))))
    for row in fused.info["history"]:
        mlflow.log_metric("classifier/loss", row["loss"], step=int(row["epoch"]))
    mlflow.log_metrics({**{f"classifier/{key}": value for key, value in served.items()},
                        "classifier/new_queries_encoder": float(fused.routes_new_queries),
                        "classifier/weights_mb": fused.megabytes,
                        "classifier/train_seconds": fused.info["train_seconds"]})
    tests = fused.info.get("fallback_tests", {})
    log_fallback_tests(tests, "classifier")
    mlflow.log_artifact(str(folder / "fusion.json"))
    return folder, {**served,
                    "new_queries_encoder": fused.routes_new_queries,
                    "classifier_mb": round(fused.megabytes, 2), "classifier_seconds": fused.info["train_seconds"],
                    "alpha_curve": curve, "fallback_tests": tests,
                    **({"classifier_from_run": twin["mlflow_run_id"]} if twin is not None else {})}


def log_fallback_tests(tests: dict[str, dict[str, Any]], prefix: str) -> None:
    """Each fallback test of a stage in the active MLflow run: the held-out gain with its interval and the decision
    as metrics, its one-line reason as a tag (``<prefix>.fallback.<choice>``)."""
    import mlflow

    for name, test in tests.items():
        values = {"kept": float(test["kept"]), **{k: test[k] for k in ("gain", "low", "high")},
                  **{f"detectable_{m.replace('@', '_at_')}": v for m, v in (test.get("detectable") or {}).items()}}
        mlflow.log_metrics({f"{prefix}/fallback_{name}_{k}": float(v) for k, v in values.items()})
        mlflow.set_tag(f"{prefix}.fallback.{name}", str(test["reason"])[:5000])


def _log_model(encoder_dir: Path, max_length: int, work_dir: Path, classifier_dir: Path | None = None) -> Any:
    from xc_core.methods.encoder.pyfunc import log_encoder

    return log_encoder(encoder_dir, max_length, work_dir, classifier_dir)
