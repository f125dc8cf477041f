"""xc_core.stages.variants on the tiny profile: a variant trains in its own home on the seed home's data and is
paired with the seed home's models on the same test queries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xc_core.stages import variants


def test_settings_are_train_config_fields_read_as_json() -> None:
    assert variants.parse_settings(["max_train_docs=200", "lambda_reg=1.0", "bandit=false"]) == {
        "max_train_docs": 200, "lambda_reg": 1.0, "bandit": False}
    with pytest.raises(SystemExit, match="max_docs.*TrainConfig"):
        variants.parse_settings(["max_docs=200"])
    with pytest.raises(SystemExit, match="FIELD=VALUE"):
        variants.parse_settings(["max_train_docs"])


def test_a_variant_trains_apart_on_the_seed_homes_data_and_is_paired_with_it(tiny_home: Path,
                                                                            tmp_path: Path) -> None:
    from xc_core.paths import anchors_dir, model_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.anchor_sets import load_with_anchors
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.results import share_data
    from xc_core.stages.train import train_method

    base = tmp_path / "synthetic-s0"
    share_data(tiny_home, base)
    data = load_with_anchors(base, "synthetic")
    for method in ("pretrained", "dual_encoder"):
        train_method(data, method, get_profile("tiny"), base)
        evaluate_method(data, method, "tiny", base)

    home = variants.run_one(tmp_path, "synthetic", "tiny", 0, "dual_encoder", {"max_train_docs": 100}, "docs100")
    assert home == tmp_path / "synthetic-s0-docs100"
    assert anchors_dir(home, "synthetic").resolve() == anchors_dir(tiny_home, "synthetic").resolve()
    assert not (model_dir(home, "synthetic", "dual_encoder", "tiny") / "checkpoint").exists()

    result = variants.build(tmp_path, "synthetic", "tiny", [0], ["dual_encoder"], "docs100",
                            {"max_train_docs": 100})
    rows = {row["method"]: row for row in result["rows"]}
    assert list(rows) == ["pretrained", "dual_encoder", "dual_encoder(docs100)"]
    # the tiny profile trains on 400 documents: the variant's 100 take a quarter of the steps
    assert rows["dual_encoder(docs100)"]["steps"][0] < rows["dual_encoder"]["steps"][0]
    pairs = {pair["pair"]: pair for pair in result["pairs"]}
    assert set(pairs) == {"dual_encoder(docs100) − dual_encoder", "dual_encoder(docs100) − pretrained"}
    for pair in pairs.values():
        value, low, high = pair["P@1"]
        assert low <= value <= high
    assert "dual_encoder(docs100)" in variants.markdown(result)
    # a seed with nothing trained yet is left out of every row and pair, never mixed in
    partial = variants.build(tmp_path, "synthetic", "tiny", [0, 1], ["dual_encoder"], "docs100",
                             {"max_train_docs": 100})
    assert [row["seeds"] for row in partial["rows"]] == [1, 1, 1]
    assert {pair["seeds"] for pair in partial["pairs"]} == {1}
    assert partial["pairs"][0]["P@1"] == result["pairs"][0]["P@1"]
    # a variant home below the seed home is read as METHOD@SUB, paired like the seed home's own methods
    from xc_core.evaluation.seed_homes import evaluated, paired_diff, seed_average

    (base / "variants").mkdir()
    (base / "variants" / "docs100").symlink_to(home)
    below = "dual_encoder@variants/docs100"
    assert evaluated(base, "synthetic", below, "tiny")
    assert not evaluated(base, "synthetic", "ramen@variants/docs100", "tiny")
    rows, seeds = seed_average([base], "synthetic", below, "tiny")
    there = seed_average([home], "synthetic", "dual_encoder", "tiny")[0]
    assert seeds == 1 and np.array_equal(rows["P@1"], there["P@1"])
    reference = seed_average([base], "synthetic", "dual_encoder", "tiny")[0]
    assert list(paired_diff(rows, reference, "P@1"))[:3] == pairs["dual_encoder(docs100) − dual_encoder"]["P@1"]
