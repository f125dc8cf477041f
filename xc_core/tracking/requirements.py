"""What a logged pyfunc model carries so that it loads outside xc's checkout and environment.

Requirements are explicit (MLflow does not infer them, which is fast) and pinned at log time to the versions installed
in the logging environment (``importlib.metadata``), so a model reinstalls exactly what it was logged and checked
with, and nothing here goes stale when ``pyproject.toml`` moves a pin. The served model also carries xc_core
itself (MLflow ``code_paths``): its entry point and its method's model import it.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from collections.abc import Iterable
from pathlib import Path

#: what every method's own pyfunc model imports to load and predict (distribution names); a method adds its own
PIP_REQUIREMENTS = ("torch", "transformers", "tokenizers", "safetensors", "huggingface-hub", "numpy", "pandas",
                    "pydantic", "mlflow")
#: the served model's load/predict path on top (``served.py``): the label index (faiss), labels (polars, pyarrow),
#: the ONNX encoder, the classifier stage's fusion and lexical / hybrid channels (scipy, scikit-learn; numba: the
#: hybrid channel's beam scores its nodes in a compiled loop), the encoder's progress bar (tqdm).
#: ``tests/tracking/test_deployable.py`` traces a load and checks this list.
SERVED_REQUIREMENTS = (*PIP_REQUIREMENTS, "faiss-cpu", "polars", "pyarrow", "onnxruntime", "scipy", "scikit-learn",
                       "numba", "tqdm")
#: left out of the code a model carries: bytecode and numba's on-disk caches belong to one interpreter and machine
CODE_IGNORE = ("__pycache__", "*.pyc", "*.nbi", "*.nbc")


class RequirementError(RuntimeError):
    """A requirement to pin that is not installed where the model is logged."""


def pinned(distributions: Iterable[str]) -> list[str]:
    """``name==version`` of each installed distribution. The local build label is dropped (``2.13.0+cpu`` →
    ``2.13.0``): the same release then resolves to whichever build (CPU or CUDA) the deploying machine's index
    serves, as ``pyproject.toml``'s own ``torch==2.13.0`` does."""
    from packaging.version import Version

    out = []
    for name in distributions:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise RequirementError(f"{name} is not installed: a logged model pins what it imports — install it "
                                   "(pip install -e .) before logging") from exc
        out.append(f"{name}=={Version(version).public}")
    return out


def stage_code(out: Path) -> Path:
    """A copy of the xc_core package (this module's package's parent) under ``out``, for ``code_paths``: MLflow puts
    the folder on ``sys.path`` at load, so the entry point's ``import xc_core`` works where xc is not installed."""
    package = Path(__file__).resolve().parents[1]
    return Path(shutil.copytree(package, out / package.name, ignore=shutil.ignore_patterns(*CODE_IGNORE)))
