"""The Dagster UI for real: `dagster dev` serves the code location, GraphQL sees every definition, and a
materialization launched through the API succeeds. The server runs in its own process session on a free
127.0.0.1 port with a temporary DAGSTER_HOME and is stopped by its PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from xc_core.measure import free_port

REPO = Path(__file__).resolve().parent.parent


def _graphql(port: int, query: str, variables: dict[str, object] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:  # loopback only
        return json.loads(response.read())["data"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("ui")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "XC_HOME": str(home / "xc")}
    process = subprocess.Popen([str(Path(sys.executable).parent / "dagster"), "dev", "-w", "workspace.yaml",
                                "-h", "127.0.0.1", "-p", str(port)], cwd=REPO, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("dagster dev did not answer /server_info within 180 s")
        yield port
    finally:
        # an idle `dagster dev` stops in ~3 s on SIGTERM; after a run it may take 14-30 s to wind its processes
        # down, which tests nothing here: the home is thrown away, so its whole process group is killed after 5 s
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def test_graphql_sees_every_asset_check_job_schedule_and_sensor(server: int) -> None:
    data = _graphql(server, """{ assetNodes { assetKey { path }
        assetChecksOrError { ... on AssetChecks { checks { name } } } }
      repositoriesOrError { ... on RepositoryConnection { nodes { name jobs { name } schedules { name }
        sensors { name } } } } }""")
    keys = {"/".join(n["assetKey"]["path"]) for n in data["assetNodes"]}
    assert {"raw_events", "quarantine", "world", "simulated_events", "synthetic/anchor_sets", "synthetic/encoder",
            "synthetic/offline_eval", "synthetic/eval_report", "synthetic/champion", "wikispeedia/xc_dataset",
            "aol_1000/click_graph", "synthetic/streamed_keywords"} <= keys
    checks = {c["name"] for n in data["assetNodes"] for c in n["assetChecksOrError"].get("checks", [])}
    assert {"graph_tables_valid", "coverage_gate", "beats_champion"} <= checks
    repo = data["repositoriesOrError"]["nodes"][0]
    assert {"ingest_job", "retrain_job", "train_eval_job", "add_keywords_job"} <= {j["name"] for j in repo["jobs"]}
    assert [s["name"] for s in repo["schedules"]] == ["nightly_retrain"]
    assert {s["name"] for s in repo["sensors"]} == {"landing_folder_sensor", "keyword_landing_sensor",
                                                   "record_run_failures", "train_after_rebuild",
                                                   "promote_after_training"}


def test_a_materialization_launched_through_the_api_succeeds(server: int) -> None:
    launch = _graphql(server, """mutation($p: ExecutionParams!) { launchPipelineExecution(executionParams: $p) {
        __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
                      {"p": {"selector": {"repositoryLocationName": "xc_assets.definitions",
                                          "repositoryName": "__repository__", "pipelineName": "__ASSET_JOB",
                                          "assetSelection": [{"path": ["world"]}]},
                             "runConfigData": {"ops": {"world": {"config": {"scale": "tiny"}}}}}})
    result = launch["launchPipelineExecution"]
    assert result["__typename"] == "LaunchRunSuccess", result
    run_id = result["run"]["runId"]
    status = ""
    deadline = time.time() + 240
    while time.time() < deadline:
        status = _graphql(server, f'{{ runOrError(runId: "{run_id}") {{ ... on Run {{ status }} }} }}')[
            "runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(2)
    assert status == "SUCCESS"
