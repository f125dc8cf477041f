"""Serving the champion (issue #30): the registered model answers ads by itself, `mlflow models serve` and
`xc serve` answer over HTTP, a promotion swaps versions under traffic, bad input is a one-line 4xx, a corrupt
version keeps the old one serving. Servers run as processes on free loopback ports and are stopped by PID."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from xc_core.datasets.container import XCDataset
from xc_core.measure import free_port

DATASET, PROFILE = "synthetic", "tiny"


@pytest.fixture(scope="module")
def home(tiny_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home of its own (the session's data set and anchors, no registry): v1 = pretrained (champion),
    v2 = pretrained-clf with its fusion forced to alpha 0.5 (no other channel), so the two versions rank
    differently."""
    from xc_core.evaluation.fallback import FallbackPolicy
    from xc_core.paths import anchors_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.train import train_method
    from xc_core.tracking.registry import promote_if_better, register_evaluated

    home = tmp_path_factory.mktemp("serve") / "home"
    shutil.copytree(tiny_home, home, ignore=shutil.ignore_patterns("events", "simulate", "graphs", "mlflow",
                                                                    "models", "indexes", "eval", "serving"))
    data = XCDataset.load(anchors_dir(home, DATASET))
    profile = get_profile(PROFILE)
    # one fusion, no grid to search: α 0.5 on W and the label text, every other channel at weight 0
    forced = {"alphas": (0.5,), "fallback": FallbackPolicy(enabled=False), "untrained_offsets": (0.0,),
              "linear_weights": (0.0,), "memory_weights": (0.0,), "popularity_weights": (0.0,), "name_weights": (0.0,),
              "tail_offsets": (0.0,), "lexical": profile.classifier.lexical.model_copy(update={"weights": (0.0,)})}
    clf_profile = profile.model_copy(update={"classifier": profile.classifier.model_copy(update=forced)})
    for method, method_profile in (("pretrained", profile), ("pretrained-clf", clf_profile)):
        train_method(data, method, method_profile, home)
        for split in ("validation", "test"):
            evaluate_method(data, method, PROFILE, home, split=split)
        registered = register_evaluated(home, DATASET, method, PROFILE)
        if method == "pretrained":
            assert promote_if_better(DATASET, registered["version"], registered["tracking_uri"], home=home).promote
    return home


def _uri(home: Path) -> str:
    from xc_core.tracking.store import tracking_uri

    return tracking_uri(home)


def _set_champion(home: Path, version: str) -> None:
    import mlflow

    from xc_core.tracking.registry import CHAMPION, model_name

    mlflow.MlflowClient(_uri(home)).set_registered_model_alias(model_name(DATASET), CHAMPION, version)


def _call(url: str, body: bytes | None = None, timeout: float = 30) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"},
                                     method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        raw, status = error.read(), error.code
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw.decode()


def _wait(url: str, process: subprocess.Popen[str], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"server exited ({process.returncode}): {error[-3000:]}")
        try:
            if _call(url, timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} not up after {seconds} s")


