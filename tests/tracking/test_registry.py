"""Registry and gated promotion on a real sqlite MLflow store: first model becomes champion, a degraded
model is registered but never promoted, a better one is."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import polars as pl
import pytest
from mlflow.pyfunc import PythonModel

from xc_core.tracking.registry import (
    PromotionPolicy,
    champion_version,
    decide,
    metric_tags,
    model_name,
    paired_lead,
    promote_if_better,
    register,
)


def test_decision_rule_primary_must_improve_and_guards_must_hold() -> None:
    policy = PromotionPolicy(primary="P@1", guards={"PSP@5": 0.01})
    assert decide({"P@1": 0.3}, None, policy).promote
    assert not decide({"P@1": 0.3, "PSP@5": 0.5}, {"P@1": 0.3, "PSP@5": 0.5}, policy).promote  # not strictly better
    worse_tail = decide({"P@1": 0.4, "PSP@5": 0.45}, {"P@1": 0.3, "PSP@5": 0.5}, policy)
    assert not worse_tail.promote and "guard PSP@5" in worse_tail.reason
    assert decide({"P@1": 0.4, "PSP@5": 0.495}, {"P@1": 0.3, "PSP@5": 0.5}, policy).promote


def test_a_guard_is_a_paired_test_whose_interval_holding_0_is_a_tie_band() -> None:
    """Issue #63: the tail guard is not a fixed 0.01 on two point estimates. Paired on the same queries, a drop whose
    interval holds 0 is a tie (the guard holds, and the reason shows the band and its interval); a drop whose
    interval lies below 0 rejects, however small; a guard with no paired test falls back to the point rule."""
    from xc_core.tracking.registry import PairedLead

    policy = PromotionPolicy(primary="P@1", guards={"tail_P@5": 0.0}, confidence=0.95)
    better = {"P@1": 0.48, "tail_P@5": 0.069}, {"P@1": 0.37, "tail_P@5": 0.080}
    lead = PairedLead(0.11, 0.09, 0.13, 0.0, 2744, 0.95)
    tie = decide(*better, policy, lead, paired_guards={"tail_P@5": PairedLead(-0.011, -0.024, 0.002, 0.09, 2744, 0.95)})
    assert tie.promote and "tail_P@5 tie band: -0.0110, 95% CI [-0.0240, +0.0020]" in tie.reason
    assert tie.guards[0].as_dict()["band"] == "tie" and tie.guards[0].held
    worse = decide(*better, policy, lead,
                   paired_guards={"tail_P@5": PairedLead(-0.004, -0.006, -0.002, 0.001, 2744, 0.95)})
    assert not worse.promote and worse.reason.startswith("guard tail_P@5 regresses: tail_P@5 worse: -0.0040")
    tolerant = PromotionPolicy(primary="P@1", guards={"tail_P@5": 0.01})  # worse, but not by more than 0.01
    assert decide(*better, tolerant, lead,
                  paired_guards={"tail_P@5": PairedLead(-0.004, -0.006, -0.002, 0.001, 2744, 0.95)}).promote
    unpaired = decide(*better, policy, lead)  # the 0.011 point drop exceeds the unpaired tolerance of 0.01
    assert not unpaired.promote and "point estimates" in unpaired.reason
    within = decide(*better, policy, PairedLead(0.11, -0.01, 0.23, 0.2, 2744, 0.95))
    assert not within.promote and "tie band" in within.reason


def _ab(metric: str, pct: float, low: float, high: float, p: float) -> dict[str, dict[str, object]]:
    """The fields of an A/B result (xc_core.abtest's JSON) the gate reads, for one metric."""
    return {"delta_pct": {metric: pct}, "ci95": {metric: [low, high]}, "p_value": {metric: p}}


def test_a_significantly_worse_bad_match_rate_in_the_ab_test_blocks_promotion() -> None:
    policy = PromotionPolicy(primary="P@1", guards={})
    better = ({"P@1": 0.4}, {"P@1": 0.3})
    worse_brand = decide(*better, policy, ab=_ab("brand_bmr", 6.1, 3.0, 9.2, 0.0001))
    assert not worse_brand.promote and "A/B guard: brand_bmr +6.10%" in worse_brand.reason
    assert not decide(*better, policy, ab=_ab("location_bmr", 4.0, 1.0, 7.0, 0.01)).promote
    # within noise, or better (lower): the guard holds and says so
    noisy = decide(*better, policy, ab=_ab("brand_bmr", 6.1, -1.0, 13.2, 0.09))
    assert noisy.promote and "A/B guards brand_bmr, location_bmr held" in noisy.reason
    assert decide(*better, policy, ab=_ab("brand_bmr", -20.0, -25.0, -15.0, 0.0001)).promote
    # a worse CTR is not a bad-match guard; no A/B test at all leaves the other rules alone
    assert decide(*better, policy, ab=_ab("ctr", -9.0, -12.0, -6.0, 0.0001)).promote
    assert decide(*better, policy, ab=None).promote


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, list[str]]:
    from xc_core.tracking.store import activate

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    activate(uri)
    experiment = mlflow.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    models = []
    for _ in range(3):
        with mlflow.start_run(experiment_id=experiment):
            info = mlflow.pyfunc.log_model(name="encoder", python_model=_Constant(), pip_requirements=["mlflow"])
            models.append(info.model_uri)
    return uri, models


