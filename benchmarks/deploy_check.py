"""Deploy check (issue #41, item 2): the registered served model loads and answers top-k ads in a FRESH virtualenv
built from nothing but the model folder's own ``requirements.txt`` — no xc checkout, no ``pip install -e .``, no
PYTHONPATH, run from a folder outside the repository.

    .venv/bin/python benchmarks/deploy_check.py --scratch /tmp/xc-deploy         # builds a tiny registered model
    .venv/bin/python benchmarks/deploy_check.py --home ~/xc [--model-uri models:/xc-encoder-synthetic@champion] \
        [--scratch DIR] [--k 5] [--queries 8] [--no-serve] [--docker-build] [--keep]

Without ``--home`` it builds what ``tests/serving/test_serve.py`` builds, in ``<scratch>/home``: the tiny simulated
``synthetic`` data set, ``pretrained`` and ``pretrained-clf`` trained on the ``tiny`` profile (a random tiny BERT),
``pretrained-clf`` evaluated, registered and promoted — the most complete load path (label index, classifier index,
fusion, lexical channel, ONNX encoder). Then, each step timed:

1. download the registered model folder (``mlflow.artifacts.download_artifacts``);
2. answer the data set's first test queries in this process, with the checkout's xc_core (the reference);
3. ``python -m venv`` (no system site-packages), install the model's ``python_env.yaml`` build dependencies, then
   ``pip install -r <model>/requirements.txt`` (the machine's package index settings, nothing from the checkout);
4. in that venv, from ``<scratch>``, with PATH, HOME and the index settings only: ``mlflow.pyfunc.load_model`` and
   ``predict(queries, params={"k": k})``; it reports where xc_core was imported from (the model's ``code/``) and
   any module loaded from the checkout (must be none);
5. unless ``--no-serve``: the venv's ``mlflow models serve --env-manager local`` on the folder answers one query
   over HTTP;
6. the venv's ``mlflow models generate-dockerfile`` on the folder; ``--docker-build`` tries ``docker build`` once
   and records how it ends.

Writes benchmarks/results/deploy_check.json: timings, sizes (model folder, its code, the venv), the requirements,
the answers and whether they equal the in-checkout model's (label ids; largest score difference). The venv and the
downloaded copies are removed at the end unless ``--keep``; a home given with ``--home`` is never touched.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
DATASET = "synthetic"
#: the environment the venv's processes see: how to reach the package index (this machine's settings), no more
PASSED_ENV = ("HOME", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY",
              "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")

#: runs inside the fresh venv: loads the folder, answers, and says where every module came from
PROBE = r'''
import json, sys, time
start = time.perf_counter()
import mlflow
folder, k, queries_file, repo = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
queries = json.loads(open(queries_file).read())
model = mlflow.pyfunc.load_model(folder)
loaded = time.perf_counter()
answers = model.predict(queries, params={"k": k})
answered = time.perf_counter()
import xc_core
served = model.unwrap_python_model().model
files = [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
print(json.dumps({"answers": answers, "load_s": loaded - start, "predict_s": answered - loaded,
                  "xc_core_from": xc_core.__file__, "from_checkout": sorted(f for f in files if f.startswith(repo)),
                  "encoder_runtime": served.info.get("encoder_runtime"), "python": sys.version.split()[0],
                  "mlflow": mlflow.__version__}))
'''


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, help="an xc home with a registered model (default: build a tiny one)")
    parser.add_argument("--model-uri", default=f"models:/xc-encoder-{DATASET}@champion")
    parser.add_argument("--scratch", type=Path, default=None,
                        help="work folder outside the repository (default: a new one in the system's temp)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--queries", type=int, default=8, help="test queries of the data set to answer")
    parser.add_argument("--no-serve", action="store_true", help="skip `mlflow models serve` from the venv")
    parser.add_argument("--docker-build", action="store_true", help="try `docker build` on the generated Dockerfile")
    parser.add_argument("--keep", action="store_true", help="keep the venv and the model copies")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "deploy_check.json")
    return parser.parse_args()


def scratch_folder(given: Path | None) -> Path:
    """The work folder: it must lie outside the checkout, or the check proves nothing."""
    folder = (given or Path(tempfile.mkdtemp(prefix="xc-deploy-"))).resolve()
    if folder == REPO or REPO in folder.parents:
        raise SystemExit(f"--scratch {folder} is inside the checkout {REPO}: pick a folder outside it")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Timer:
    """Seconds per named step, in order."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def step(self, name: str, function: Any, *args: Any) -> Any:
        start = time.perf_counter()
        result = function(*args)
        self.seconds[name] = round(time.perf_counter() - start, 2)
        print(f"{name}: {self.seconds[name]:.1f} s", file=sys.stderr, flush=True)
        return result


# -- the model and the reference answers (this process, the checkout's xc_core) ------------------------------


