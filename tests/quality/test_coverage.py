"""Coverage statistics and the coverage gate, on a data set small enough to count by hand."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.quality.coverage import CoverageThreshold, check_coverage, coverage_table, reachable_train_label_share
from xc_core.quality.gx_suites import anchor_leak_suite, coverage_suite


def _dataset() -> XCDataset:
    # 4 train docs, 3 labels (label 2 only in test); doc 0 has 3 anchors, doc 1 one (a proxy), docs 2-3 none.
    anchors = AnchorSet("cosession_queries", ["a", "b", "c"], doc_edges=np.array([(0, 0), (0, 1), (0, 2), (1, 0)]),
                        label_edges=np.array([(0, 2)]), doc_proxy=np.array([False, False, False, True]))
    y_train = sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 1, 0]]))
    y_test = sp.csr_matrix(np.array([[0, 0, 1]]))
    return XCDataset("toy", ["d0", "d1", "d2", "d3"], ["t0"], ["l0", "l1", "l2"], y_train, y_test,
                     anchor_sets={"cosession_queries": anchors})


def test_coverage_counts_native_without_proxies_and_labels_over_train_labels() -> None:
    data = _dataset()
    table = coverage_table(data, {"with_proxy": data.anchor_sets})
    rows = {(r["node_type"], r["stage"]): r for r in table.iter_rows(named=True)}
    assert rows[("document", "native")]["share_ge1"] == 0.25  # doc 0 only: doc 1's edge is a proxy
    assert rows[("document", "with_proxy")]["share_ge1"] == 0.5
    assert rows[("document", "with_proxy")]["share_ge3"] == 0.25
    assert rows[("label", "native")]["nodes"] == 2  # label 2 has no train positive
    assert rows[("label", "native")]["share_ge1"] == 0.5
    assert reachable_train_label_share(data) == 0.5


def test_coverage_gate_fails_below_threshold_and_names_set_side_and_values() -> None:
    data = _dataset()
    table = coverage_table(data, {"after_rwr": data.anchor_sets})
    thresholds = [CoverageThreshold(anchor_set="cosession_queries", node_type="document", min_share=0.6),
                  CoverageThreshold(anchor_set="cosession_queries", node_type="label", min_share=0.5)]
    outcomes = check_coverage(table, thresholds)
    assert [(o.node_type, o.passed, o.measured, o.threshold) for o in outcomes] == [
        ("document", False, 0.5, 0.6), ("label", True, 0.5, 0.5)]
    suite = coverage_suite(table, thresholds)
    assert not suite.success and suite.failed[0]["unexpected_count"] == 1
    assert coverage_suite(table, thresholds[1:]).success


def test_anchor_leak_suite_flags_a_test_document_used_as_anchor() -> None:
    assert anchor_leak_suite({"links": ["x", "y"]}, {"z"}).success
    leak = anchor_leak_suite({"links": ["x", "z"]}, {"z"})
    assert not leak.success and leak.failed[0]["unexpected_count"] == 1
