"""Registry and gated promotion on a real sqlite MLflow store: first model becomes champion, a degraded
model is registered but never promoted, a better one is."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest

from xc_core.tracking.registry import (PromotionPolicy, champion_version, decide, metric_tags, model_name,
                                       promote_if_better, register)


def test_decision_rule_primary_must_improve_and_guards_must_hold() -> None:
    policy = PromotionPolicy(primary="P@1", guards={"PSP@5": 0.01})
    assert decide({"P@1": 0.3}, None, policy).promote
    assert not decide({"P@1": 0.3, "PSP@5": 0.5}, {"P@1": 0.3, "PSP@5": 0.5}, policy).promote  # not strictly better
    worse_tail = decide({"P@1": 0.4, "PSP@5": 0.45}, {"P@1": 0.3, "PSP@5": 0.5}, policy)
    assert not worse_tail.promote and "guard PSP@5" in worse_tail.reason
    assert decide({"P@1": 0.4, "PSP@5": 0.495}, {"P@1": 0.3, "PSP@5": 0.5}, policy).promote


@pytest.fixture
def store(tmp_path: Path) -> str:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    models = []
    for _ in range(3):
        with mlflow.start_run(experiment_id=experiment):
            info = mlflow.pyfunc.log_model(name="encoder", python_model=_Constant(), pip_requirements=["mlflow"])
            models.append(info.model_uri)
    return uri, models  # type: ignore[return-value]


class _Constant(mlflow.pyfunc.PythonModel):
    """A real (trivial) logged model: registration needs a logged model, not just files."""

    def predict(self, context, model_input: list[str], params=None):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        return [[1.0] for _ in model_input]


def test_degraded_model_is_registered_but_never_promoted(store) -> None:  # type: ignore[no-untyped-def]
    uri, models = store
    good = register(models[0], "synthetic", metric_tags({"P@1": 0.40, "PSP@5": 0.50}), uri)
    assert promote_if_better("synthetic", good, uri).promote
    degraded = register(models[1], "synthetic", metric_tags({"P@1": 0.10, "PSP@5": 0.20}), uri)
    decision = promote_if_better("synthetic", degraded, uri)
    assert not decision.promote
    client = mlflow.MlflowClient(uri)
    assert str(champion_version("synthetic", uri).version) == good
    assert str(client.get_model_version_by_alias(model_name("synthetic"), "challenger").version) == degraded
    assert client.get_model_version(model_name("synthetic"), degraded).tags["promotion.decision"] == "rejected"
    better = register(models[2], "synthetic", metric_tags({"P@1": 0.45, "PSP@5": 0.50}), uri)
    assert promote_if_better("synthetic", better, uri).promote
    assert str(champion_version("synthetic", uri).version) == better
    assert all(v.current_stage in ("None", None) for v in client.search_model_versions(f"name='{model_name('synthetic')}'"))