def build_tiny_registered(home: Path) -> None:
    """The tiny registered model of tests/serving/test_serve.py: pretrained-clf, registered and promoted."""
    from xc_core.datasets.container import XCDataset
    from xc_core.paths import anchors_dir
    from xc_core.profiles import get_profile
    from xc_core.simulate.pipeline import simulate_into_store
    from xc_core.stages.anchor_sets import materialize_anchor_sets
    from xc_core.stages.dataset import materialize_dataset
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.train import train_method
    from xc_core.tracking.registry import promote_if_better, register_evaluated

    if home.exists():
        raise SystemExit(f"{home} exists: remove it, or pass it as --home to check its registered model")
    simulate_into_store("tiny", 0, home)
    dataset, _ = materialize_dataset(DATASET, home)
    profile = get_profile("tiny")
    materialize_anchor_sets(dataset, home, profile, use_encoder=False)
    data = XCDataset.load(anchors_dir(home, DATASET))
    for method in ("pretrained", "pretrained-clf"):  # -clf reuses the encoder pretrained trains
        train_method(data, method, profile, home)
    for split in ("validation", "test"):  # the gate decides on the first
        evaluate_method(data, "pretrained-clf", "tiny", home, split=split)
    registered = register_evaluated(home, DATASET, "pretrained-clf", "tiny")
    promote_if_better(DATASET, registered["version"], registered["tracking_uri"], home=home)


def download(home: Path, model_uri: str, out: Path) -> Path:
    import mlflow

    from xc_core.tracking.store import activate, tracking_uri

    activate(tracking_uri(home))
    return Path(mlflow.artifacts.download_artifacts(model_uri, dst_path=str(out)))


def test_queries(home: Path, n: int) -> list[str]:
    from xc_core.datasets.container import XCDataset
    from xc_core.paths import dataset_dir

    return list(XCDataset.load(dataset_dir(home, DATASET)).test_texts[:n])


def reference_answers(folder: Path, queries: list[str], k: int) -> list[dict[str, Any]]:
    """The same folder answered here. xc_core is imported from the checkout first, so the model's own copy of it
    (put on sys.path by MLflow at load) is not the code that answers."""
    import mlflow

    import xc_core.tracking.served

    if REPO not in Path(xc_core.tracking.served.__file__).resolve().parents:
        raise SystemExit(f"xc_core is imported from {xc_core.tracking.served.__file__}, not this checkout {REPO}: "
                         "run the check with the checkout's .venv")
    return list(mlflow.pyfunc.load_model(str(folder)).predict(queries, params={"k": k}))


# -- the fresh venv ---------------------------------------------------------------------------------------------


def clean_env(venv: Path) -> dict[str, str]:
    """PATH with the venv first, HOME and how to reach the package index; no PYTHONPATH, XC_HOME, MLflow URI."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.update({name: value for name, value in os.environ.items() if name.startswith("PIP_")})
    env["PATH"] = f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def run(command: list[str], cwd: Path, env: dict[str, str], log: Path, timeout: float = 1800) -> str:
    """Run to the end; stdout returned, both streams appended to ``log``; a failure raises with the log's tail."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}\n")
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} … exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def build_dependencies(folder: Path) -> list[str]:
    """What MLflow's own virtualenv manager installs before the requirements (``python_env.yaml``)."""
    import yaml

    return [str(d) for d in yaml.safe_load((folder / "python_env.yaml").read_text()).get("build_dependencies", [])]


def make_venv(venv: Path, cwd: Path, log: Path) -> None:
    """``python -m venv`` from this interpreter's base Python: no system site-packages, so nothing of .venv."""
    run([sys.executable, "-m", "venv", str(venv)], cwd, clean_env(venv), log)


def pip_install(venv: Path, folder: Path, cwd: Path, log: Path) -> dict[str, Any]:
    env = clean_env(venv)
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "install", *build_dependencies(folder)], cwd, env, log)
    out = run([python, "-m", "pip", "install", "-r", str(folder / "requirements.txt")], cwd, env, log)
    frozen = run([python, "-m", "pip", "freeze"], cwd, env, log).split()
    lines = out.splitlines()
    return {"installed_packages": len(frozen), "wheels_downloaded": sum(ln.lstrip().startswith("Downloading")
                                                                        for ln in lines),
            "wheels_from_pip_cache": sum(ln.lstrip().startswith("Using cached") for ln in lines),
            "wheels_from_local_files": sum(ln.lstrip().startswith("Processing /") for ln in lines),
            "freeze": frozen}


def probe(venv: Path, folder: Path, queries: list[str], k: int, cwd: Path, log: Path) -> dict[str, Any]:
    script, queries_file = cwd / "probe.py", cwd / "queries.json"
    script.write_text(PROBE)
    queries_file.write_text(json.dumps(queries))
    out = run([str(venv / "bin" / "python"), str(script), str(folder), str(k), str(queries_file), str(REPO)],
              cwd, clean_env(venv), log, timeout=600)
    return dict(json.loads(out.strip().splitlines()[-1]))


# -- serving and Docker from the venv ---------------------------------------------------------------------------


