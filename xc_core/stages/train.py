"""``xc train`` and the ``encoder`` asset: one MLflow run per (data set, method, profile).

The stage owns what every method shares — the model folder, the run and its tags, the record
(``train_summary.json``); the method owns what happens inside the run (``Method.train``): its trainer, its
parameters and metrics, and the MLflow model it logs."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xc_core.paths import anchors_dir, dataset_slug, model_dir, resolve_home
from xc_core.profiles import Profile, get_profile, train_settings
from xc_core.provenance import code_stamp
from xc_core.stages import Command, Payload, register
from xc_core.stages.options import add_dataset, add_method, add_profile

if TYPE_CHECKING:
    from xc_core.datasets.container import XCDataset
    from xc_core.methods.base import MetricsCallback


def train_method(dataset: XCDataset, method_name: str, profile: Profile | str, home: Path, resume: bool = False,
                 progress: bool = False, overrides: dict[str, Any] | None = None,
                 on_metrics: MetricsCallback | None = None) -> dict[str, Any]:
    """Train one method in its own MLflow run and record it under the home.

    Args:
        dataset: the data set with its anchor sets (:func:`~xc_core.stages.anchor_sets.load_with_anchors`).
        method_name: a key of the method registry (``xc_core.methods``).
        profile: a profile or its name (``tiny``, ``demo``, ``cpu``, ``full``).
        home: the data root; the model goes to ``<home>/models/<data set>/<method>-<profile>``.
        resume: keep the model folder and go on from its last checkpoint (a fresh run empties it).
        progress: show progress bars.
        overrides: settings over the profile's (a variant's ``TrainConfig`` fields and the method's own).
        on_metrics: handed to the method's training loop, which reports its metrics through it as it goes.

    Returns:
        The training record saved beside the model (``TrainedModel.summary``): the MLflow run and model URIs,
        the validation split's settings, the code stamp, the seconds and what the method itself records.
    """
    import mlflow

    from xc_core.methods import TrainJob, get_method
    from xc_core.methods.base import check_settings
    from xc_core.methods.versions import method_stamp
    from xc_core.tracking.store import ensure_experiment, tracking_uri
    from xc_core.training.record import TrainedModel

    started = time.perf_counter()
    profile = get_profile(profile) if isinstance(profile, str) else profile
    method = get_method(method_name)
    check_settings(method, overrides or {})  # before the model folder is emptied: a refused setting loses nothing
    out = model_dir(home, dataset.name, method.name, profile.name)
    job = TrainJob(dataset, profile, home, out, resume, progress, overrides or {}, on_metrics)
    if (preflight := getattr(method, "preflight", None)) is not None:  # what the method refuses (a stage I), likewise
        preflight(job)
    if not resume:  # a fresh run starts from an empty folder, whatever an earlier one left
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    experiment = ensure_experiment(f"xc-{dataset_slug(dataset.name)}", home)
    # taken before training: the sources this run starts from, the whole package's and the method's own
    stamp = {**code_stamp(), **method_stamp(method.name, "train")}
    tags = {"dataset": dataset.name, "method": method.name, "profile": profile.name, **stamp}
    with mlflow.start_run(experiment_id=experiment, run_name=f"{dataset.name}/{method.name}/{profile.name}",
                          tags=tags) as run:
        fitted = method.train(job)
    record = {"dataset": dataset.name, "method": method.name, "profile": profile.name,
              "mlflow_run_id": run.info.run_id, "tracking_uri": tracking_uri(home), "model_uri": fitted.model_uri,
              "validation_split": _split_settings(profile, overrides or {}),
              **fitted.summary, **stamp, "seconds": round(time.perf_counter() - started, 2)}
    TrainedModel.save(out, record)
    return record


def _split_settings(profile: Profile, overrides: dict[str, Any]) -> dict[str, Any]:
    """The settings that fix the model's validation rows (the profile's, then the caller's overrides), recorded so
    that ``xc eval --split validation`` and IRENE rebuild the rows the model was selected on."""
    from xc_core.training.config import TrainConfig
    from xc_core.training.validation import split_record

    own = {k: v for k, v in overrides.items() if k in TrainConfig.model_fields}
    return split_record(train_settings(profile).model_copy(update=own))


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    add_method(command)
    add_profile(command)
    command.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    command.add_argument("--seed", type=int, default=0, help="training seed (validation split, batches, bandit)")
    command.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                         type=setting, help="override one of the method's training settings (repeatable; VALUE "
                                             "read as JSON, else text), e.g. --set lr=2e-5, or the stage I that "
                                             "IRENE or TextGNN builds on: --set stage_one=dual_encoder")


def setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` → (key, VALUE read as JSON, else the text): the ``--set`` override of a training setting."""
    import json

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: KEY=VALUE, e.g. lr=2e-5")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.datasets.container import XCDataset
    from xc_core.methods import get_method
    from xc_core.stages.anchor_sets import anchors_built, load_with_anchors

    home = resolve_home(args.home)
    method = get_method(args.method)
    if method.needs_anchor_sets and not anchors_built(home, args.dataset):
        raise SystemExit(f"xc train: {method.name} trains on anchor sets and there are none at "
                         f"{anchors_dir(home, args.dataset)} — run `xc anchors --dataset {args.dataset} --profile "
                         f"{args.profile} --home {home}` first")
    # Methods that use no graph (pretrained, dual_encoder) train on the data set as built when no anchor
    # stage has run: the untrained floor never waits for RWR.
    dataset = (XCDataset.load(anchors_dir(home, args.dataset)) if method.needs_anchor_sets
               else load_with_anchors(home, args.dataset))
    profile = get_profile(args.profile).model_copy(update={"seed": args.seed})
    return train_method(dataset, args.method, profile, home, resume=args.resume, progress=not args.quiet,
                        overrides=dict(args.settings))


COMMAND = register(Command("train", "train a method (one MLflow run)", _arguments, _run,
                           docs="docs/training.md", assets=("encoder",)))
