"""Driving ``xc serve`` from outside, as the serving benchmarks and tests do: the server in a subprocess on a free
loopback port (ready, then stopped by its PID), request bodies drawn per phase, client threads on keep-alive
connections, every answer checked against the pinned version, and a request written by hand for hostile input.

What is measured is the service a user runs (``xc serve --version N``); nothing here is used when serving.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.measure import CpuMeter, free_port, rss_mb

#: where ``xc serve`` runs from (the checkout holding xc_core: its relative paths are the repository's)
REPO = Path(__file__).resolve().parents[2]
HEADERS = {"Content-Type": "application/json"}


# -- the registry ---------------------------------------------------------------------------------------------


def registry_targets(home: Path, dataset: str, wanted: list[str]) -> list[dict[str, str]]:
    """Per target its method and version: a method's newest version (by its ``method`` tag) or ``champion``."""
    import mlflow

    from xc_core.tracking.registry import CHAMPION, champion_version, model_name
    from xc_core.tracking.store import tracking_uri

    uri = tracking_uri(home)
    versions = mlflow.MlflowClient(uri).search_model_versions(f"name='{model_name(dataset)}'")
    newest: dict[str, Any] = {}
    v: Any
    for v in versions:
        method = v.tags.get("method", "")
        if method not in newest or int(v.version) > int(newest[method].version):
            newest[method] = v
    targets = []
    for target in wanted:
        if target == CHAMPION:
            v = champion_version(dataset, uri)
            if v is None:
                raise SystemExit(f"{model_name(dataset)} in {home} has no {CHAMPION} alias: run `xc promote` first")
        elif target in newest:
            v = newest[target]
        else:
            raise SystemExit(f"{model_name(dataset)} in {home} has no version of {target!r}; registered methods: "
                             f"{', '.join(sorted(newest)) or 'none'} (register it with `xc promote`)")
        targets.append({"target": target, "method": v.tags.get("method", ""), "version": str(v.version)})
    return targets


# -- the server -----------------------------------------------------------------------------------------------