def post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def wait_ping(url: str, process: subprocess.Popen[bytes], seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mlflow models serve exited {process.returncode} (see the log)")
        try:
            with urllib.request.urlopen(f"{url}/ping", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"mlflow models serve: {url}/ping not up after {seconds:.0f} s")


def serve(venv: Path, folder: Path, query: str, k: int, cwd: Path, log: Path) -> dict[str, Any]:
    """The venv's ``mlflow models serve`` on the folder answers one query over HTTP; stopped by its PID."""
    from xc_core.measure import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("a") as out:
        process = subprocess.Popen([str(venv / "bin" / "mlflow"), "models", "serve", "-m", str(folder),
                                    "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port)],
                                   cwd=cwd, env=clean_env(venv), stdout=out, stderr=out, start_new_session=True)
    try:
        start = time.perf_counter()
        wait_ping(url, process)
        up = time.perf_counter() - start
        body = post(f"{url}/invocations", {"inputs": [query], "params": {"k": k}})
        return {"startup_s": round(up, 2), "answer": body["predictions"][0]}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def dockerfile(venv: Path, folder: Path, cwd: Path, log: Path, build: bool) -> dict[str, Any]:
    """``mlflow models generate-dockerfile`` from the venv; with ``build``, one ``docker build`` and how it ended."""
    out = cwd / "docker"
    command = [str(venv / "bin" / "mlflow"), "models", "generate-dockerfile", "-m", str(folder), "-d", str(out)]
    run(command, cwd, clean_env(venv), log)
    text = (out / "Dockerfile").read_text()
    result: dict[str, Any] = {"generated": True, "command": " ".join(["mlflow", *command[1:4], "<model>", "-d",
                                                                      "<out>"]),
                              "base_image": next(ln.split()[1] for ln in text.splitlines() if ln.startswith("FROM"))}
    if build:
        done = subprocess.run(["docker", "build", "-t", "xc-served-check", str(out)], capture_output=True, text=True,
                              timeout=1800)
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        result["docker_build"] = {"returncode": done.returncode, "tail": tail}
    return result


# -- the result ---------------------------------------------------------------------------------------------------


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def sizes_mb(folder: Path, venv: Path) -> dict[str, float]:
    return {"model_folder": round(size(folder) / 2**20, 1), "model_code": round(size(folder / "code") / 2**20, 2),
            "venv": round(size(venv) / 2**20, 1)}


def compare(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> dict[str, Any]:
    """Same label ids in the same order for every query, and the largest score difference."""
    ids = [[row["label_id"] for row in a["labels"]] for a in mine] == [[row["label_id"] for row in a["labels"]]
                                                                      for a in theirs]
    diffs = [abs(x["score"] - y["score"]) for a, b in zip(mine, theirs, strict=True)
             for x, y in zip(a["labels"], b["labels"], strict=False)]
    return {"label_ids_equal": ids, "max_score_diff": max(diffs, default=0.0),
            "equal": ids and max(diffs, default=0.0) == 0.0}


def main() -> None:
    args = parse_args()
    scratch = scratch_folder(args.scratch)
    timer, log = Timer(), scratch / "deploy_check.log"
    home = args.home.resolve() if args.home else scratch / "home"
    if args.home is None:
        timer.step("build_tiny_registered_model", build_tiny_registered, home)
    folder = timer.step("download", download, home, args.model_uri, scratch / "model")
    queries = test_queries(home, args.queries)
    reference = timer.step("reference_in_checkout", reference_answers, folder, queries, args.k)
    venv = scratch / "venv"
    timer.step("venv_create", make_venv, venv, scratch, log)
    installed = timer.step("pip_install", pip_install, venv, folder, scratch, log)
    fresh = timer.step("fresh_venv_load_and_predict", probe, venv, folder, queries, args.k, scratch, log)
    served = None if args.no_serve else timer.step("mlflow_models_serve", serve, venv, folder, queries[0], args.k,
                                                    scratch, log)
    docker = timer.step("generate_dockerfile", dockerfile, venv, folder, scratch, log, args.docker_build)
    result = {
        "model_uri": args.model_uri, "k": args.k, "queries": queries, "seconds": timer.seconds,
        "home": str(home) if args.home else "built tiny (pretrained-clf, tiny profile)",
        "sizes_mb": sizes_mb(folder, venv), "requirements": (folder / "requirements.txt").read_text().split(),
        "pip": {key: value for key, value in installed.items() if key != "freeze"},
        "fresh_venv": {key: fresh[key] for key in ("load_s", "predict_s", "xc_core_from", "from_checkout",
                                                   "encoder_runtime", "python", "mlflow")},
        "answers": fresh["answers"], "compared_with_checkout": compare(fresh["answers"], reference),
        "mlflow_models_serve": served and {"startup_s": served["startup_s"],
                                           "equal": served["answer"] == fresh["answers"][0]},
        "dockerfile": docker, "venv_freeze": installed["freeze"],
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: result[key] for key in ("seconds", "sizes_mb", "compared_with_checkout",
                                                   "mlflow_models_serve")}))
    cleanup(scratch, args)


def cleanup(scratch: Path, args: argparse.Namespace) -> None:
    """The venv (≈ GBs) and the copies go; a home given with --home stays as it was."""
    import shutil

    if args.keep:
        return
    for name in ("venv", "model", "docker", "home") if args.home is None else ("venv", "model", "docker"):
        shutil.rmtree(scratch / name, ignore_errors=True)


if __name__ == "__main__":
    main()
