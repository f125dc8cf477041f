"""The report compares what the methods declare (baselines, ablations) and every method with the peer: no
method is named in the report's code, so a new method brings its comparisons in its own module."""

from __future__ import annotations

from dataclasses import replace

import pytest

from xc_core.methods import METHODS
from xc_core.methods.encoder import encoder_method
from xc_core.stages.report import report_pairs


def test_pairs_follow_the_declarations_of_the_evaluated_methods() -> None:
    pairs = report_pairs(["pretrained", "dual_encoder", "ramen", "ramen_no_bandit", "ramen-clf", "pecos"])
    assert ("ramen", "dual_encoder") in pairs and ("ramen", "pretrained") in pairs
    assert ("ramen", "auggt") not in pairs, "a baseline that was not evaluated is skipped"
    assert ("ramen", "ramen_no_bandit") in pairs, "an ablation is read as full − ablated"
    assert ("ramen-clf", "ramen") in pairs, "the classifier stage against the encoder it ends with"
    assert {("pretrained", "pecos"), ("ramen-clf", "pecos")} <= set(pairs) and ("pecos", "pecos") not in pairs


def test_a_new_method_brings_its_comparisons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(METHODS, "toy", replace(encoder_method("dual_encoder"), name="toy", baselines=("ramen",)))
    assert ("toy", "ramen") in report_pairs(["ramen", "toy"])