def http_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class ServeProcess:
    """``xc serve --version N`` in a subprocess: started on a free port, ready, stopped by PID."""

    def __init__(self, home: Path, dataset: str, version: str, ready_timeout_s: float,
                 options: tuple[str, ...] = ()) -> None:
        self.home, self.dataset, self.version, self.ready_timeout_s = home, dataset, version, ready_timeout_s
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="bench-serve-", suffix=".log", delete=False)
        xc = Path(sys.executable).with_name("xc")
        self.cmd = [str(xc), "serve", "--dataset", dataset, "--home", str(home), "--port", str(self.port),
                    "--version", version, "--quiet", *options]
        self.proc: subprocess.Popen[bytes] | None = None
        self.facts: dict[str, Any] = {}

    def log_tail(self, lines: int = 15) -> str:
        """The end of the server's log (the file stays behind when the server failed, for the whole story)."""
        tail = Path(self.log.name).read_text(errors="replace").splitlines()[-lines:]
        return "\n".join([*tail, f"(log: {self.log.name})"])

    def __enter__(self) -> ServeProcess:
        started = time.perf_counter()
        self.proc = subprocess.Popen(self.cmd, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = started + self.ready_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"xc serve exited with {self.proc.returncode} before it was ready:\n"
                                   f"{self.log_tail()}")
            try:
                status, body = http_get(self.port, "/ready", timeout=2)
                if status == 200:
                    break
            except OSError:
                pass  # not listening yet
            if time.perf_counter() > deadline:
                self.stop()
                raise RuntimeError(f"xc serve not ready within {self.ready_timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(0.25)
        ready = json.loads(body)
        if str(ready.get("version")) != self.version:
            self.stop()
            raise RuntimeError(f"asked for v{self.version}, /ready says {ready}")
        self.facts = {"pid": self.proc.pid, "ready_seconds": round(time.perf_counter() - started, 2),
                      "labels_in_index": ready.get("labels")}
        return self

    def peak_rss_mb(self) -> float | None:
        """The server's own peak resident memory (VmHWM), MiB; None once it has exited."""
        return rss_mb(self.proc.pid, "VmHWM") if self.proc is not None else None

    def stop(self) -> None:
        """SIGTERM (uvicorn's graceful shutdown), then SIGKILL if it has not exited in 20 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        started = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
            killed = False
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            killed = True
        self.facts.update({"stop_seconds": round(time.perf_counter() - started, 2), "killed": killed,
                           "exit_code": self.proc.returncode})

    def __exit__(self, *_exc: object) -> None:
        self.facts.setdefault("peak_rss_mb", self.peak_rss_mb())
        self.stop()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


# -- the load -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    name: str
    clients: int
    batch: int  # queries per request: 1 sends {"query"}, more sends {"queries"}
    max_requests: int


def bodies(pool: list[str], phase: Phase, k: int, n: int, seed: int) -> list[bytes]:
    """``n`` request bodies, the same for every target (a phase's draw depends on the seed and the phase only)."""
    rng = np.random.default_rng([seed, phase.clients, phase.batch])
    picks = rng.integers(0, len(pool), size=(n, phase.batch))
    if phase.batch == 1:
        return [json.dumps({"query": pool[i], "k": k}).encode() for i in picks[:, 0]]
    return [json.dumps({"queries": [pool[i] for i in row], "k": k}).encode() for row in picks]


def send(conn: http.client.HTTPConnection, body: bytes) -> tuple[int | str, bytes]:
    try:
        conn.request("POST", "/predict", body, HEADERS)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException) as exc:
        conn.close()  # the next request reconnects
        return type(exc).__name__, b""


def check(status: int | str, data: bytes, n_queries: int, k: int, version: str) -> tuple[str | None, bool]:
    """(error kind or None, short answer?): a 200 must be the pinned version answering every query it was sent."""
    if status != 200:
        return str(status), False
    try:
        answer = json.loads(data)
        results = answer["results"]
    except (ValueError, KeyError, TypeError):
        return "bad_body", False
    if str(answer.get("version")) != version:
        return "wrong_version", False
    if len(results) != n_queries:
        return "wrong_result_count", False
    return None, any(len(r.get("labels", [])) < k for r in results)


def batch_metrics(port: int) -> tuple[float, float]:
    """(queries, model calls) so far, from /metrics: how much the batcher coalesced concurrent requests."""
    _, text = http_get(port, "/metrics")
    values = {}
    for line in text.decode().splitlines():
        if line.startswith(("xc_serve_batch_queries_sum", "xc_serve_batch_queries_count")):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values.get("xc_serve_batch_queries_sum", 0.0), values.get("xc_serve_batch_queries_count", 0.0)


def run_phase(server: ServeProcess, phase: Phase, payloads: list[bytes], warmup: int, seconds: float,
              k: int) -> dict[str, Any]:
    """Drive one phase; per request (latency, error kind, short answer). Clients take the next body from a
    shared counter until the request budget or the time is spent; the clock starts once all are warm."""
    lock, position = threading.Lock(), [0]
    clock: dict[str, Any] = {}
    per_client: list[list[tuple[float, str | None, bool]]] = [[] for _ in range(phase.clients)]
    warm_errors = [0]
    meter = CpuMeter(server.proc.pid)  # type: ignore[union-attr]

    def start_clock() -> None:  # runs once, when every client is warm, before any is released
        clock["metrics"] = batch_metrics(server.port)
        clock["cpu"] = meter.sample()
        clock["deadline"] = time.perf_counter() + seconds

    barrier = threading.Barrier(phase.clients, action=start_clock)

    def client(c: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        for w in range(warmup):  # connection opened, the server's per-client paths taken
            status, data = send(conn, payloads[(c * warmup + w) % len(payloads)])
            if check(status, data, phase.batch, k, server.version)[0] is not None:
                with lock:
                    warm_errors[0] += 1
        barrier.wait()
        mine = per_client[c]
        while True:
            with lock:
                i = position[0]
                position[0] += 1
            if i >= phase.max_requests or time.perf_counter() >= clock["deadline"]:
                break
            started = time.perf_counter()
            status, data = send(conn, payloads[i])
            latency = time.perf_counter() - started
            mine.append((latency, *check(status, data, phase.batch, k, server.version)))
        conn.close()

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(phase.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu_after = meter.sample()
    wall = cpu_after[0] - clock["cpu"][0]
    queries_after, calls_after = batch_metrics(server.port)
    records = [r for mine in per_client for r in mine]
    ok_ms = np.array([1000 * lat for lat, err, _ in records if err is None])
    errors: dict[str, int] = {}
    for _, err, _ in records:
        if err is not None:
            errors[err] = errors.get(err, 0) + 1
    calls = calls_after - clock["metrics"][1]
    p50, p95, p99 = (np.percentile(ok_ms, [50, 95, 99]) if len(ok_ms) else (float("nan"),) * 3)
    return {
        "phase": phase.name, "clients": phase.clients, "queries_per_request": phase.batch,
        "requests": len(records), "ok": int(len(ok_ms)), "errors": sum(errors.values()), "error_kinds": errors,
        "warmup_errors": warm_errors[0], "short_answers": sum(1 for *_, short in records if short),
        "seconds": round(wall, 2), "p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2),
        "p99_ms": round(float(p99), 2), "max_ms": round(float(ok_ms.max()), 2) if len(ok_ms) else None,
        "requests_per_s": round(len(ok_ms) / wall, 1), "queries_per_s": round(len(ok_ms) * phase.batch / wall, 1),
        # the batcher's work: >1 query per model call at 1 client means requests were answered in one pass
        "queries_per_model_call": round((queries_after - clock["metrics"][0]) / calls, 1) if calls else None,
        "cpu_cores_used": CpuMeter.cores(clock["cpu"], cpu_after),
        "bounded_by": "requests" if len(records) >= phase.max_requests else "seconds",
    }


# -- a request written by hand --------------------------------------------------------------------------------


def raw_post(port: int, headers: dict[str, str], send: Any, timeout: float = 30) -> tuple[int, Any, bytes]:
    """One request written by hand (``send(connection)`` writes the body): status, headers, body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.putrequest("POST", "/predict", skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        try:
            send(connection)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the body was all sent: the answer is waiting in the socket
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()
