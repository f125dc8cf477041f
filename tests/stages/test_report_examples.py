"""The report's example predictions show the scores the method gave (issue #15: every one read 0.000), and a
report stands over evaluations whose training runs are in another MLflow store."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.metrics import filter_predictions
from xc_core.methods import get_method
from xc_core.paths import anchors_dir, eval_dir, index_dir
from xc_core.stages.evaluate import evaluate_method
from xc_core.stages.report import _examples, build_report
from xc_core.stages.train import train_method
from xc_core.training.record import TrainedModel


def _evaluated(home: Path) -> XCDataset:
    data = XCDataset.load(anchors_dir(home, "synthetic"))
    if not (eval_dir(home, "synthetic", "pretrained", "tiny") / "metrics.json").exists():
        train_method(data, "pretrained", "tiny", home)
        evaluate_method(data, "pretrained", "tiny", home)
    return data


def test_example_predictions_carry_the_methods_scores_into_the_report(tiny_home: Path) -> None:
    data = _evaluated(tiny_home)
    trained = TrainedModel.of(tiny_home, "synthetic", "pretrained", "tiny")
    # the predictions the evaluation scored (reused from the index stage's folder), less the filtered pairs
    preds = get_method("pretrained").predict(data, trained, index_dir(tiny_home, "synthetic", "pretrained", "tiny"),
                                             reuse=True)
    scores = sp.csr_matrix(filter_predictions(preds.scores, data.filter_pairs))
    examples = _examples(data, tiny_home, "tiny", "pretrained")
    shown = [p["score"] for e in examples for p in e["predictions"]]
    assert len(shown) >= 5 and any(s != 0 for s in shown)
    for example in examples:
        rows = [i for i, text in enumerate(data.test_texts) if text == example["query"]]
        ranked = [sorted(((scores[i, j], data.label_texts[j]) for j in scores[i].indices), reverse=True) for i in rows]
        # the example's labels, best first, with the very scores the method gave that query
        assert any([p["score"] for p in example["predictions"]] == pytest.approx([s for s, _ in r[:len(
            example["predictions"])]], abs=1e-6) for r in ranked), example

    # and the page shows them, for the method whose examples it picked
    page = Path(build_report(data, "tiny", tiny_home)["report"]).read_text().split("Example predictions", 1)[1]
    found = re.search(r"<h4>.*? <small>([^<;]+)", page)
    assert found is not None
    expected = [f"{p['score']:.3f}" for e in _examples(data, tiny_home, "tiny", found.group(1))
                for p in e["predictions"]]
    assert re.findall(r"<small>(-?\d+\.\d{3})</small></li>", page) == expected and set(expected) != {"0.000"}


def test_a_report_over_an_evaluation_whose_run_is_in_another_store_is_written_without_that_run(
        tiny_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A home evaluated while `make run` logged to the repository's store (before issue #15): the report is
    written, and the run this home's store does not hold is named, not attached."""
    data = _evaluated(tiny_home)
    home = tmp_path / "home"  # its store holds no run at all
    where = ("synthetic", "pretrained", "tiny")
    shutil.copytree(eval_dir(tiny_home, *where), eval_dir(home, *where))
    report = build_report(data, "tiny", home)
    assert Path(report["report"]).exists() and report["methods"] == ["pretrained"]
    assert re.search(r"report not attached to pretrained's run \w+: no such run in sqlite:///.*home", caplog.text)
