"""The A/B stage as the CLI, ``make run`` and Dagster run it: arms by name or URI → a simulated A/B test on the data
set's ground truth (its registry entry's ``world``), or a labelled replay estimate where it has none → JSON and
HTML in ``paths.abtest_dir`` and an MLflow run in the ``xc-abtest-<data set>`` experiment."""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from xc_core.abtest import ABConfig, Arm, ModelArm, Simulation, aa_calibration, resolve_arm, run_abtest
from xc_core.abtest.replay import replay
from xc_core.abtest.report import render_page, render_section
from xc_core.datasets.registry import DATASETS
from xc_core.paths import abtest_cache_dir, abtest_dir, dataset_dir, dataset_slug, eval_dir, resolve_home
from xc_core.stages import Command, Payload, register
from xc_core.stages.options import add_dataset, add_profile


def ground_truth(dataset: str, home: Path) -> Any | None:
    """The simulated world that scores the data set's A/B tests (None: the data set has no ground truth)."""
    spec = DATASETS.get(dataset)
    return spec.world(home) if spec is not None and spec.world is not None else None


def _slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", spec.removeprefix("models:/"))


class ABStage:
    """A/B tests of one data set that share its world, traffic caches and arms (a control served once)."""

    def __init__(self, dataset: str, home: Path, profile: str) -> None:
        self.dataset, self.home, self.profile = dataset, home, profile
        world = ground_truth(dataset, home)
        self.simulation = Simulation(world) if world is not None else None
        self._arms: dict[str, Arm] = {}
        self._keys: dict[str, str] = {}  # model URI → the name of its candidates' cache file

    def arm(self, spec: str, seed: int = 0) -> Arm:
        if spec not in self._arms:
            self._arms[spec] = resolve_arm(spec, self.home, self.dataset, self.profile, seed=seed)
        return self._arms[spec]

    def _cached(self, arm: Arm, cfg: ABConfig) -> Path | None:
        """Load a model arm's saved candidates (the expensive part: embedding the traffic's queries); its file,
        named by the digest of what the arm serves (the run id where that cannot be read), so two runs serving the
        same model share it."""
        if self.simulation is None or not isinstance(arm, ModelArm) or not arm.run_id:
            return None
        if arm.model_uri not in self._keys:
            self._keys[arm.model_uri] = arm.content_key() or arm.run_id
        key = self._keys[arm.model_uri]
        path = abtest_cache_dir(self.home, self.dataset) / f"{key}-k{cfg.selection.candidates}.npz"
        self.simulation.cache(arm, cfg.selection.candidates).load(path)
        return path

    def run(self, control: str, treatment: str, cfg: ABConfig, log: bool = True, folder: Path | None = None,
            name: str | None = None) -> dict[str, Any]:
        """One test, saved (JSON + HTML, in ``folder``, default ``paths.abtest_dir``, as ``name``, default
        ``<treatment>-vs-<control>``) and logged to MLflow; returns the JSON the CLI prints."""
        started = time.perf_counter()
        if self.simulation is not None:
            arms = self.arm(control, cfg.seed), self.arm(treatment, cfg.seed)
            caches = [(arm, self._cached(arm, cfg)) for arm in arms]
            body = run_abtest(self.simulation, arms[0], arms[1], cfg)
            for arm, path in caches:
                if path is not None:
                    self.simulation.cache(arm, cfg.selection.candidates).save(path)
        else:
            body = self._replay(control, treatment, cfg)
        result = {"dataset": self.dataset, "profile": self.profile, "control": control, "treatment": treatment,
                  "mode": "simulated" if self.simulation is not None else "replay", **body}
        result["seconds"] = round(time.perf_counter() - started, 2)
        folder = folder or abtest_dir(self.home, self.dataset, self.profile)
        folder.mkdir(parents=True, exist_ok=True)
        stem = folder / (name or f"{_slug(treatment)}-vs-{_slug(control)}")
        stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
        result["report"] = str(render_page([result], self.dataset, stem.with_suffix(".html")))
        if log:
            result["mlflow_run_id"] = _log(result, stem, self.home)
        return result

    def calibrate(self, control: str, cfg: ABConfig, runs: int) -> dict[str, Any]:
        """A/A: the control against itself over ``runs`` seeds (split users)."""
        if self.simulation is None:
            raise LookupError(f"data set {self.dataset} has no simulated ground truth: an A/A calibration needs one")
        return {"dataset": self.dataset, "control": control,
                **aa_calibration(self.simulation, self.arm(control, cfg.seed), cfg, runs)}

    def _replay(self, control: str, treatment: str, cfg: ABConfig) -> dict[str, Any]:
        from xc_core.datasets.container import XCDataset

        data = XCDataset.load(dataset_dir(self.home, self.dataset))
        tops = [self._evaluated_top(spec, cfg.period) for spec in (control, treatment)]
        if cfg.period != "test":  # the split's rows as the test split, as its evaluation scored them
            from xc_core.stages.evaluate import validation_split
            from xc_core.training.record import TrainedModel

            arm = self.arm(treatment)
            assert isinstance(arm, ModelArm)  # _evaluated_top refused anything else
            data = validation_split(data, TrainedModel.of(self.home, self.dataset, arm.method, arm.profile))
        body = replay(data, tops[0], tops[1], cfg.selection.slots, cfg.alpha)
        return {**body, "control_arm": self.arm(control).describe(), "treatment_arm": self.arm(treatment).describe(),
                "config": {"slots": cfg.selection.slots, "alpha": cfg.alpha}}

    def _evaluated_top(self, spec: str, split: str = "test") -> Any:
        from xc_core.evaluation.record import EvaluationRecord

        arm = self.arm(spec)
        if not isinstance(arm, ModelArm):
            raise LookupError(f"data set {self.dataset} has no simulated ground truth: only trained models can be "
                              f"replayed, not the {spec} arm")
        folder = eval_dir(self.home, self.dataset, arm.method, arm.profile, split)
        record = EvaluationRecord.load(folder)
        if record is None:
            raise FileNotFoundError(f"{folder}: the replay reads the offline evaluation — run `xc eval --dataset "
                                    f"{self.dataset} --method {arm.method} --profile {arm.profile} --split {split}` "
                                    "first")
        if arm.run_id and record.mlflow_run_id and record.mlflow_run_id != arm.run_id:
            raise LookupError(f"{folder} evaluated training run {record.mlflow_run_id}, not {spec} (run "
                              f"{arm.run_id}): evaluate that model again before replaying it")
        return record.top()


