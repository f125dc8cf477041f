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
