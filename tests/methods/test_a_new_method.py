"""A method added in one file (this one) goes through every stage with no other edit: ``xc train``, ``xc index``,
``xc eval``, ``xc report``, registration and the promotion gate, then ``xc predict`` from the registry; by declaring
its roles it joins the default run and the results job.

The toy method is a label prior: it scores every label by its training frequency and ignores the query — its
own trainer (a column count), its own artefact, its own MLflow model and its own scorer, no text encoder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pytest
from mlflow.pyfunc import PythonModel

from xc_core.cli import main
from xc_core.datasets.container import XCDataset
from xc_core.evaluation.metrics import to_csr
from xc_core.evaluation.record import fingerprint_test_split
from xc_core.methods import METHODS, Fitted, Method, Predictions, Requires, Roles, Scorer, Served, TrainJob
from xc_core.training.record import TrainedModel

PRIOR = "prior.npy"


class PriorModel(PythonModel):
    """The logged model: texts in, every label's prior out (one row per text)."""

    def load_context(self, context: Any) -> None:
        self.prior = np.load(context.artifacts["prior"])

    def predict(self, context, model_input: list[str], params=None):  # MLflow reads the hints as the schema
        return np.tile(self.prior, (len(model_input), 1))


def _top(prior: np.ndarray, rows: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.argsort(-prior, kind="stable")[:k]
    return np.tile(prior[ids], (rows, 1)), np.tile(ids, (rows, 1))


class LabelPrior:
    name = "label_prior"
    description = "every label scored by its training frequency, whatever the query (toy)"
    needs_anchor_sets = False
    baselines = ("pretrained",)
    ablation_of = None
    requires = Requires()  # builds on no other method's model, needs no graph to answer
    roles = Roles(run=True, results=True)  # trained by `make run` / `xc run` and on the results pages by default

    def train(self, job: TrainJob) -> Fitted:
        counts = np.asarray(job.dataset.y_train.sum(axis=0), dtype=np.float32).ravel()
        path = job.out / PRIOR
        np.save(path, counts / counts.sum())
        mlflow.log_metric("labels_seen", float((counts > 0).sum()))
        info = mlflow.pyfunc.log_model(name="prior", python_model=PriorModel(), artifacts={"prior": str(path)},
                                       pip_requirements=[])
        return Fitted(info.model_uri, {"prior": str(path)})

    def predict(self, dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, reuse: bool = False,
                progress: bool = False) -> Predictions:
        scores, ids = _top(np.load(trained.summary["prior"]), len(dataset.test_texts), 100)
        return Predictions(to_csr(scores, ids, dataset.n_labels), index_dir, fingerprint_test_split(dataset),
                           trained.model_uri)

    def analyse(self, dataset: XCDataset, trained: TrainedModel, predictions: Predictions,
                out: Path) -> dict[str, Any]:
        return {}

    def scorer(self, served: Served) -> Scorer:
        model = mlflow.pyfunc.load_model(served.model_uri)

        def score(texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
            return _top(np.asarray(model.predict(texts))[0], len(texts), k)

        return score


@pytest.fixture
def label_prior(monkeypatch: pytest.MonkeyPatch) -> Method:
    method: Method = LabelPrior()  # mypy checks here that the toy satisfies the protocol
    monkeypatch.setitem(METHODS, method.name, method)  # registered for this test only
    return method


def _xc(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*argv, "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_method_added_in_one_file_is_trained_evaluated_reported_registered_and_served(
        label_prior: Method, tiny_data: XCDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import dataset_dir, eval_dir
    from xc_core.tracking.registry import promote_if_better, register_evaluated

    tiny_data.save(dataset_dir(tmp_path, tiny_data.name))
    where = ("--dataset", tiny_data.name, "--profile", "tiny", "--home", str(tmp_path))
    trained = _xc(capsys, "train", "--method", label_prior.name, *where)
    assert trained["method"] == label_prior.name and Path(trained["prior"]).exists()
    _xc(capsys, "index", "--method", label_prior.name, *where)
    evaluated = _xc(capsys, "eval", "--method", label_prior.name, *where)
    counts = np.asarray(tiny_data.y_train.sum(axis=0)).ravel()
    frequent = np.argsort(-counts, kind="stable")
    record = EvaluationRecord.load(eval_dir(tmp_path, tiny_data.name, label_prior.name, "tiny"))
    assert record is not None and record.metrics["P@1"] == evaluated["P@1"]
    # the same labels for every query; the filter may drop the first for a query that already has it
    assert set(record.top()[:, 0].tolist()) <= set(frequent[:2].tolist())
    run = mlflow.MlflowClient(trained["tracking_uri"]).get_run(trained["mlflow_run_id"])
    assert run.data.metrics["test/P_at_1"] == pytest.approx(evaluated["P@1"]) and "labels_seen" in run.data.metrics

    report = _xc(capsys, "report", *where)
    assert report["methods"] == [label_prior.name]
    assert label_prior.name in Path(report["report"]).read_text()

    _xc(capsys, "eval", "--method", label_prior.name, "--split", "validation", *where)  # what the gate decides on
    registered = register_evaluated(tmp_path, tiny_data.name, label_prior.name, "tiny")
    assert promote_if_better(tiny_data.name, registered["version"], registered["tracking_uri"], home=tmp_path).promote
    served = _xc(capsys, "predict", "a query the prior ignores", "--dataset", tiny_data.name, "--k", "3",
                 "--home", str(tmp_path))
    assert served["method"] == label_prior.name
    assert [row["label"] for row in served["labels"]] == [tiny_data.label_texts[i] for i in frequent[:3]]


def test_a_method_added_in_one_file_joins_the_default_run_and_the_results_by_declaring_its_roles(
        label_prior: Method) -> None:
    from xc_core.methods import headline_methods, method_names, result_methods, run_methods

    assert run_methods()[-1] == result_methods()[-1] == method_names()[-1] == label_prior.name
    assert label_prior.name not in headline_methods()