def _champion(uri: str) -> str:
    version = champion_version("synthetic", uri)
    assert version is not None, "no champion"
    return str(version.version)


class _Constant(PythonModel):
    """A real (trivial) logged model: registration needs a logged model, not just files."""

    def predict(self, context, model_input: list[str], params=None):  # hints as in EncoderPyfunc
        return [[1.0] for _ in model_input]


def test_degraded_model_is_registered_but_never_promoted(store) -> None:
    uri, models = store
    good = register(models[0], "synthetic", metric_tags({"P@1": 0.40, "PSP@5": 0.50}), uri)
    assert promote_if_better("synthetic", good, uri).promote
    degraded = register(models[1], "synthetic", metric_tags({"P@1": 0.10, "PSP@5": 0.20}), uri)
    decision = promote_if_better("synthetic", degraded, uri)
    assert not decision.promote
    client = mlflow.MlflowClient(uri)
    assert str(_champion(uri)) == good
    assert str(client.get_model_version_by_alias(model_name("synthetic"), "challenger").version) == degraded
    assert client.get_model_version(model_name("synthetic"), degraded).tags["promotion.decision"] == "rejected"
    better = register(models[2], "synthetic", metric_tags({"P@1": 0.45, "PSP@5": 0.50}), uri)
    assert promote_if_better("synthetic", better, uri).promote
    assert str(_champion(uri)) == better
    assert all(v.current_stage in ("None", None)
               for v in client.search_model_versions(f"name='{model_name('synthetic')}'"))


def test_a_lead_within_noise_is_rejected_and_a_significant_one_promoted() -> None:
    from xc_core.tracking.registry import PairedLead

    policy = PromotionPolicy(primary="P@1", guards={})
    noise = PairedLead(diff=0.002, low=-0.0015, high=0.0055, p=0.24, rows=2744, confidence=0.95)
    held = decide({"P@1": 0.3994}, {"P@1": 0.3972}, policy, noise)
    assert not held.promote and "within noise" in held.reason and "[-0.0015, +0.0055]" in held.reason
    assert json.loads(held.as_tags()["promotion.paired"])["low"] == -0.0015
    clear = PairedLead(diff=0.047, low=0.036, high=0.059, p=0.001, rows=2744, confidence=0.95)
    assert decide({"P@1": 0.3994}, {"P@1": 0.3520}, policy, clear).promote
    # no paired comparison: point estimates decide, and the reason says so
    alone = decide({"P@1": 0.3994}, {"P@1": 0.3972}, policy, None)
    assert alone.promote and "point estimates decided" in alone.reason
    # confidence 0 switches the paired rule off
    assert decide({"P@1": 0.3994}, {"P@1": 0.3972}, policy.model_copy(update={"confidence": 0.0}), noise).promote


