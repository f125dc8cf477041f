"""`make run`'s summary says why the best model is not served and shows the tail by label decile (issue #63)."""

from __future__ import annotations

from typing import Any

from xc_assets.summary import lines


def _summary(promoted_best: bool) -> dict[str, Any]:
    reason = "A/B guard: brand_bmr +12.66% [+9.10, +16.23] (p < 1e-6) is significantly worse in the simulated A/B test"
    return {
        "methods": {"pretrained": {"P@1": 0.3622, "PSP@1": 0.3245}, "dual_encoder-clf": {"P@1": 0.4840, "PSP@1": 0.38}},
        "promotion": [{"method": "pretrained", "promoted": True, "version": "1", "reason": "no champion yet"},
                      {"method": "dual_encoder-clf", "promoted": promoted_best, "version": "2",
                       "reason": "P@1 0.4840 > 0.3622" if promoted_best else reason}],
        "champion": ({"method": "dual_encoder-clf", "version": "2"} if promoted_best
                     else {"method": "pretrained", "version": "1"}),
        "dataset": "synthetic",
        "label_deciles": [{"decile": d, "labels": 10, "test positives": 5, "pretrained P@5": 1.5,
                           "dual_encoder-clf − dual_encoder": "+0.364 [+0.146, +0.590]"} for d in range(10)],
    }


def test_the_summary_says_why_the_best_test_p1_is_not_served_and_shows_the_label_deciles() -> None:
    text = "\n".join(lines(_summary(promoted_best=False)))
    assert "best test P@1: dual_encoder-clf (48.40) is not served — A/B guard: brand_bmr +12.66% [+9.10" in text
    assert "P@5 by label-frequency decile" in text and "+0.364 [+0.146, +0.590]" in text
    assert "test positives" not in text, "the decile table keeps the methods' columns"
    promoted = "\n".join(lines(_summary(promoted_best=True)))
    assert "is not served" not in promoted
