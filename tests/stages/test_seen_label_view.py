"""Issue #29: wherever a method meets the linear peer, the seen-label view stands beside the full one. A small data
set whose label 3 has no training positive: the method's whole P@1 lead over the peer comes from label 3, and the
evaluation, the HTML report and the results page all show that lead vanishing in the seen-label view."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.record import EvaluationRecord
from xc_core.paths import eval_dir
from xc_core.stages.evaluate import evaluate_scores
from xc_core.stages.report import build_report
from xc_core.stages.results import _ci_rows, _references, _run_metrics
from xc_core.stages.results_page import DatasetResults, _dataset_section, headline

PROFILE = "tiny"


def _dataset() -> XCDataset:
    # labels 0-2 each clicked by a training query, label 3 never
    y_train = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], dtype=np.float32))
    # test positives: {0}; {3} only; {1, 3}; {2}
    y_test = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 1], [0, 0, 1, 0]], dtype=np.float32))
    return XCDataset(name="seen", train_texts=["red shoes", "blue hats", "green socks"],
                     test_texts=["red shoes", "new brand", "blue hats new brand", "green socks"],
                     label_texts=["shoes", "hats", "socks", "new brand"], y_train=y_train, y_test=y_test,
                     test_decile=np.array([0, 0, 1, 1]))


# the method ranks label 3 first where it scores it: [3, 1, 0], [3, 2], [3, 1], [2]; without it [1, 0], [2], [1], [2]
METHOD = np.array([[0.7, 0.8, 0, 0.9], [0, 0, 0.5, 0.9], [0, 0.8, 0, 0.9], [0, 0, 0.9, 0]])
# the peer never scores label 3 (a linear model has no weights for it): [0], [2], [0, 1], [2]
PEER = np.array([[0.9, 0, 0, 0], [0, 0, 0.9, 0], [0.9, 0.5, 0, 0], [0, 0, 0.9, 0]])


@pytest.fixture
def evaluated(tmp_path: Path) -> tuple[XCDataset, Path]:
    data = _dataset()
    for method, scores in (("pretrained", METHOD), ("pecos", PEER)):
        evaluate_scores(data, sp.csr_matrix(scores), eval_dir(tmp_path, data.name, method, PROFILE),
                        {"method": method, "profile": PROFILE})
    return data, tmp_path


def _record(home: Path, method: str) -> EvaluationRecord:
    record = EvaluationRecord.load(eval_dir(home, "seen", method, PROFILE))
    assert record is not None
    return record


def test_the_evaluation_saves_the_seen_label_view_beside_the_full_one(evaluated: tuple[XCDataset, Path]) -> None:
    _, home = evaluated
    method, peer = _record(home, "pretrained"), _record(home, "pecos")
    assert method.metrics["P@1"] == pytest.approx(3 / 4)  # rows 1, 2 on label 3, row 3 on label 2
    seen = method.seen_metrics()
    assert seen is not None and seen["P@1"] == pytest.approx(2 / 4)  # row 1 has nothing left to hit, row 0 misses
    peer_seen = peer.seen_metrics()
    assert peer.metrics["P@1"] == pytest.approx(2 / 4) and peer_seen is not None
    assert all(peer_seen[k] == peer.summary[k] for k in peer_seen), "never scoring label 3, the peer loses nothing"
    # positive pairs (0,0) (1,3) (2,1) (2,3) (3,2): 2 of 5 on label 3; of the 4 rows, row 1 alone has only label 3
    assert method.untrained_share() == peer.untrained_share() == {"pairs": 2 / 5, "rows": 1 / 4}
    rows = method.seen_per_row()
    assert rows is not None
    np.testing.assert_array_equal(rows["P@1"], [0.0, 0.0, 1.0, 1.0])
    ci = method.seen_ci()
    assert ci is not None and ci["P@1"][0] == pytest.approx(2 / 4) and ci["P@1"][1] <= 0.5 <= ci["P@1"][2]
    # query deciles in both views, apart: decile 0 (rows 0, 1) hits only through label 3
    subsets = method.summary["subsets"]
    assert subsets["decile 0"]["P@1"] == pytest.approx(1 / 2) and subsets["decile 0, seen labels"]["P@1"] == 0.0
    assert subsets["decile 1"]["P@1"] == subsets["decile 1, seen labels"]["P@1"] == 1.0


def test_the_report_pairs_the_method_with_the_peer_in_both_views(evaluated: tuple[XCDataset, Path]) -> None:
    data, home = evaluated
    out = build_report(data, PROFILE, home)
    diffs = {(d["comparison"], d["view"], d["metric"]): d["diff"] for d in out["paired_differences"]}
    assert diffs[("pretrained − pecos", "all labels", "P@1")] == pytest.approx(1 / 4)
    assert diffs[("pretrained − pecos", "seen labels", "P@1")] == pytest.approx(0.0)  # the lead was label 3's
    page = Path(out["report"]).read_text()
    assert "Metrics on seen labels" in page and "test positives on labels without a training positive: 40.00%" in page
    assert "test documents with only such positives: 25.00%" in page


def test_the_results_page_sets_the_method_against_the_peer_in_both_views(evaluated: tuple[XCDataset, Path]) -> None:
    _, home = evaluated
    records, peers = {"pretrained": _record(home, "pretrained")}, {"pecos": _record(home, "pecos")}
    methods = [{**row, "peer": row["method"] in peers} for row in _ci_rows({**records, **peers})]
    result = DatasetResults(dataset="seen", summary={}, methods=methods, paired=_references(records, peers),
                            untrained={"pairs": 2 / 5, "rows": 1 / 4})
    [pair] = result.paired
    assert pair["peer"] and pair["P@1"][0] == pytest.approx(1 / 4) and pair["seen_labels"]["P@1"][0] == 0.0
    page = "\n".join(_dataset_section(result))
    section = page[page.index("### Against the linear peer"):]
    assert "40.00% of the test positives" in section and "25.00% of the test queries" in section
    assert re.search(r"^\| pretrained \| 50\.00 \[\d+\.\d\d, \d+\.\d\d\] \|", section, re.MULTILINE)
    assert re.search(r"^\| pretrained \| pecos \| all labels \| \+25\.00 \[", section, re.MULTILINE)
    assert re.search(r"^\| pretrained \| pecos \| seen labels \| \+0\.00 \[", section, re.MULTILINE)
    paired = page[page.index("### Paired differences"):page.index("### Against the linear peer")]
    assert "| pecos |" not in paired, "the peer's rows are in its own section, with both views"
    top = "\n".join(headline([result]))
    assert "| method | seen P@1 | seen PSP@1 | seen P@1 seen labels |" in top
    assert re.search(r"^\| pretrained \| 75\.00 \[.*\] \| \d+\.\d\d \| 50\.00 \|$", top, re.MULTILINE)
    assert _run_metrics([result])["seen/pretrained/seen_labels/P_at_1"] == pytest.approx(0.5)
