"""Method partitions on a real dask cluster through Dagster's dask executor (``xc run --executor dask``): a scheduler
and two workers, each its own process on 127.0.0.1, stopped by their process groups. A partition runs in
process in one copy of the tiny home and on the cluster in another; both must leave the same evaluation records,
and the cluster's run must have executed every step in a worker process (the PIDs in the Dagster event log)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pytest

from xc_core.measure import free_port

pytest.importorskip("dagster_dask", reason="the optional extra `scale` (make test installs it)")

DASK = str(Path(sys.executable).parent / "dask")
STEPS = {"synthetic__encoder", "synthetic__label_index", "synthetic__offline_eval", "synthetic__ab_vs_control"}
#: the record's provenance and timings: they differ between any two runs, on any executor
VOLATILE = {"mlflow_run_id", "code_version", "method_code_version", "git_commit", "seconds"}


@dataclass(frozen=True)
class Cluster:
    address: str
    worker_pids: frozenset[int]


@dataclass(frozen=True)
class Homes:
    """Where the reference runs in this process, and where the same runs go to the cluster."""

    in_process: Path
    on_dask: Path


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One dask process in its own session, so that stopping its group stops whatever it started."""
    with log.open("wb") as out:
        return subprocess.Popen([DASK, *args], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each group at once (each closes in seconds, so not one after the other), SIGKILL what stays."""
    running = [p for p in processes if p.poll() is None]
    for process in running:
        os.killpg(process.pid, signal.SIGTERM)
    for process in running:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _connected_workers(address: str, expected: int) -> dict[str, int]:
    """Each worker's PID by its address, once ``expected`` workers have joined the scheduler."""
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(expected, timeout=180)
        return client.run(os.getpid)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``dask scheduler`` and two ``dask worker --nthreads 1`` processes; no nanny, so each worker's PID is the one
    started here, and no dashboard, so nothing listens beyond the scheduler and the workers on 127.0.0.1."""
    logs, port = tmp_path_factory.mktemp("dask"), free_port()
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}  # the run's instance ref says where it is
    address = f"tcp://127.0.0.1:{port}"
    processes = [_start(["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                        logs / "scheduler.log", env)]
    try:
        processes += [_start(["worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
                              "--no-dashboard", "--name", f"w{i}"], logs / f"worker{i}.log", env) for i in (1, 2)]
        pids = _connected_workers(address, 2)
        assert set(pids.values()) == {p.pid for p in processes[1:]}, (pids, logs)
        yield Cluster(address, frozenset(pids.values()))
    finally:  # the workers first, while their scheduler is up (stopped all together, a worker outlived the 30 s)
        _stop(processes[1:])
        _stop(processes[:1])


@pytest.fixture(scope="module")
def homes(tiny_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homes]:
    """Two copies of the tiny home (its lineage materialized), each with its own instance under it."""
    root = tmp_path_factory.mktemp("dask-homes")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DAGSTER_HOME", raising=False)  # xc run's instance: under its home
        yield Homes(*(Path(shutil.copytree(tiny_home, root / name)) for name in ("in_process", "on_dask")))


def _run(home: Path, method: str, address: str | None) -> tuple[dg.DagsterInstance, str]:
    """``xc run``'s run of one method partition (``xc_assets.run._method_run``); its instance and run id."""
    from xc_assets.launch import instance_for
    from xc_assets.run import RunJobs, _method_run

    instance = instance_for(home)
    result = _method_run(RunJobs("synthetic", home), "tiny", method, instance, dask_address=address)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return instance, result.run_id


def _step_pids(instance: dg.DagsterInstance, run_id: str) -> dict[str, int]:
    """Which process started each step, as the instance's event log stored it."""
    return {r.dagster_event.step_key: r.dagster_event.pid for r in instance.all_logs(run_id)
            if r.dagster_event is not None and r.dagster_event.event_type_value == "STEP_START"
            and r.dagster_event.step_key is not None and r.dagster_event.pid is not None}


def _record(home: Path, method: str) -> dict[str, Any]:
    """The evaluation record without provenance or timings, with its top-100 labels and their scores."""
    from xc_core.evaluation.record import SUMMARY, TOP, TOP_SCORES
    from xc_core.paths import eval_dir

    folder = eval_dir(home, "synthetic", method, "tiny")
    summary = json.loads((folder / SUMMARY).read_text())
    return {"summary": {k: v for k, v in summary.items() if k not in VOLATILE and not k.endswith("ms_per_query")},
            "top": np.load(folder / TOP).tolist(), "scores": np.load(folder / TOP_SCORES).tolist()}


def _ab_tests(home: Path) -> list[dict[str, Any]]:
    """Every saved A/B result without its arms' model URIs (run ids) and timing."""
    from xc_core.stages.abtest import saved_results

    return [{k: v for k, v in r.items() if k not in {"control_arm", "treatment_arm", "seconds"}}
            for r in saved_results(home, "synthetic", "tiny")]


def _same_partition_on_both(cluster: Cluster, homes: Homes, method: str) -> None:
    with ThreadPoolExecutor(1) as pool:  # this process only waits for the workers: run the reference meanwhile
        on_dask = pool.submit(_run, homes.on_dask, method, cluster.address)
        local, local_run = _run(homes.in_process, method, None)
        remote, remote_run = on_dask.result()
    assert set(_step_pids(local, local_run).values()) == {os.getpid()}  # the reference: this process
    on_workers = _step_pids(remote, remote_run)
    assert set(on_workers) == STEPS and set(on_workers.values()) <= cluster.worker_pids, on_workers
    assert remote.get_run_by_id(remote_run).tags["xc/executor"] == "dask"  # type: ignore[union-attr]
    assert _record(homes.on_dask, method) == _record(homes.in_process, method)
    assert _ab_tests(homes.on_dask) == _ab_tests(homes.in_process)


def test_a_method_partition_on_dask_workers_matches_in_process(cluster: Cluster, homes: Homes) -> None:
    # one partition: a whole `xc run` of two methods on a cluster is `make test-scale`'s
    # (tests/engines/test_xc_run_engines.py)
    _same_partition_on_both(cluster, homes, "pretrained")


def test_in_process_stays_the_default_and_the_executor_is_chosen_by_option_or_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from xc_assets.cli import build_parser
    from xc_assets.distributed import DEFAULT_DASK_ADDRESS, dask_address

    def chosen(*argv: str) -> str | None:
        args = build_parser().parse_args(["run", *argv])
        return dask_address(args.executor, args.dask_address)

    for name in ("XC_EXECUTOR", "XC_DASK_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    assert chosen() is None  # in this process
    assert chosen("--executor", "dask") == DEFAULT_DASK_ADDRESS
    assert chosen("--executor", "dask", "--dask-address", "tcp://127.0.0.1:9002") == "tcp://127.0.0.1:9002"
    monkeypatch.setenv("XC_EXECUTOR", "dask")
    monkeypatch.setenv("XC_DASK_ADDRESS", "tcp://127.0.0.1:9001")
    assert chosen() == "tcp://127.0.0.1:9001"
    assert chosen("--executor", "in_process") is None  # the option wins
    monkeypatch.setenv("XC_EXECUTOR", "celery")
    with pytest.raises(ValueError, match="executor 'celery': choose one of in_process, dask"):
        chosen()


def test_xc_run_checks_the_cluster_before_any_stage(cluster: Cluster) -> None:
    from xc_assets.cli import _dask_address, build_parser
    from xc_assets.distributed import check_cluster

    args = build_parser().parse_args(["run", "--executor", "dask", "--dask-address", cluster.address])
    assert _dask_address(args) == cluster.address and check_cluster(cluster.address) == 2
    nobody = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there: refused at once, not a run that hangs
    with pytest.raises(RuntimeError, match=f"no dask scheduler answers at {nobody}"):
        check_cluster(nobody, timeout=2)