def _stop(process: subprocess.Popen[str]) -> None:
    """Stop a server started by a test by its PID (its process group: uvicorn workers too)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


def _start(command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)


@pytest.fixture(scope="module")
def xc_server(home: Path) -> Iterator[str]:
    """`xc serve` on the home, following @champion every 0.3 s; its base URL."""
    port = free_port()
    process = _start([sys.executable, "-m", "xc_core.cli", "serve", "--dataset", DATASET, "--home", str(home),
                      "--port", str(port), "--poll-seconds", "0.3", "--max-queries", "8", "--max-chars", "64",
                      "--quiet"])
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(f"{url}/ready", process)
        yield url
    finally:
        _stop(process)
    assert not (home / "serving" / "synthetic" / f"pid-{process.pid}").exists(), "a stopped server left its copy"


def _predict(url: str, payload: Any) -> tuple[int, Any]:
    return _call(f"{url}/predict", json.dumps(payload).encode())


def _expected(home: Path, version: str, texts: list[str], k: int) -> list[list[str]]:
    """Label ids the registered version answers, loaded in this process (the reference for the HTTP answers)."""
    from xc_core.tracking.registry import model_name
    from xc_core.tracking.served import load_registered
    from xc_core.tracking.store import activate

    activate(_uri(home))
    model = load_registered(f"models:/{model_name(DATASET)}/{version}")
    assert model is not None
    return [[row["label_id"] for row in answer["labels"]] for answer in model.answer(texts, k)]


def test_the_registered_model_answers_top_k_ads_from_a_copy_on_a_machine_without_the_home(home: Path,
                                                                                          tmp_path: Path) -> None:
    import mlflow

    from xc_core.serving import predict_from_champion
    from xc_core.tracking.store import activate

    query = XCDataset.load(home / "datasets" / DATASET).test_texts[0]
    served = predict_from_champion(DATASET, query, home, k=5)
    activate(_uri(home))
    copy = Path(mlflow.artifacts.download_artifacts("models:/xc-encoder-synthetic@champion",
                                                    dst_path=str(tmp_path / "copy")))
    hidden = home.with_name("hidden")
    home.rename(hidden)  # nothing of the home is reachable while the copy answers
    try:
        code = (f"import json, mlflow; m = mlflow.pyfunc.load_model({str(copy)!r}); "
                f"print(json.dumps([m.predict([{query!r}], params={{'k': 5}}), "
                f"m.predict([{query!r}], params={{'output': 'embeddings'}})]))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                              env={k: v for k, v in os.environ.items() if k not in ("XC_HOME", "MLFLOW_TRACKING_URI")})
    finally:
        hidden.rename(home)
    assert done.returncode == 0, done.stderr[-2000:]
    labels, embedding = json.loads(done.stdout.strip().splitlines()[-1])
    assert [row["label_id"] for row in labels[0]["labels"]] == [row["label_id"] for row in served["labels"]]
    assert labels[0]["labels"][0]["label"] == served["labels"][0]["label"] and len(labels[0]["labels"]) == 5
    assert len(embedding[0]["embedding"]) > 0 and embedding[0]["query"] == query


def test_the_served_encoder_runs_on_onnx_runtime_and_ranks_as_torch_does(home: Path) -> None:
    from xc_core.tracking.served import load_registered
    from xc_core.tracking.store import activate

    activate(_uri(home))
    model = load_registered("models:/xc-encoder-synthetic/2")  # pretrained-clf: the fused search too
    assert model is not None
    assert model.info["encoder_runtime"] == "onnxruntime", model.info.get("onnx")
    python_model = model.embedder.unwrap_python_model()
    encoder = python_model.encoder
    assert encoder.onnx is not None
    texts = XCDataset.load(home / "datasets" / DATASET).test_texts[:40]
    with_onnx = model.search(texts, 10)
    # served on ONNX, the transformer was never built (its weights are in the graph), and its folder is gone: asked
    # for torch, the encoder says so instead of failing inside transformers
    assert encoder._model is None
    encoder.use_onnx(None)
    with pytest.raises(FileNotFoundError, match="load the model again"):
        encoder.encode(texts[:1])
    # the same served search with the version's encoder on torch
    from xc_core.encoders.text import encoder_for

    python_model.encoder = encoder_for(_registered_encoder(home, "2"), max_length=encoder.cfg.max_length)
    with_torch = model.search(texts, 10)
    from xc_core.index.ties import rankings_agree

    assert rankings_agree(with_torch, with_onnx).all()  # the same labels up to ties, not the same last bits


def _registered_encoder(home: Path, version: str) -> Path:
    """The encoder folder of a registered version's method model, downloaded into the home."""
    import mlflow

    out = home / f"registered-encoder-v{version}"
    if not out.exists():
        served = mlflow.artifacts.download_artifacts(f"models:/xc-encoder-synthetic/{version}",
                                                     tracking_uri=_uri(home), dst_path=str(out))
        assert Path(served, "artifacts", "model", "artifacts", "encoder").is_dir()
    return out / "artifacts" / "model" / "artifacts" / "encoder"