def test_a_significant_but_small_lead_is_rejected_by_min_lead_and_promoted_without() -> None:
    from xc_core.tracking.registry import PairedLead

    policy = PromotionPolicy(primary="P@1", guards={})
    strict = policy.model_copy(update={"min_lead": 0.005})  # half a P@1 point
    # aol-1000's ramen_no_bandit: +0.07 points, significant over ~55k paired queries
    small = PairedLead(diff=0.0007, low=0.0001, high=0.0012, p=0.01, rows=54994, confidence=0.95)
    assert decide({"P@1": 0.4007}, {"P@1": 0.4000}, policy, small).promote
    held = decide({"P@1": 0.4007}, {"P@1": 0.4000}, strict, small)
    assert not held.promote and "within noise" not in held.reason
    assert "lead +0.0007 is below the minimum lead min_lead = 0.0050" in held.reason
    assert "[+0.0001, +0.0012]" in held.reason  # the interval still shows: significant, just too small
    clear = PairedLead(diff=0.047, low=0.036, high=0.059, p=0.001, rows=2744, confidence=0.95)
    passed = decide({"P@1": 0.3994}, {"P@1": 0.3520}, strict, clear)
    assert passed.promote and "lead +0.0474 ≥ min_lead 0.0050" in passed.reason
    assert decide({"P@1": 0.405}, {"P@1": 0.400}, strict).promote  # exactly min_lead, despite float rounding
    # a lead within noise is named as such first: significance is checked before size
    noise = PairedLead(diff=0.002, low=-0.0015, high=0.0055, p=0.24, rows=2744, confidence=0.95)
    assert "within noise" in decide({"P@1": 0.3994}, {"P@1": 0.3972}, strict, noise).reason


def test_a_lead_below_min_lead_is_rejected_without_a_paired_comparison_too() -> None:
    strict = PromotionPolicy(primary="P@1", guards={}, min_lead=0.005)
    for policy in (strict, strict.model_copy(update={"confidence": 0.0})):
        alone = decide({"P@1": 0.4030}, {"P@1": 0.4000}, policy, None)
        assert not alone.promote and "lead +0.0030 is below the minimum lead min_lead = 0.0050" in alone.reason
        assert decide({"P@1": 0.4100}, {"P@1": 0.4000}, policy, None).promote
    assert decide({"P@1": 0.3}, None, strict).promote  # the first model has no lead to measure
    with pytest.raises(ValueError, match="min_lead"):
        PromotionPolicy(min_lead=-0.01)


def _evaluation(home: Path, method: str, run_id: str, hits: np.ndarray, split: str = "split-a",
                on: str = "test") -> dict[str, str]:
    """The files an evaluation on the ``on`` split leaves (metrics.json, per_row.npz) and the tags its registered
    version gets."""
    from xc_core.paths import eval_dir

    folder = eval_dir(home, "synthetic", method, "demo", on)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.json").write_text(json.dumps({"mlflow_run_id": run_id, "test_split": split,
                                                     "P@1": float(hits.mean())}))
    np.savez(folder / "per_row.npz", **{"P@1": hits})  # type: ignore[arg-type]  # numpy stub: **dict may hold allow_pickle
    pl.DataFrame({"bin": [0], "P@5": [float(hits.mean()) / 5]}).write_parquet(folder / "quantiles.parquet")
    return {"dataset": "synthetic", "method": method, "profile": "demo", "mlflow_run_id": run_id}


def _churn(hits: np.ndarray, gained: int, lost: int) -> np.ndarray:
    out = hits.copy()
    out[np.flatnonzero(hits == 0)[:gained]] = 1.0
    out[np.flatnonzero(hits == 1)[:lost]] = 0.0
    return out


