"""A deployable registered model (issue #41, item 2): the served model carries the xc_core code its entry point
imports, and its requirements.txt pins every package its load and predict path imports, at the installed versions.

The fresh-virtualenv build is benchmarks/deploy_check.py (minutes, GBs); here the load runs in this venv with the
checkout hidden (no editable-install finder, no repository on sys.path, another working folder): every package
xc_core's own modules import on that path must be pinned, and every pin must be imported. (Packages the libraries
import only when present, e.g. mlflow's optional pyspark, are not the model's requirements; the fresh venv, which
lacks them, is the benchmark's proof.)"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from xc_core.datasets.container import XCDataset

DATASET, PROFILE, METHOD = "synthetic", "tiny", "pretrained-clf"  # -clf: index, classifier, fusion, lexical, ONNX
REPO = Path(__file__).resolve().parents[2]

#: run in a subprocess: hide the checkout, trace imports made by xc_core's own modules, load, answer, report
PROBE = r'''
import builtins, functools, importlib.metadata as md, json, sys
repo, folder, query = sys.argv[1], sys.argv[2], sys.argv[3]
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path[:] = [p for p in sys.path if p not in ("", repo) and "__editable__" not in p]
direct, real_import = set(), builtins.__import__

def traced(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and str((globals or {}).get("__name__") or "").startswith("xc_core"):
        direct.add(name.split(".")[0])
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = traced
import mlflow
model = mlflow.pyfunc.load_model(folder)
answer = model.predict([query], params={"k": 3})
model.predict([query], params={"output": "embeddings"})
# and on torch, as a model whose ONNX graph failed its check at registration serves (the transformer, deferred while
# ONNX Runtime serves, is built from the folder now): the requirements cover both
model.unwrap_python_model().model.embedder.unwrap_python_model().encoder.use_onnx(None)
assert len(model.predict([query], params={"k": 3})[0]["labels"]) == 3
import xc_core
owners = md.packages_distributions()
files = functools.cache(lambda name: [str(f) for f in md.distribution(name).files or []])

def distribution(module):
    """The distribution a loaded module's file belongs to (a top-level name several share: by its files)."""
    top = module.split(".")[0]
    names = owners.get(top, [])
    if len(names) < 2:
        return names[0] if names else None
    path = str(getattr(sys.modules.get(module), "__file__", "") or "")
    for name in names:
        if any(path.endswith(f) for f in files(name)):
            return name
    return None

stdlib = set(sys.stdlib_module_names)
loaded = {distribution(m) for m in list(sys.modules) if m.split(".")[0] not in stdlib}
print(json.dumps({"xc_core": xc_core.__file__, "answer": answer,
                  "direct": sorted({d for t in direct if t not in stdlib for d in owners.get(t, [t])}),
                  "loaded": sorted(d for d in loaded if d)}))
