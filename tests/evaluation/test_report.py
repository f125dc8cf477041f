"""The HTML report renders every section, marks the best value, and embeds its plots."""

from __future__ import annotations

from pathlib import Path

from xc_core.evaluation.report import MethodResult, render_report


def test_report_renders_every_section_with_plots_and_best_marked(tmp_path: Path) -> None:
    quantiles = [{"bin": b, "P@5": 0.01 * (b + 1), "R@5": 0.02} for b in range(5)]
    results = [
        MethodResult("ramen", {"P@1": 0.5, "P@3": 0.4, "P@5": 0.3, "PSP@1": 0.45, "PSP@5": 0.35, "R@10": 0.6},
                     ci={"P@1": (0.5, 0.45, 0.55)}, index={"hnsw_recall@10": 0.99, "ms_per_query": 0.1},
                     subsets={"novel queries": {"P@1": 0.4, "rows": 10}}, quantiles=quantiles),
        MethodResult("dual_encoder", {"P@1": 0.4, "P@3": 0.35, "P@5": 0.28, "PSP@1": 0.38, "PSP@5": 0.3,
                                      "R@10": 0.55}, quantiles=quantiles),
    ]
    examples = [{"query": "grainger", "note": "novel", "predictions": [{"label": "industrial supply", "hit": True,
                                                                        "score": 0.8}]}]
    paired = [{"comparison": "ramen − dual_encoder", "metric": "P@1", "diff": 0.1, "low": 0.02, "high": 0.18}]
    path = render_report("synthetic", results, tmp_path / "r.html", [{"bin": 0, "DIFF@5": -3}], examples, {"k": 5},
                         paired=paired)
    text = path.read_text()
    assert "ramen − dual_encoder" in text and "None" not in text
    assert "Metrics on seen labels" not in text, "no method was evaluated in the seen-label view"
    for section in ("Metrics", "Paired differences", "P@k and PSP@k", "Label quantiles", "DIFF@k per label",
                    "Seen vs novel", "Index recall", "Example predictions"):
        assert section in text
    assert text.count("data:image/png;base64,") == 2
    assert '<td class="best">50.00<br><small>[45.00, 55.00]</small></td>' in text
    assert 'class="hit">industrial supply' in text


def test_report_escapes_what_comes_from_the_data(tmp_path: Path) -> None:
    results = [MethodResult("<b>m</b>", {"P@1": 0.5})]
    examples = [{"query": "<script>alert(1)</script>", "predictions": [{"label": "a & b", "hit": False,
                                                                         "score": 0.1}]}]
    text = render_report("x<y", results, tmp_path / "r.html", [], examples, {"note": "<i>"}).read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "&lt;b&gt;m&lt;/b&gt;" in text and "a &amp; b" in text and "x&lt;y" in text
