"""The tail in view (issue #63): P@5 by label-frequency decile sums to P@5, the table names the methods a reader
compares, and the report shows it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.evaluation.analyses import label_quantiles, quantile_contributions
from xc_core.stages.label_deciles import N_DECILES, decile_methods, decile_terms, label_decile_rows


def test_decile_shares_are_the_quantile_contributions_and_sum_to_p_at_5() -> None:
    rng = np.random.default_rng(0)
    y_train = sp.random(400, 60, density=0.05, random_state=1, format="csr", data_rvs=np.ones)
    y_test = sp.random(200, 60, density=0.05, random_state=2, format="csr", data_rvs=np.ones)
    top = np.stack([rng.permutation(60)[:10] for _ in range(200)])
    bins = label_quantiles(y_train, N_DECILES)
    terms = decile_terms(y_test, top, bins)
    quantiles = quantile_contributions(y_test, top, bins, 5)
    assert terms.shape == (200, N_DECILES)
    assert np.allclose(terms.mean(axis=0)[: len(quantiles)], quantiles["P@5"].to_numpy())
    hits = np.array([len(set(top[i, :5]) & set(y_test[i].indices)) / 5 for i in range(200)])
    assert np.allclose(terms.sum(axis=1), hits)


def test_the_table_shows_the_untrained_encoder_the_best_encoder_the_best_clf_and_the_peer() -> None:
    shown, pair = decile_methods(["ramen-clf", "dual_encoder-clf", "dual_encoder", "pecos", "pretrained"])
    assert shown == ["pretrained", "dual_encoder", "ramen-clf", "pecos"]
    assert pair is None, "ramen (its encoder) was not evaluated: nothing to difference"
    shown, pair = decile_methods(["dual_encoder-clf", "dual_encoder", "pretrained"])
    assert pair == ("dual_encoder-clf", "dual_encoder")


def test_the_report_and_its_payload_hold_the_decile_table(tiny_home: Path) -> None:
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import anchors_dir, eval_dir
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.report import build_report
    from xc_core.stages.train import train_method

    data = XCDataset.load(anchors_dir(tiny_home, "synthetic"))
    if not (eval_dir(tiny_home, "synthetic", "pretrained", "tiny") / "metrics.json").exists():
        train_method(data, "pretrained", "tiny", tiny_home)
        evaluate_method(data, "pretrained", "tiny", tiny_home)
    rows = label_decile_rows(tiny_home, data, "tiny")
    record = EvaluationRecord.load(eval_dir(tiny_home, "synthetic", "pretrained", "tiny"))
    assert record is not None and [r["decile"] for r in rows] == list(range(N_DECILES))
    assert sum(r["pretrained P@5"] for r in rows) == pytest.approx(100 * record.metrics["P@5"], abs=0.02)
    out = build_report(data, "tiny", tiny_home)
    assert out["label_deciles"] == rows
    assert "The tail in view" in Path(out["report"]).read_text()