def _log(result: dict[str, Any], stem: Path, home: Path) -> str:
    """One MLflow run per test: %Δ, intervals and p-values as metrics, the JSON and HTML as artifacts."""
    import mlflow

    from xc_core.tracking.store import ensure_experiment, git_commit

    experiment = ensure_experiment(f"xc-abtest-{dataset_slug(result['dataset'])}", home)
    tags = {"dataset": result["dataset"], "profile": result["profile"], "mode": result["mode"],
            "control": result["control"], "treatment": result["treatment"], "git_commit": git_commit()}
    with mlflow.start_run(experiment_id=experiment, run_name=f"{result['treatment']} vs {result['control']}",
                          tags=tags) as run:
        mlflow.log_params({k: v for k, v in result["config"].items() if not isinstance(v, dict)})
        metrics: dict[str, float] = {}
        for key, pct in result["delta_pct"].items():
            if pct is not None:
                low, high = result["ci95"][key]
                metrics.update({f"delta_pct/{key}": pct, f"ci_low/{key}": low, f"ci_high/{key}": high,
                                f"p_value/{key}": result["p_value"][key]})
        for arm in ("control", "treatment"):
            metrics.update({f"{arm}/{k}": v for k, v in result["arms"][arm].items() if v is not None})
        mlflow.log_metrics(metrics)
        mlflow.log_artifact(str(stem.with_suffix(".json")), artifact_path="abtest")
        mlflow.log_artifact(str(stem.with_suffix(".html")), artifact_path="abtest")
        return str(run.info.run_id)


def saved_results(home: Path, dataset: str, profile: str) -> list[dict[str, Any]]:
    """Every A/B result saved for the data set at ``profile`` (the evaluation report's A/B section)."""
    folder = abtest_dir(home, dataset, profile)
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*-vs-*.json"))]  # none yet: no folder, no match


def report_section(home: Path, dataset: str, profile: str) -> str | None:
    results = saved_results(home, dataset, profile)
    return render_section(results, dataset) if results else None


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    arms = "a model URI (models:/xc-encoder-synthetic@champion), a trained method's name, bm25, oracle or random"
    command.add_argument("--control", default=None, help=f"control arm: {arms} (default: the registry's control "
                                                         "method)")
    command.add_argument("--treatment", help=f"treatment arm: {arms}")
    add_profile(command, help="profile of arms named by method")
    command.add_argument("--queries", type=int, default=20_000, help="query events served (default 20000)")
    command.add_argument("--seed", type=int, default=0)
    command.add_argument("--paired", action="store_true", help="both arms serve the same events (common random "
                         "numbers); default: users split by a salted hash")
    command.add_argument("--slots", type=int, default=5, help="ads shown per query at most")
    command.add_argument("--candidates", type=int, default=100, help="top-K ads each arm retrieves")
    command.add_argument("--reserve", type=float, default=0.05, help="reserve price per click")
    command.add_argument("--period", default="test", choices=("test", "validation"),
                         help="the test period's traffic, or the days before it (the promotion split the gate's "
                              "A/B test uses; a replay reads the evaluation of that split)")
    command.add_argument("--aa-runs", type=int, default=0, help="instead: A/A calibration of --control over N seeds")
    command.add_argument("--no-mlflow", action="store_true", help="do not log the test to MLflow")


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.abtest import SelectionConfig
    from xc_core.methods import control_method

    selection = SelectionConfig(slots=args.slots, candidates=args.candidates, reserve=args.reserve)
    cfg = ABConfig(queries=args.queries, seed=args.seed, paired=args.paired, selection=selection,
                   period=args.period)
    stage = ABStage(args.dataset, resolve_home(args.home), args.profile)
    control = args.control or control_method()
    if args.aa_runs:
        return stage.calibrate(control, cfg, args.aa_runs)
    if args.treatment is None:
        raise LookupError("xc abtest needs --treatment (or --aa-runs N for an A/A calibration of --control)")
    return stage.run(control, args.treatment, cfg, log=not args.no_mlflow)


COMMAND = register(Command("abtest", "simulated A/B test of two arms (replay without a world)", _arguments, _run,
                           docs="docs/abtest.md", assets=("ab_vs_control", "ab_test")))
