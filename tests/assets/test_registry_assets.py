"""Gated promotion through Dagster: the first model becomes champion; a deliberately degraded model (the
untrained random tiny BERT) is registered as challenger, the gate keeps the alias where it was, and that run
is a success (a warning check with the reason), not a red failure."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import mlflow
import pytest

from xc_assets.defs.resources import XcHome
from xc_core.datasets.container import XCDataset
from xc_core.paths import anchors_dir, eval_dir
from xc_core.stages.evaluate import evaluate_method
from xc_core.stages.train import train_method
from xc_core.tracking.registry import CHALLENGER, model_name
from xc_core.tracking.store import tracking_uri


def _ensure_evaluated(home: Path, method: str) -> None:
    if not (eval_dir(home, "synthetic", method, "tiny") / "metrics.json").exists():
        data = XCDataset.load(anchors_dir(home, "synthetic"))
        train_method(data, method, "tiny", home)
        evaluate_method(data, method, "tiny", home)


def _promote(home: Path, method: str) -> dg.ExecuteInProcessResult:
    from xc_assets.launch import dataset_family

    with dg.instance_for_test() as instance:
        return dg.materialize(dataset_family("synthetic").promotion, instance=instance,
                              resources={"xc_home": XcHome(home=str(home))},
                              raise_on_error=False,
                              run_config={"ops": {"synthetic__challenger": {"config": {"method": method,
                                                                                       "profile": "tiny"}}}})


def _champion(result: dg.ExecuteInProcessResult) -> dg.AssetMaterialization:
    """The run's champion materialization: there after every gate, promoted or not (in sync in the UI)."""
    [found] = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()
               if e.step_materialization_data.materialization.asset_key.path[-1] == "champion"]
    return found


def _champion_done(result: dg.ExecuteInProcessResult) -> bool:
    """Whether the alias moved in that run."""
    return bool(_champion(result).metadata["changed"].value)


def test_first_model_is_champion_and_a_degraded_one_is_registered_but_never_promoted(tiny_home: Path) -> None:
    for method in ("ramen", "pretrained"):
        _ensure_evaluated(tiny_home, method)
    client = mlflow.MlflowClient(tracking_uri(tiny_home))
    first = _promote(tiny_home, "ramen")
    assert _champion_done(first), [e.description for e in first.get_asset_check_evaluations()]
    promoted = _champion(first)
    # the promotion links to serving: the command, its URL, and which version a running `xc serve` answers with
    serving = {key: str(promoted.metadata[key].value) for key in ("serve_command", "serve_url", "live_version")}
    assert serving["serve_command"].startswith("xc serve --dataset synthetic --home ")
    assert serving["serve_url"].endswith("/ready")
    assert serving["live_version"] == "not running"  # no service on the default port in tests
    champion = client.get_model_version_by_alias(model_name("synthetic"), "champion")
    degraded = _promote(tiny_home, "pretrained")
    gate = next(e for e in degraded.get_asset_check_evaluations() if e.asset_check_key.name == "beats_champion")
    assert not gate.passed and "does not beat" in (gate.description or "")
    assert gate.severity == dg.AssetCheckSeverity.WARN and gate.metadata["decision"].value == "rejected"
    assert degraded.success, "a rejected challenger is the gate working: the run must not be red"
    assert not _champion_done(degraded)
    # the champion is materialized anyway, with the version that still serves and the same data version, so the
    # UI shows it in sync with the gate that just ran (issue #66), not "Unsynced"
    kept = _champion(degraded)
    assert kept.metadata["champion_version"].value == str(champion.version)
    assert promoted.metadata["champion_version"].value == str(champion.version)
    assert (kept.tags or {})["dagster/data_version"] == (promoted.tags or {})["dagster/data_version"] \
        == f"v{champion.version}"
    challenger = client.get_model_version_by_alias(model_name("synthetic"), CHALLENGER)
    assert challenger.version != champion.version and challenger.tags["method"] == "pretrained"
    assert challenger.tags["promotion.decision"] == "rejected"
    assert "does not beat" in challenger.tags["promotion.reason"]
    assert client.get_model_version_by_alias(model_name("synthetic"), "champion").version == champion.version
    # the gate's simulated A/B test of the challenger against the champion ran and the check carries its lifts
    ab = next(e.step_materialization_data.materialization for e in degraded.get_asset_materialization_events()
              if e.step_materialization_data.materialization.asset_key.path[-1] == "ab_test")
    assert ab.metadata["mode"].value == "simulated" and "brand_bmr" in ab.metadata["summary"].value
    lifts = gate.metadata["ab_test"].value
    assert isinstance(lifts, dict) and set(lifts) >= {"brand_bmr", "location_bmr", "ctr"}


def test_xc_predict_answers_from_the_champion(tiny_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In this process: the bare CLI in a fresh one answers from a `make run`'s champion in tests/test_run.py."""
    import json

    from xc_core.cli import main
    from xc_core.tracking.registry import champion_version

    _ensure_evaluated(tiny_home, "ramen")
    if champion_version("synthetic", tracking_uri(tiny_home)) is None:
        assert _champion_done(_promote(tiny_home, "ramen"))
    capsys.readouterr()
    assert main(["predict", "red running shoes", "--dataset", "synthetic", "--k", "3", "--home", str(tiny_home)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["method"] == "ramen" and answer["model"] == "xc-encoder-synthetic@champion"
    assert len(answer["labels"]) == 3 and answer["labels"][0]["score"] >= answer["labels"][-1]["score"]


def test_min_lead_reaches_both_steps_of_the_gate_and_defaults_to_zero(tmp_path: Path) -> None:
    from xc_assets.defs.assets.registry_assets import PolicyConfig, _policy
    from xc_assets.launch import dataset_family, promotion_run_config

    challenger, ab_test, check, champion = dataset_family("synthetic").promotion
    job = dg.Definitions(assets=[challenger, ab_test, champion], asset_checks=[check],
                         resources={"xc_home": XcHome(home=str(tmp_path))}).resolve_implicit_global_asset_job_def()
    ops = dg.validate_run_config(job, promotion_run_config("synthetic", "ramen", "tiny", min_lead=0.005))["ops"]
    # the check decides and the champion step re-decides before the alias move: the same policy for both
    for step in ("synthetic__ab_test_beats_champion", "synthetic__champion"):
        assert _policy(PolicyConfig(**ops[step]["config"])).min_lead == 0.005
    assert _policy(PolicyConfig()).min_lead == 0.0