def test_paired_lead_compares_the_same_queries_only(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    champion = (rng.random(3000) < 0.40).astype(np.float64)
    noisy = _churn(champion, gained=36, lost=30)  # different queries right and wrong: net +0.002
    better = np.maximum(champion, (rng.random(3000) < 0.10).astype(np.float64))  # ~+6 points
    base = _evaluation(tmp_path, "dual_encoder", "run-1", champion)
    small = paired_lead(tmp_path, _evaluation(tmp_path, "ramen", "run-2", noisy), base, "P@1")
    assert small is not None and small.rows == 3000 and 0 < small.diff <= 0.004 and small.low <= 0 < small.high
    large = paired_lead(tmp_path, _evaluation(tmp_path, "auggt", "run-3", better), base, "P@1")
    assert large is not None and large.low > 0.04
    # another test split, or an evaluation overwritten by a later training: no paired comparison
    assert paired_lead(tmp_path, _evaluation(tmp_path, "ramen", "run-4", noisy, split="split-b"), base, "P@1") is None
    assert paired_lead(tmp_path, {**base, "method": "auggt"}, {**base, "mlflow_run_id": "run-0"}, "P@1") is None


def test_promotion_through_the_registry_uses_the_paired_interval(store, tmp_path: Path) -> None:
    uri, models = store
    rng = np.random.default_rng(1)
    champion = (rng.random(3000) < 0.40).astype(np.float64)
    noisy = _churn(champion, gained=36, lost=30)
    first_tags = _evaluation(tmp_path, "dual_encoder", "run-1", champion)
    first = register(models[0], "synthetic", {**first_tags, **metric_tags({"P@1": champion.mean()})}, uri)
    assert promote_if_better("synthetic", first, uri, home=tmp_path).promote
    tags = _evaluation(tmp_path, "ramen", "run-2", noisy)
    second = register(models[1], "synthetic", {**tags, **metric_tags({"P@1": noisy.mean()})}, uri)
    decision = promote_if_better("synthetic", second, uri, home=tmp_path)
    assert not decision.promote and decision.paired is not None and "within noise" in decision.reason
    assert str(_champion(uri)) == first
    version = mlflow.MlflowClient(uri).get_model_version(model_name("synthetic"), second)
    assert version.tags["promotion.decision"] == "rejected"
    assert json.loads(version.tags["promotion.paired"])["rows"] == 3000


def test_the_gate_decides_on_the_promotion_split_and_reads_no_test_row(store, tmp_path: Path) -> None:
    """Issue #64: each version is gated on its validation rows; its test figures ride along as tags, shown beside the
    decision (a challenger that wins on validation and loses on test is said) and read by no rule — deleting every
    test evaluation, or turning its rows upside down, leaves the decision as it was."""
    import shutil

    from xc_core.paths import eval_dir
    from xc_core.tracking.registry import PROMOTION_SPLIT, SPLIT_TAG, TEST_PREFIX, gate

    uri, models = store
    rng = np.random.default_rng(2)
    champion_val = (rng.random(3000) < 0.40).astype(np.float64)
    challenger_val = np.maximum(champion_val, (rng.random(3000) < 0.10).astype(np.float64))  # ~+6 points
    champion_test = (rng.random(2000) < 0.45).astype(np.float64)
    challenger_test = _churn(champion_test, gained=0, lost=100)  # worse on test by 5 points

    def registered(method: str, run_id: str, val: np.ndarray, test: np.ndarray, model: str) -> str:
        tags = _evaluation(tmp_path, method, run_id, val, split="val-a", on=PROMOTION_SPLIT)
        _evaluation(tmp_path, method, run_id, test, split="test-a", on="test")
        test_tags = {TEST_PREFIX + k: v for k, v in metric_tags({"P@1": test.mean()}).items()}
        return register(model, "synthetic", {**tags, **metric_tags({"P@1": val.mean()}), **test_tags,
                                             SPLIT_TAG: PROMOTION_SPLIT}, uri)

    first = registered("dual_encoder", "run-1", champion_val, champion_test, models[0])
    assert promote_if_better("synthetic", first, uri, home=tmp_path).promote
    second = registered("ramen", "run-2", challenger_val, challenger_test, models[1])
    client, name = mlflow.MlflowClient(uri), model_name("synthetic")
    policy = PromotionPolicy(primary="P@1", guards={})

    def decided() -> tuple[bool, str, str]:
        found = gate(tmp_path, client.get_model_version(name, second), client.get_model_version(name, first), policy)
        return found.promote, found.reason, found.test_view()

    promote, reason, view = decided()
    assert promote and "paired validation queries" in reason and "over 3000" in reason
    assert view.startswith("decided on the validation split") and "the test disagrees" in view
    assert f"{challenger_test.mean():.4f}" in view and f"{champion_test.mean():.4f}" in view
    for method, run_id in (("dual_encoder", "run-1"), ("ramen", "run-2")):  # upside-down test rows
        _evaluation(tmp_path, method, run_id, 1 - (challenger_test if method == "ramen" else champion_test),
                    split="test-a", on="test")
    assert decided() == (promote, reason, view)
    for method in ("dual_encoder", "ramen"):
        shutil.rmtree(eval_dir(tmp_path, "synthetic", method, "demo"))
    assert decided() == (promote, reason, view)
    decision = promote_if_better("synthetic", second, uri, home=tmp_path)
    assert decision.promote and _champion(uri) == second
    tags = client.get_model_version(name, second).tags
    assert tags["promotion.decided_on"] == "validation" and "the test disagrees" in tags["promotion.test_view"]


def test_a_champion_gated_on_the_test_split_is_rescored_on_validation_or_the_gate_says_how(
        store, tmp_path: Path) -> None:
    """A champion registered before promotion splits (its metric tags are test figures) is compared on its
    validation evaluation when its run has one, and otherwise the gate rejects with the command that makes one —
    never a validation figure against a test figure."""
    from xc_core.tracking.registry import PROMOTION_SPLIT, SPLIT_TAG, gate

    uri, models = store
    rng = np.random.default_rng(3)
    old_test = (rng.random(3000) < 0.60).astype(np.float64)  # a high test figure the challenger could never beat
    old = register(models[0], "synthetic", {**_evaluation(tmp_path, "dual_encoder", "run-1", old_test),
                                            **metric_tags({"P@1": old_test.mean()})}, uri)
    assert promote_if_better("synthetic", old, uri, home=tmp_path).promote
    challenger_val = (rng.random(3000) < 0.45).astype(np.float64)
    new = register(models[1], "synthetic", {
        **_evaluation(tmp_path, "ramen", "run-2", challenger_val, split="val-a", on=PROMOTION_SPLIT),
        **metric_tags({"P@1": challenger_val.mean()}), SPLIT_TAG: PROMOTION_SPLIT}, uri)
    client, name = mlflow.MlflowClient(uri), model_name("synthetic")
    policy = PromotionPolicy(primary="P@1", guards={})
    versions = client.get_model_version(name, new), client.get_model_version(name, old)
    refused = gate(tmp_path, *versions, policy)
    assert not refused.promote and "xc eval --split validation --method dual_encoder" in refused.reason
    old_val = np.minimum(challenger_val, (rng.random(3000) < 0.8).astype(np.float64))  # ~9 points below
    _evaluation(tmp_path, "dual_encoder", "run-1", old_val, split="val-a", on=PROMOTION_SPLIT)
    rescored = gate(tmp_path, *versions, policy)
    assert rescored.promote and rescored.champion is not None
    assert rescored.champion["P@1"] == pytest.approx(old_val.mean())
    assert "paired validation queries" in rescored.reason
