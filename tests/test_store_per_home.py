"""One MLflow store per home (issue #15): `make run` and the bare `xc` CLI given the same home use
`<home>/mlflow` (database and artifacts), and `make mlflow-ui` serves that folder. Before, `make run` wrote to
the repository's `mlflow/` and `xc predict` then found no champion."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from xc_core.paths import REPO_ROOT

BIN = Path(sys.executable).parent  # the environment running the tests: make uses its xc, not .venv's
# the shell a user types in: no tracking URI, home or make state inherited from the test run
ENV = {k: v for k, v in os.environ.items()
       if k not in {"MLFLOW_TRACKING_URI", "XC_HOME", "DAGSTER_HOME", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}


def _make(*args: str, dry: bool = False) -> subprocess.CompletedProcess[str]:
    """``make ARGS`` in the repository, never reinstalling (``-o`` the install stamp)."""
    command = ["make", "--no-print-directory", "-C", str(REPO_ROOT), "-o", ".venv/.installed", f"BIN={BIN}",
               *(["-n"] if dry else []), *args]
    return subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=600)


def test_xc_predict_after_make_run_answers_from_the_champion_make_run_promoted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # make run as a user runs it, at the tiny profile; Dagster's run state in tmp_path instead of the repository
    run = _make("run", "PROFILE=tiny", "METHODS=pretrained", f"XC_HOME={home}",
                f"XC_DAGSTER_STATE={tmp_path / 'dagster'}")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "champion: pretrained v1 " in run.stdout and (home / "last-run.json").exists()
    _check_what_make_run_showed(run.stdout, home, tmp_path / "dagster")

    # then the bare CLI, from another folder, with the same home and no MLFLOW_TRACKING_URI
    done = subprocess.run([str(BIN / "xc"), "predict", "cheap running shoes", "--k", "3", "--quiet"],
                          env={**ENV, "XC_HOME": str(home)}, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr  # not "xc-encoder-synthetic has no champion yet"
    answer = json.loads(done.stdout)
    assert (answer["method"], answer["version"]) == ("pretrained", "1") and len(answer["labels"]) == 3
    # --quiet silences the libraries' bars too (transformers' "Loading weights" bar, before issue #15)
    assert not re.search(r"\d+%\|", done.stderr), done.stderr

    # everything that run logged is in the home's store: its database and its artifact folder
    import mlflow

    from xc_core.tracking.store import artifact_root, tracking_uri

    uri = tracking_uri(home)
    assert uri == f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
    experiment = mlflow.MlflowClient(uri).get_experiment_by_name("xc-synthetic")
    assert experiment is not None and experiment.artifact_location.startswith((home / "mlflow" / "artifacts").as_uri())
    assert list((home / "mlflow" / "artifacts").rglob("MLmodel"))  # the registered encoder's files

    # make mlflow-ui serves that store, and make clean removes it (with the home)
    ui = shlex.split(_make("mlflow-ui", f"XC_HOME={home}", dry=True).stdout.replace("\\\n", " "))
    assert ui[ui.index("--backend-store-uri") + 1] == uri
    assert Path(ui[ui.index("--default-artifact-root") + 1]).as_uri() == artifact_root(uri, home)
    assert str(home) in shlex.split(_make("clean", f"XC_HOME={home}", dry=True).stdout)


def _check_what_make_run_showed(stdout: str, home: Path, state: Path) -> None:
    """Issue #66: a line per stage with its duration before the table, no Dagster event line and no library noise
    on the terminal (both in the log); the runs under named jobs; the champion in sync after the run that set it."""
    ended = [line for line in stdout.splitlines() if re.match(r"\[ ?\d+/\d+\] synthetic / .+ done in \d+s", line)]
    for stage in ("world", "simulated_events", "raw_events", "quarantine", "graph_tables", "xc_dataset",
                  "anchor_sets", "pretrained / encoder", "label_index", "offline_eval", "ab_vs_control",
                  "eval_report", "challenger", "ab_test", "champion"):
        assert any(f"/ {stage} done in" in line for line in ended), (stage, stdout)
    assert stdout.index(ended[-1]) < stdout.index("champion: pretrained v1 ")
    for noise in ("DEBUG", "STEP_START", "torchvision", "onnx/_internal", "UserWarning", "mlflow.models"):
        assert noise not in stdout, noise
    log = (home / "last-run.log").read_text()
    assert "STEP_START" in log and "synthetic__encoder" in log  # the Dagster log went to the file

    import dagster as dg
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.loader import LoadingContextForTest

    from xc_assets.defs.resources import XcHome
    from xc_assets.launch import dataset_family, lineage_selection

    env = {"DAGSTER_HOME": str(REPO_ROOT), "XC_DAGSTER_STATE": str(state)}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        instance = dg.DagsterInstance.get()  # make's instance: the repository's dagster.yaml, this test's state
        assert {r.job_name for r in instance.get_runs()} == {"synthetic_lineage", "synthetic_method",
                                                              "synthetic_report", "synthetic_promotion"}
        family = dataset_family("synthetic")
        assets, checks = lineage_selection("synthetic")
        graph = dg.Definitions(assets=[*assets, *family.assets], asset_checks=[*checks, *family.checks],
                               resources={"xc_home": XcHome(home=str(home))}).resolve_asset_graph()
        status = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
        assert status.get_status(dg.AssetKey(["synthetic", "champion"])) == StaleStatus.FRESH