def test_mlflow_models_serve_on_the_champion_answers_ads(home: Path) -> None:
    port = free_port()
    venv_bin = str(Path(sys.executable).parent)  # mlflow starts `uvicorn` from PATH
    process = _start([sys.executable, "-m", "mlflow", "models", "serve", "-m", "models:/xc-encoder-synthetic@champion",
                      "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port)],
                     env={"MLFLOW_TRACKING_URI": _uri(home), "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}"})
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(f"{url}/ping", process)
        query = XCDataset.load(home / "datasets" / DATASET).test_texts[1]
        status, body = _call(f"{url}/invocations", json.dumps({"inputs": [query], "params": {"k": 3}}).encode())
        assert status == 200, body
        (answer,) = body["predictions"]
        assert answer["query"] == query and len(answer["labels"]) == 3
        assert [row["label_id"] for row in answer["labels"]] == _expected(home, "1", [query], 3)[0]
        status, body = _call(f"{url}/invocations", json.dumps({"inputs": [query], "params": {"k": 0}}).encode())
        assert status == 400 and "k must be an integer from 1 to" in body["message"]
    finally:
        _stop(process)


def test_xc_serve_answers_single_and_batched_queries_and_reports_itself(home: Path, xc_server: str) -> None:
    texts = XCDataset.load(home / "datasets" / DATASET).test_texts[:3]
    status, single = _predict(xc_server, {"query": texts[0], "k": 4})
    assert status == 200 and single["version"] == "1" and single["method"] == "pretrained"
    assert [row["label_id"] for row in single["results"][0]["labels"]] == _expected(home, "1", texts[:1], 4)[0]
    status, batch = _predict(xc_server, {"queries": texts})
    assert status == 200 and [r["query"] for r in batch["results"]] == texts
    assert all(len(r["labels"]) == 10 for r in batch["results"])  # the default k
    assert _call(f"{xc_server}/health") == (200, {"status": "ok", "model": "xc-encoder-synthetic", "version": "1"})
    status, ready = _call(f"{xc_server}/ready")
    assert status == 200 and ready["ready"] and ready["version"] == "1"
    with urllib.request.urlopen(f"{xc_server}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert 'xc_serve_requests_total{endpoint="predict",status="200"}' in metrics
    assert 'xc_serve_model_version{method="pretrained",model="xc-encoder-synthetic"} 1.0' in metrics
    assert "xc_serve_request_seconds_bucket" in metrics and "xc_serve_queries_total" in metrics
    from xc_core.serving import live_status

    port = int(xc_server.rsplit(":", 1)[1])  # what the promotion's Dagster metadata reports about serving
    assert live_status(DATASET, home, port)["live_version"] == "1"
    assert live_status(DATASET, home, free_port())["live_version"] == "not running"


@pytest.mark.parametrize(("body", "status", "says"), [
    (b'{"query": "shoes"', 400, "malformed JSON"),
    (b'["shoes"]', 422, "must be a JSON object"),
    (b'{"query": ""}', 422, "query is empty"),
    (b'{"query": 7}', 422, "query must be a string, got a number"),
    (b'{"queries": []}', 422, "non-empty list of strings"),
    (b'{"queries": ["shoes", null]}', 422, "queries[1] must be a string, got null"),
    (b'{"queries": ["shoes"], "query": "shoes"}', 422, "exactly one of"),
    (b'{"query": "shoes", "top": 3}', 422, "unknown field(s) 'top'"),
    (b'{"query": "shoes", "k": 0}', 422, "'k' must be an integer from 1 to"),
    (b'{"query": "shoes", "k": 100000}', 422, "'k' must be an integer from 1 to"),
    (b'{"query": "shoes", "k": "5"}', 422, "'k' must be an integer"),
    (b'{"queries": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]}', 413, "9 queries in one request, the limit is 8"),
    (json.dumps({"query": "shoe " * 20}).encode(), 413, "query has 100 characters, the limit is 64"),
])
def test_bad_input_is_a_4xx_with_a_one_line_reason(xc_server: str, body: bytes, status: int, says: str) -> None:
    got, answer = _call(f"{xc_server}/predict", body)
    assert got == status and says in answer["error"] and "\n" not in answer["error"], answer


def test_a_promotion_under_traffic_swaps_versions_without_a_failed_or_mixed_response(home: Path,
                                                                                    xc_server: str) -> None:
    texts = XCDataset.load(home / "datasets" / DATASET).test_texts[:50]
    expected = {v: _expected(home, v, list(texts), 5) for v in ("1", "2")}
    differ = [i for i in range(len(texts)) if expected["1"][i] != expected["2"][i]]
    assert differ, "the two versions must rank some query differently for the test to see a mix"
    probe = [texts[differ[0]], texts[0]]
    answers: list[tuple[int, Any]] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            answers.append(_predict(xc_server, {"queries": probe, "k": 5}))

    thread = threading.Thread(target=client)
    thread.start()
    try:
        time.sleep(0.5)
        _set_champion(home, "2")  # the promotion's one atomic step
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(a[1].get("version") == "2" for a in answers[-3:]):
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        stop.set()
        thread.join(timeout=30)
        _set_champion(home, "1")
    assert all(status == 200 for status, _ in answers), [a for a in answers if a[0] != 200][:3]
    versions = [body["version"] for _, body in answers]
    assert versions[0] == "1" and versions[-1] == "2", versions
    assert versions == sorted(versions), "once the new version answered, the old one never did again"
    for _, body in answers:  # each response is wholly the answer of the version it names
        got = [[row["label_id"] for row in r["labels"]] for r in body["results"]]
        reference = expected[body["version"]]
        assert got == [reference[differ[0]], reference[0]], f"a response of v{body['version']} is not its answer"
    _wait_version(xc_server, "1")


def _wait_version(url: str, version: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, ready = _call(f"{url}/ready")
        if status == 200 and ready.get("version") == version:
            return dict(ready)
        time.sleep(0.2)
    raise AssertionError(f"{url} still not on v{version}: {ready}")


def test_a_corrupt_version_at_a_swap_keeps_the_old_one_serving_and_says_why(home: Path, xc_server: str) -> None:
    import mlflow

    from xc_core.tracking.registry import register, served_model
    from xc_core.training.record import TrainedModel

    _wait_version(xc_server, "1")
    trained = TrainedModel.of(home, DATASET, "pretrained", PROFILE)
    logged = served_model(home, DATASET, "pretrained", PROFILE, trained, "test")
    version = register(logged.model_uri, DATASET, {"method": "pretrained", "profile": PROFILE}, _uri(home))
    stored = Path(mlflow.MlflowClient(_uri(home)).get_logged_model(logged.model_id).artifact_location.removeprefix(
        "file://"))
    (stored / "artifacts" / "index" / "index.faiss").write_bytes(b"not a faiss index")
    query = XCDataset.load(home / "datasets" / DATASET).test_texts[0]
    _set_champion(home, version)
    try:
        deadline = time.monotonic() + 60
        ready: dict[str, Any] = {}
        while time.monotonic() < deadline and "last_error" not in ready:
            ready = _call(f"{xc_server}/ready")[1]
            time.sleep(0.2)
        assert ready["version"] == "1" and ready["ready"], ready
        assert "checksum does not match" in ready["last_error"] and "v1 keeps serving" in ready["last_error"]
        status, body = _predict(xc_server, {"query": query})
        assert status == 200 and body["version"] == "1"
        with urllib.request.urlopen(f"{xc_server}/metrics", timeout=10) as response:
            assert "xc_serve_swap_failures_total 1.0" in response.read().decode()
    finally:
        _set_champion(home, "1")


def test_xc_eval_on_a_corrupt_index_prints_one_line_and_exits_2(home: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from xc_core.cli import main
    from xc_core.paths import index_dir

    copy = tmp_path / "home"
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("serving"))
    (index_dir(copy, DATASET, "pretrained", PROFILE) / "index.faiss").write_bytes(b"corrupt")
    capsys.readouterr()
    assert main(["eval", "--dataset", DATASET, "--method", "pretrained", "--profile", PROFILE, "--home", str(copy),
                 "--quiet"]) == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr, stderr[-2000:]
    (line,) = [line for line in stderr.splitlines() if line.startswith("xc eval: error:")]
    assert "checksum does not match its manifest" in line and "xc index" in line


def test_xc_serve_refuses_a_public_address_and_an_unknown_model(home: Path, tmp_path: Path) -> None:
    from xc_core.serving.server import check_loopback, start_live

    with pytest.raises(ValueError, match="loopback address only"):
        check_loopback("0.0.0.0")
    assert check_loopback("127.0.0.1") == "127.0.0.1"
    with pytest.raises(LookupError, match="is not in the registry of"):
        start_live(DATASET, tmp_path)


# -- hostile input and overload (issue #41) -----------------------------------------------------------------------
def _raw(url: str, send: Any, headers: dict[str, str]) -> tuple[int, Any, Any]:
    """A request written by hand (``send(connection)`` writes the body; the hostile-input benchmark's client):
    the status, headers (case-insensitive) and JSON body, also when the server answers before the body is sent."""
    from xc_core.serving.load import raw_post

    status, answer_headers, body = raw_post(int(url.rsplit(":", 1)[1]), headers, send)
    return status, answer_headers, json.loads(body)


def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(xc_server: str) -> None:
    status, _, answer = _raw(xc_server, lambda _c: None, {"Content-Type": "application/json",
                                                         "Content-Length": str(1 << 30)})
    assert status == 413 and "1073741824 bytes is over the limit" in answer["error"], answer


def test_a_chunked_body_over_the_limit_is_refused_while_it_streams(xc_server: str) -> None:
    """No Content-Length: the server counts while reading and stops at the limit (1 MiB) instead of buffering."""
    chunk = b" " * 65536

    def send(connection: Any) -> None:
        for _ in range(20):  # 1.25 MiB, as HTTP/1.1 chunks
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        connection.send(b"0\r\n\r\n")

    status, _, answer = _raw(xc_server, send, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    assert status == 413 and "while it was streaming in" in answer["error"], answer


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"query": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"])
def test_nested_json_is_a_400_not_a_crash(xc_server: str, body: bytes) -> None:
    status, answer = _call(f"{xc_server}/predict", body)
    assert status == 400 and "nested deeper than the parser allows" in answer["error"], answer
    assert _predict(xc_server, {"query": "shoes"})[0] == 200  # and the service goes on


def test_a_body_that_is_not_json_is_a_415(xc_server: str) -> None:
    status, _, answer = _raw(xc_server, lambda c: c.send(b"query=shoes"),
                             {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": "11"})
    assert status == 415 and "is not JSON" in answer["error"], answer


def test_overload_is_refused_with_retry_after_and_counted(home: Path) -> None:
    """A queue of one and a 50 ms deadline under 12 clients sending full batches: every answer is a 200 or a
    one-line 503 with Retry-After, some are refused, and /metrics counts each refusal by its reason. A body that
    arrives after the deadline is overload too (503, not 408: under load the server reads bodies late); only a
    body slower than the body timeout is the client's 408."""
    port = free_port()
    process = _start([sys.executable, "-m", "xc_core.cli", "serve", "--dataset", DATASET, "--home", str(home),
                      "--port", str(port), "--max-queue", "1", "--deadline-ms", "50", "--max-batch", "8",
                      "--body-timeout-ms", "1000", "--quiet"])
    url = f"http://127.0.0.1:{port}"
    texts = list(XCDataset.load(home / "datasets" / DATASET).test_texts[:64])
    answers: list[tuple[int, Any, Any]] = []
    try:
        _wait(f"{url}/ready", process)

        def client(offset: int) -> None:
            for _ in range(5):
                body = json.dumps({"queries": texts[offset:offset + 32], "k": 5}).encode()
                answers.append(_raw(url, lambda c, b=body: c.send(b),
                                    {"Content-Type": "application/json", "Content-Length": str(len(body))}))

        threads = [threading.Thread(target=client, args=(i % 32,)) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        body = json.dumps({"query": texts[0]}).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}

        def late(delay: float) -> Any:
            def send(connection: Any) -> None:
                time.sleep(delay)
                connection.send(body)
            return send

        past_deadline = _raw(url, late(0.3), headers)  # 0.3 s: past the 50 ms deadline, within the body timeout
        stalled = _raw(url, late(2.0), headers)  # past the 1 s body timeout
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    finally:
        _stop(process)
    assert past_deadline[0] == 503 and "deadline" in past_deadline[2]["error"], past_deadline[2]
    assert stalled[0] == 408 and stalled[2]["error"] == "the request body did not arrive within 1 s", stalled[2]
    answers.append(past_deadline)
    refused = [a for a in answers if a[0] == 503]
    assert len(answers) == 61 and {a[0] for a in answers} <= {200, 503}, {a[0] for a in answers}
    assert refused, "12 clients on a queue of one and a 50 ms deadline must see a refusal"
    assert all(a[1].get("Retry-After") == "1" and "\n" not in a[2]["error"] for a in refused), refused[:2]
    counted = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                  if line.startswith("xc_serve_refused_total{"))
    assert counted == len(refused), (counted, len(refused))


@pytest.mark.parametrize("option", ["--deadline-ms", "--body-timeout-ms"])
def test_a_time_limit_that_is_not_positive_is_refused_by_the_parser_naming_the_option(
        option: str, capsys: pytest.CaptureFixture[str]) -> None:
    from xc_core.cli import build_parser

    for value in ("0", "-5", "soon"):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(["serve", "--dataset", DATASET, option, value])
        assert exit_.value.code == 2
        assert f"argument {option}: '{value}': a positive number of milliseconds" in capsys.readouterr().err
    assert getattr(build_parser().parse_args(["serve", "--dataset", DATASET, option, "250"]),
                   option[2:].replace("-", "_")) == 250.0
