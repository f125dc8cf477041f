"""`make run` end to end on the tiny profile, as a user runs it: the whole asset graph through Dagster, the step
lines, the report, the promotion decisions, the one MLflow store per home that the bare `xc` CLI then answers from;
`--reuse-data` training more methods on the lineage already materialized; then the same run on a real PostgreSQL
server against the module's one SQLite run."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import mlflow
import pytest

from tests.postgres import PostgresServer
from xc_core.paths import REPO_ROOT

BIN = Path(sys.executable).parent  # the environment running the tests: make uses its xc, not .venv's
# the shell a user types in: no tracking URI, home or make state inherited from the test run
ENV = {k: v for k, v in os.environ.items()
       if k not in {"MLFLOW_TRACKING_URI", "XC_HOME", "DAGSTER_HOME", "MAKEFLAGS", "MFLAGS", "MAKELEVEL",
                    "XC_POSTGRES_URL"}}


@dataclass(frozen=True)
class FirstRun:
    home: Path
    state: Path  # make's Dagster state folder (its instance: the repository's dagster.yaml)
    stdout: str  # all that `make run` printed
    printed: list[str]  # `xc run`'s own lines among them, for people
    summary: dict[str, Any]  # its last-run.json, as the run left it


#: the methods of the module's one whole `make run` on the embedded stores
METHODS = "pretrained,ramen"


def _make(*args: str, dry: bool = False) -> subprocess.CompletedProcess[str]:
    """``make ARGS`` in the repository, never reinstalling (``-o`` the install stamp)."""
    command = ["make", "--no-print-directory", "-C", str(REPO_ROOT), "-o", ".venv/.installed", f"BIN={BIN}",
               *(["-n"] if dry else []), *args]
    return subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    """One tiny `make run` on SQLite, as a user runs it (Dagster's run state in a folder of its own instead of the
    repository's), shared: the tests go on from its home, the PostgreSQL test compares its own run with this one's
    summary."""
    root = tmp_path_factory.mktemp("first-run")
    home, state = root / "home", root / "dagster"
    run = _make("run", "PROFILE=tiny", f"METHODS={METHODS}", f"XC_HOME={home}", f"XC_DAGSTER_STATE={state}")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("xc run --dataset synthetic --profile tiny"))
    end = next(i for i, line in enumerate(lines) if line.startswith("report: "))
    return FirstRun(home, state, run.stdout, lines[start:end + 1],
                    json.loads((home / "last-run.json").read_text()))


def test_make_run_shows_its_steps_and_the_bare_cli_answers_from_the_champion_it_promoted(
        first_run: FirstRun, tmp_path: Path) -> None:
    """One MLflow store per home (issue #15): `make run` and the bare `xc` CLI given the same home use
    `<home>/mlflow` (database and artifacts), and `make mlflow-ui` serves that folder. Before, `make run` wrote to
    the repository's `mlflow/` and `xc predict` then found no champion."""
    home, champion = first_run.home, first_run.summary["champion"]
    assert f"champion: {champion['method']} v{champion['version']} " in first_run.stdout
    _check_what_make_run_showed(first_run.stdout, home, first_run.state,
                                f"champion: {champion['method']} v{champion['version']} ")

    # then the bare CLI, from another folder, with the same home and no MLFLOW_TRACKING_URI
    done = subprocess.run([str(BIN / "xc"), "predict", "cheap running shoes", "--k", "3", "--quiet"],
                          env={**ENV, "XC_HOME": str(home)}, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr  # not "xc-encoder-synthetic has no champion yet"
    answer = json.loads(done.stdout)
    assert (answer["method"], answer["version"]) == (champion["method"], str(champion["version"]))
    assert len(answer["labels"]) == 3
    # --quiet silences the libraries' bars too (transformers' "Loading weights" bar, before issue #15)
    assert not re.search(r"\d+%\|", done.stderr), done.stderr

    # everything that run logged is in the home's store: its database and its artifact folder
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


def _check_what_make_run_showed(stdout: str, home: Path, state: Path, champion_line: str) -> None:
    """Issue #66: a line per stage with its duration before the table, no Dagster event line and no library noise
    on the terminal (both in the log); the runs under named jobs; the champion in sync after the run that set it."""
    ended = [line for line in stdout.splitlines() if re.match(r"\[ ?\d+/\d+\] synthetic / .+ done in \d+s", line)]
    for stage in ("world", "simulated_events", "raw_events", "quarantine", "graph_tables", "xc_dataset",
                  "anchor_sets", "pretrained / encoder", "ramen / encoder", "label_index", "offline_eval",
                  "ab_vs_control", "peer_eval", "eval_report", "challenger", "ab_test", "champion"):
        assert any(f"/ {stage} done in" in line for line in ended), (stage, stdout)
    assert stdout.index(ended[-1]) < stdout.index(champion_line)
    for noise in ("DEBUG", "STEP_START", "torchvision", "onnx/_internal", "UserWarning", "mlflow.models"):
        assert noise not in stdout, noise
    log = (home / "last-run.log").read_text()
    assert "STEP_START" in log and "synthetic__encoder" in log  # the Dagster log went to the file

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


def test_xc_run_tiny_materializes_everything_and_reuse_data_trains_more(
        first_run: FirstRun, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from xc_assets.cli import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the run uses an instance under its home
    home, first = first_run.home, first_run.summary
    table = _check_step_lines(first_run.printed, home)
    assert table[0].split() == ["method", "test", "P@1", "[95%", "CI]", "test", "PSP@1", "[95%", "CI]", "validation",
                                "P@1", "promotion"]
    # each method's row: test P@1 and PSP@1 in points with the evaluation's interval, the validation P@1 the gate
    # decided on (issue #64), then the gate's decision
    interval = r"(\d+\.\d\d) \[(\d+\.\d\d), (\d+\.\d\d)\]"
    for line, method, decision in zip(table[1:3], ("pretrained", "ramen"), first["promotion"], strict=True):
        row = re.fullmatch(rf"{method} +{interval} +{interval} +(\d+\.\d\d) +(promoted|rejected) v\d+: .+", line)
        assert row is not None, line
        p1, low, high = map(float, row.groups()[:3])
        assert low <= p1 <= high and p1 == pytest.approx(100 * first["methods"][method]["P@1"], abs=0.006)
        assert decision["decided_on"] == "validation"
        assert float(row.group(7)) == pytest.approx(100 * decision["decided_P@1"], abs=0.006)
    # make run scores the linear peer (PECOS) on the same test split: a row beside the methods, never a candidate
    # (its interval from its own evaluation), and a column of the decile table below
    peer = re.fullmatch(rf"pecos +{interval} +{interval} +— +linear peer: scored, never registered", table[3])
    assert peer is not None, table[3]
    assert float(peer.group(1)) == pytest.approx(100 * first["peers"]["pecos"]["P@1"], abs=0.006)
    assert all(m not in first["methods"] and m not in [d["method"] for d in first["promotion"]]
               for m in first["peers"])
    del table[3]
    # which split decided, and each decision the test disagrees with (shown, not hidden)
    assert table[3].startswith("the gate decided on the validation split")
    shown = [line for line in table[4:] if line.startswith("  ")]
    disagreeing = [d["method"] for d in first["promotion"] if "the test disagrees" in d["test_view"]]
    assert [line.split(":")[0].strip() for line in shown[:len(disagreeing)]] == disagreeing
    table = table[:3] + table[4 + len(disagreeing):]
    # then the A/B lifts against the control (%Δ, * where significant), P@5 by label decile (issue #63), the
    # champion, why the best test P@1 is not served (when it is not) and the report
    title, header, lifts = table[3:6]
    assert title.startswith("A/B vs pretrained (simulated)") and header.split()[:3] == ["method", "revenue", "ctr"]
    assert lifts.split()[0] == "ramen" and all(re.fullmatch(r"[+-]\d+\.\d\d\*?", c) for c in lifts.split()[1:])
    assert table[6].startswith("P@5 by label-frequency decile") and table[7].split()[:2] == ["decile", "pretrained"]
    assert "pecos P@5" in table[7]
    assert [row.split()[0] for row in table[8:18]] == [str(d) for d in range(10)]
    assert len(first["label_deciles"]) == 10
    assert table[18].startswith(f"champion: {first['champion']['method']} v{first['champion']['version']} ")
    best = max(first["methods"], key=lambda m: first["methods"][m]["P@1"])
    why = table[19:-1]  # one line, only when the best test P@1 was not promoted (and no equal model serves)
    assert len(why) <= 1 and all(line.startswith(f"best test P@1: {best} ") for line in why)
    assert not why or first["champion"]["method"] != best
    assert table[-1] == f"report: {first['report']}"
    assert first["success"] and all(first["checks"].values()) and set(first["methods"]) == {"pretrained", "ramen"}
    assert [d["method"] for d in first["promotion"]] == ["pretrained", "ramen"]
    assert first["promotion"][0]["promoted"]  # the first model becomes champion
    assert first["champion"]["version"] in {d["version"] for d in first["promotion"]}
    assert Path(first["report"]).exists() and "ramen" in Path(first["report"]).read_text()
    assert {p.name for p in (home / "eval" / "synthetic").iterdir()} == {"pretrained-tiny", "ramen-tiny",
                                                                        "pecos-tiny", "validation"}
    assert {p.name for p in (home / "eval" / "synthetic" / "validation").iterdir()} == {"pretrained-tiny", "ramen-tiny"}

    anchors_before = (home / "anchor_sets" / "synthetic" / "meta.json").stat().st_mtime_ns
    assert main(["run", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home), "--quiet",
                 "--reuse-data", "--methods", "dual_encoder", "--seed", "3", "--json"]) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert json.loads((home / "last-run.json").read_text()) == second  # saved whichever output was asked for
    assert second["success"] and second["reused_data"] and list(second["methods"]) == ["dual_encoder"]
    # --seed is the training's: the model's record carries it, the summary says it (the first run: the profile's)
    trained = json.loads((home / "models" / "synthetic" / "dual_encoder-tiny" / "train_summary.json").read_text())
    assert (trained["seed"], second["seed"], first["seed"]) == (3, 3, 0)
    assert (home / "anchor_sets" / "synthetic" / "meta.json").stat().st_mtime_ns == anchors_before  # not rebuilt
    assert {p.name for p in (home / "eval" / "synthetic").iterdir()} == {"pretrained-tiny", "ramen-tiny", "pecos-tiny",
                                                                        "dual_encoder-tiny", "validation"}

    # `xc promote` re-runs the gate for evaluated models: the same model again is never "better"; its step lines
    # estimate what is left from the first run's times of the same steps
    assert main(["promote", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home),
                 "--methods", "pretrained"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    steps = [line for line in printed if line.startswith("[")]
    assert len(steps) == 8 and steps[-1].endswith("nothing left"), steps
    assert all(re.search(r"steps? left, ~\S+ by the last run's times$", line) for line in steps[1:-1:2]), steps
    _, again, split, *_, champion = printed[1 + len(steps):]
    assert split.startswith("the gate decided on the validation split"), split
    assert re.fullmatch(r"pretrained +.+ rejected v\d+: P@1 \S+ does not beat the champion's \S+", again), again
    kept = second["champion"] or first["champion"]  # the table names the registry's champion, unchanged
    assert champion.startswith(f"champion: {kept['method']} v{kept['version']} (unchanged, "), champion
    # a registration that errors (tracking server down) fails the command and says why; it is no rejection
    from xc_core.measure import free_port

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    assert main(["promote", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home), "--quiet",
                 "--methods", "ramen", "--json"]) == 1
    [broken] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["promotion"]
    assert broken["version"] is None and broken["reason"].startswith("error before the gate") \
        and "not reachable" in broken["reason"]
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert main(["promote", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home),
                 "--methods", "auggt"]) == 2
    assert re.search(r"xc promote: error: not evaluated.*auggt.*xc eval", capsys.readouterr().err)


def _check_step_lines(printed: list[str], home: Path) -> list[str]:
    """``xc run``'s progress (issue #66): where the log goes, the plan, then a line as each step starts and one as
    it ends, numbered over the whole run; no Dagster event line among them. Returns the table that follows."""
    log, plan = printed[:2]
    assert log.endswith(f"go to {home / 'last-run.log'}"), log
    total = int(plan.split()[0])
    assert plan == f"{total} steps on synthetic: lineage, 2 method(s) pretrained, ramen, report, promotion"
    steps = printed[2:2 + 2 * total]
    for number in range(1, total + 1):
        start, end = steps[2 * number - 2:2 * number]
        position = re.escape(f"[{number:>2}/{total}]")
        label = re.fullmatch(rf"{position} (synthetic / .+) …", start)
        assert label is not None, start
        assert re.fullmatch(rf"{position} {re.escape(label.group(1))} done in \d+s · .+", end), end
    names = [line.split(" ")[-2] for line in steps[::2]]
    for stage in ("world", "raw_events", "graph_tables", "xc_dataset", "anchor_sets", "ramen / encoder",
                  "label_index", "offline_eval", "ab_vs_control", "eval_report", "challenger", "champion"):
        assert any(f"{stage} …" in line for line in steps[::2]), (stage, names)
    assert steps[-1].endswith("nothing left")
    assert not any("DEBUG" in line or "STEP_START" in line for line in printed)
    return printed[2 + 2 * total:]


def _outcome(summary: dict[str, Any], method: str) -> dict[str, Any]:
    """What must not depend on the storage: ``method``'s metrics and its gate's decision."""
    metrics = {k: v for k, v in summary["methods"][method].items() if "@" in k}
    [decision] = [(d["method"], d["version"], d["promoted"], d["reason"]) for d in summary["promotion"]
                  if d["method"] == method]
    return {"metrics": metrics, "decision": decision}


def test_the_same_run_on_postgres_gives_the_same_models_and_the_registry_lives_there(
        first_run: FirstRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #66: Dagster and MLflow on a real PostgreSQL server (started on loopback, stopped by its PID: the
    same tiny run as the module's SQLite one, its lineage and first method, gives that method the same metrics
    and promotion; the runs, the registry and its aliases live in the server's databases; a sensor tick reads its
    run storage; `xc predict` answers from the champion there. One method: a second trains nothing the storage
    sees differently, and the sensor tick registers and rejects a second version."""
    from xc_assets.cli import main
    from xc_assets.launch import instance_for
    from xc_core.tracking.store import tracking_uri

    server = PostgresServer().start()
    try:
        for name in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("XC_POSTGRES_URL", server.url)
        home = tmp_path / "postgres"
        assert main(["run", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home), "--quiet",
                     "--json", "--methods", "pretrained"]) == 0
        on_postgres: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert _outcome(on_postgres, "pretrained") == _outcome(first_run.summary, "pretrained")
        assert on_postgres["promotion"][0]["promoted"] and on_postgres["champion"] == on_postgres["promotion"][0]
        _stored_on_postgres(server.url, home, on_postgres, monkeypatch, capsys, instance_for(home),
                            tracking_uri(home))
    finally:
        server.stop()


def _stored_on_postgres(url: str, home: Path, on_postgres: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture[str], instance: dg.DagsterInstance, uri: str) -> None:
    # the run history is in the server's xc_dagster database, under the runs' job names; no SQLite file was made
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    assert {r.job_name for r in instance.get_runs()} == {"synthetic_lineage", "synthetic_method", "synthetic_report",
                                                          "synthetic_promotion"}
    assert not list(home.rglob("*.db")), list(home.rglob("*.db"))
    # the registry too, in xc_mlflow: the champion alias the run moved; the artifacts stay files under the home
    assert uri == f"{url.replace('postgresql://', 'postgresql+psycopg2://')}/xc_mlflow"
    client = mlflow.MlflowClient(uri)
    champion = client.get_model_version_by_alias("xc-encoder-synthetic", "champion")
    assert (champion.tags["method"], str(champion.version)) == (on_postgres["champion"]["method"],
                                                                 str(on_postgres["champion"]["version"]))
    assert list((home / "mlflow" / "artifacts").rglob("MLmodel"))

    _sensor_tick_on(instance, home, monkeypatch)

    # `xc predict` answers from that champion, read from the server
    from xc_assets.cli import main

    assert main(["predict", "cheap running shoes", "--k", "3", "--home", str(home), "--quiet"]) == 0
    answer = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (answer["method"], str(answer["version"])) == (champion.tags["method"], str(champion.version))
    assert len(answer["labels"]) == 3


def _sensor_tick_on(instance: dg.DagsterInstance, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A nightly generation's training run on the server's instance, then the chain sensor's tick: it finds the
    run through the PostgreSQL run storage's tag filters and asks for the report and the gate; the gate runs and
    decides (the same model again: rejected)."""
    from xc_assets.definitions import defs
    from xc_assets.defs.sensors import GENERATION, promote_after_training
    from xc_assets.launch import method_run_config

    monkeypatch.setenv("XC_HOME", str(home))
    tags = {GENERATION: "nightly-1", "xc/methods": "pretrained", "xc/profile": "tiny", "xc/method": "pretrained"}
    trained = defs.resolve_job_def("train_eval_job").execute_in_process(
        instance=instance, partition_key="pretrained", tags=tags, run_config=method_run_config("synthetic", "tiny"),
        raise_on_error=False)
    assert trained.success
    context = dg.build_run_status_sensor_context(
        sensor_name=promote_after_training.name, dagster_instance=instance, dagster_run=trained.dagster_run,
        dagster_event=trained.get_run_success_event())
    requests = promote_after_training(context)
    assert isinstance(requests, list), requests
    assert [(r.job_name, r.tags.get("xc/method")) for r in requests] == [("report_job", None),
                                                                        ("promotion_job", "pretrained")]
    promotion = requests[1]
    gate = defs.resolve_job_def("promotion_job").execute_in_process(
        instance=instance, run_config=promotion.run_config, tags=promotion.tags, raise_on_error=False)
    assert gate.success
    [check] = gate.get_asset_check_evaluations()
    assert not check.passed and "does not beat" in (check.description or "")


def test_reuse_data_without_a_lineage_names_the_command_to_run(tmp_path: Path) -> None:
    from xc_assets.run import run_pipeline

    with pytest.raises(FileNotFoundError, match="without --reuse-data"):
        run_pipeline("wikispeedia", "tiny", tmp_path, methods=("pretrained",), reuse_data=True)


def test_what_a_run_ingests_comes_from_the_registry_entry_not_the_name(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from xc_assets.launch import ingest_ops, lineage_selection, partition_tags
    from xc_core.datasets.definitions import builtin_definitions
    from xc_core.datasets.registry import DATASETS, DatasetSpec, RawEvents

    log = tmp_path / "shop.jsonl"
    log.write_text(json.dumps({"ts": "2006-04-02 10:00:00", "user_id": "u1", "market": "en-US", "query_text": "shoes",
                               "item_id": "k1", "item_text": "shoes", "position": 1, "impressed": True,
                               "clicked": True}) + "\n")
    protocol = builtin_definitions()["aol-1000"].events_config(None)
    spec = DatasetSpec("shop-log", "a user's own log", events=lambda home: protocol,
                       raw=RawEvents("events", lambda: [log]))
    monkeypatch.setitem(DATASETS, "shop-log", spec)
    assert partition_tags("shop-log", "tiny") == {"dagster/asset_partition_range_start": "2006-04-02",
                                                   "dagster/asset_partition_range_end": "2006-04-02"}
    assert ingest_ops("shop-log", "tiny") == {"raw_events": {"config": {"source": "events", "paths": [str(log)]}}}
    assert [a.key.to_user_string() for a in lineage_selection("shop-log")[0][:2]] == ["raw_events", "quarantine"]
    assert partition_tags("wikispeedia", "tiny") == {} and ingest_ops("wikispeedia", "tiny") == {}
