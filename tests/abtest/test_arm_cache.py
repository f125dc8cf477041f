"""An A/B test's candidates are cached by what an arm serves, not by which run logged it: two runs serving the same
bytes (ramen on the dual_encoder encoder its graph test fell back to) share one cache file; a changed file does not."""

from __future__ import annotations

from pathlib import Path

import mlflow
from mlflow.pyfunc import PythonModel

from xc_core.abtest import ModelArm
from xc_core.paths import index_dir


class _Served(PythonModel):
    def predict(self, context, model_input: list[str], params=None):  # hints as in EncoderPyfunc
        return [[1.0] for _ in model_input]


def _arm(home: Path, uri: str, method: str, weights: bytes, index: bytes) -> ModelArm:
    """A logged model whose artifact is ``weights`` and the label index folder ``index`` of ``method``."""
    source = home / "src" / method
    source.mkdir(parents=True)
    (source / "weights.bin").write_bytes(weights)
    folder = index_dir(home, "synthetic", method, "tiny")
    folder.mkdir(parents=True)
    (folder / "index.faiss").write_bytes(index)
    (folder / "manifest.json").write_text(f'{{"model_uri": "{method}"}}')  # a run's record: not part of the key
    mlflow.set_tracking_uri(uri)
    with mlflow.start_run() as run:
        # pip_requirements given: MLflow would otherwise infer them by loading the model in a fresh Python process
        info = mlflow.pyfunc.log_model(name="model", python_model=_Served(),
                                       artifacts={"weights": str(source / "weights.bin")}, pip_requirements=[])
    return ModelArm(model_uri=f"models:/{info.model_id}", method=method, profile="tiny", dataset="synthetic",
                    home=home, tracking_uri=uri, run_id=run.info.run_id)


def test_arms_serving_the_same_files_share_a_key_and_a_changed_file_does_not(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    dual = _arm(tmp_path, uri, "dual_encoder", b"encoder", b"hnsw")
    ramen = _arm(tmp_path, uri, "ramen", b"encoder", b"hnsw")
    other_weights = _arm(tmp_path, uri, "auggt", b"retrained", b"hnsw")
    other_index = _arm(tmp_path, uri, "pretrained", b"encoder", b"rebuilt")
    assert dual.run_id != ramen.run_id and dual.model_uri != ramen.model_uri
    assert dual.content_key() == ramen.content_key()
    assert len({dual.content_key(), other_weights.content_key(), other_index.content_key()}) == 3

    # a registered version is scored as its training run's model (the tag registration writes), as before by run id
    client = mlflow.MlflowClient(uri)
    client.create_registered_model("xc-encoder-synthetic")
    tagged = client.create_model_version("xc-encoder-synthetic", other_index.model_uri, run_id=other_index.run_id,
                                         tags={"trained_model_uri": dual.model_uri})
    client.set_registered_model_alias("xc-encoder-synthetic", "champion", tagged.version)
    untagged = client.create_model_version("xc-encoder-synthetic", dual.model_uri, run_id=dual.run_id)

    def registered(spec: str) -> ModelArm:
        return ModelArm(model_uri=f"models:/xc-encoder-synthetic{spec}", method="dual_encoder", profile="tiny",
                        dataset="synthetic", home=tmp_path, tracking_uri=uri, run_id=dual.run_id)

    assert registered("@champion").content_key() == dual.content_key()
    assert registered(f"/{untagged.version}").content_key() is None  # keyed by its run id instead