'''


@pytest.fixture(scope="module")
def model_folder(tiny_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The registered pretrained-clf version of a home of its own (the session's data set), downloaded."""
    import mlflow

    from xc_core.evaluation.fallback import FallbackPolicy
    from xc_core.paths import anchors_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.train import train_method
    from xc_core.tracking.registry import register_evaluated
    from xc_core.tracking.store import activate

    home = tmp_path_factory.mktemp("deployable") / "home"
    shutil.copytree(tiny_home, home, ignore=shutil.ignore_patterns("events", "simulate", "graphs", "mlflow",
                                                                    "models", "indexes", "eval", "serving"))
    data = XCDataset.load(anchors_dir(home, DATASET))
    # the lexical channel forced on (the fallback and every candidate's guards off): the load path must then import
    # all that is pinned, which a fusion chosen on tiny data need not use
    profile = get_profile(PROFILE)
    forced = {"alphas": (0.5,), "lexical": profile.classifier.lexical.model_copy(update={"weights": (0.2,)}),
              "fallback": FallbackPolicy(enabled=False, guards=())}
    clf_profile = profile.model_copy(update={"classifier": profile.classifier.model_copy(update=forced)})
    for method, method_profile in (("pretrained", profile), (METHOD, clf_profile)):
        train_method(data, method, method_profile, home)
    for split in ("validation", "test"):
        evaluate_method(data, METHOD, PROFILE, home, split=split)
    registered = register_evaluated(home, DATASET, METHOD, PROFILE)
    activate(registered["tracking_uri"])
    uri = f"models:/{registered['model']}/{registered['version']}"
    return Path(mlflow.artifacts.download_artifacts(uri, dst_path=str(home.parent / "copy")))


def _pins(folder: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (folder / "requirements.txt").read_text().split():
        requirement = Requirement(line)
        assert len(requirement.specifier) == 1, f"{line}: not one exact pin"
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{line}: not pinned with =="
        pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def test_the_served_model_carries_the_xc_core_package_without_bytecode(model_folder: Path) -> None:
    import yaml

    code = model_folder / "code" / "xc_core"
    flavor = yaml.safe_load((model_folder / "MLmodel").read_text())["flavors"]["python_function"]
    assert flavor["code"] == "code"  # MLflow puts <model>/code on sys.path before it runs the entry point
    for module in ("tracking/served.py", "tracking/requirements.py", "methods/encoder/pyfunc.py",
                   "methods/encoder/pyfunc_model.py", "classifier/fusion.py", "index/ann.py", "encoders/text.py"):
        assert (code / module).read_text() == (REPO / "xc_core" / module).read_text(), module
    assert not [p for p in code.rglob("*") if p.name == "__pycache__" or p.suffix in (".pyc", ".nbi", ".nbc")]
    assert "from xc_core.tracking.served import ServedPyfunc" in (model_folder / "served_entry.py").read_text()


def test_requirements_pin_the_installed_versions_of_what_the_served_model_needs(model_folder: Path) -> None:
    from xc_core.tracking.requirements import SERVED_REQUIREMENTS

    pins = _pins(model_folder)
    assert set(pins) == {canonicalize_name(name) for name in SERVED_REQUIREMENTS}
    for name, version in pins.items():  # the release installed here; a local build label (+cpu) is left out
        assert version == Version(importlib.metadata.version(name)).public, name


def test_the_load_path_outside_the_checkout_imports_only_pinned_packages(model_folder: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(REPO), str(model_folder), "running shoes"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(report["xc_core"]).is_relative_to(model_folder / "code"), report["xc_core"]
    assert len(report["answer"][0]["labels"]) == 3
    pins = set(_pins(model_folder))
    direct = {canonicalize_name(d) for d in report["direct"]} - {"xc"}  # xc: the carried code/xc_core
    # mlflow's import package is shared by mlflow, mlflow-skinny and mlflow-tracing: pinning mlflow pins all three
    unpinned = direct - pins - {"mlflow-skinny", "mlflow-tracing"}
    assert not unpinned, f"xc_core's load/predict path imports {sorted(unpinned)}, which requirements.txt leaves out"
    # and nothing pinned that the load path does not use (each pin costs the deployment its size)
    loaded = {canonicalize_name(d) for d in report["loaded"]}
    unused = pins - loaded - ({"mlflow"} if "mlflow-skinny" in loaded else set())  # its modules ship in -skinny
    assert not unused, f"requirements.txt pins {sorted(unused)}, which loading and answering never import"


def test_loading_a_version_in_a_running_process_leaves_sys_path_as_it_was(model_folder: Path) -> None:
    """`xc serve` loads every promoted version into a process that already runs the checkout's xc_core: the
    version's code/ must not pile up on sys.path (MLflow adds it at load, and the download is deleted after)."""
    from xc_core.tracking.served import load_registered

    before = list(sys.path)
    assert load_registered(str(model_folder)) is not None
    assert sys.path == before
