"""End-to-end training on the tiny profile: learning happens, resume after SIGKILL is exact, DDP ranks stay
in sync, and the MLflow run holds everything the registry will need."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xc_core.datasets.container import XCDataset
from xc_core.measure import free_port


def _launch(home: Path, anchors: Path, out: Path, digest: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "xc_core.stages.launch", "--anchors", str(anchors), "--method", "ramen",
           "--profile", "tiny", "--home", str(home), "--no-mlflow", "--out", str(out), "--digest-dir", str(digest),
           "--last-epoch", *extra]  # the trained parameters, not a selected start, are compared
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_tiny_ramen_lowers_the_task_loss_and_raises_validation_recall(tiny_data: XCDataset, tiny_home: Path,
                                                                      tmp_path: Path) -> None:
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    # learning itself is under test: the last epoch is served (tiny validation cannot show significance), scored on
    # held-out documents (the tiny log's temporal validation is a few days of mostly repeated queries)
    cfg = profile.train.model_copy(update={"epochs": 4, "select_best": False, "val_split": "documents"})
    trainer = Trainer(tiny_data, encoder_config(profile, tiny_home), cfg, tmp_path / "m")
    before_loss, before_recall = trainer.validation_task_loss(), trainer.validation_recall()
    result = trainer.fit()
    assert trainer.validation_task_loss() < before_loss
    assert result.val_recall > before_recall
    assert result.prune_log and set(result.prune_log[0]) >= {"epoch", *tiny_data.anchor_sets}
    assert len(result.lambda_trajectory) >= 1 and (result.encoder_dir / "model.safetensors").exists()


@pytest.fixture(scope="module")
def straight_digest(tiny_home: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The parameters' digest of one uninterrupted single-process training: the resumed run must end on it, and two
    DDP ranks on another."""
    from xc_core.paths import anchors_dir

    root = tmp_path_factory.mktemp("straight")
    straight = _launch(tiny_home, anchors_dir(tiny_home, "synthetic"), root / "out", root / "digest")
    assert straight.wait(timeout=300) == 0, straight.stderr.read() if straight.stderr else ""
    return (root / "digest" / "rank0.txt").read_text()


def test_resume_after_sigkill_ends_with_the_same_parameters(tiny_home: Path, straight_digest: str,
                                                            tmp_path: Path) -> None:
    from xc_core.paths import anchors_dir

    anchors = anchors_dir(tiny_home, "synthetic")
    victim = _launch(tiny_home, anchors, tmp_path / "b", tmp_path / "db", "--checkpoint-every", "3")
    from xc_core.training.checkpoint import latest

    deadline = time.time() + 120
    while time.time() < deadline:
        newest = latest(tmp_path / "b" / "checkpoint")
        if newest is not None and newest.name.startswith("step-00000006"):
            break
        time.sleep(0.02)
    assert victim.poll() is None, "training finished before it could be killed: make the run longer"
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    assert not (tmp_path / "db" / "rank0.txt").exists()
    resumed = _launch(tiny_home, anchors, tmp_path / "b", tmp_path / "db", "--checkpoint-every", "3", "--resume")
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read() if resumed.stderr else ""
    assert (tmp_path / "db" / "rank0.txt").read_text() == straight_digest


def test_two_gloo_ranks_train_in_sync(tiny_home: Path, straight_digest: str, tmp_path: Path) -> None:
    from xc_core.paths import anchors_dir

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
           "-m", "xc_core.stages.launch", "--anchors", str(anchors_dir(tiny_home, "synthetic")),
           "--method", "ramen", "--profile", "tiny", "--home", str(tiny_home), "--no-mlflow",
           "--out", str(tmp_path / "ddp"), "--digest-dir", str(tmp_path / "digest"), "--last-epoch"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    digests = [(tmp_path / "digest" / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert digests[0] == digests[1]
    assert straight_digest != digests[0]  # the ranks really split the batches: one process ends elsewhere


@pytest.mark.parametrize("method", ["ramen", "pretrained"])
def test_mlflow_run_holds_params_metrics_curves_and_a_loadable_pyfunc(tiny_data: XCDataset, tiny_home: Path,
                                                                     method: str) -> None:
    import mlflow

    from xc_core.stages.train import train_method

    summary = train_method(tiny_data, method, "tiny", tiny_home)
    client = mlflow.MlflowClient(summary["tracking_uri"])
    run = client.get_run(summary["mlflow_run_id"])
    assert run.data.tags["method"] == method and run.data.tags["dataset"] == "synthetic"
    assert run.data.params["train.margin"] == "0.3"
    assert "final_val_recall_at_10" in run.data.metrics
    if method == "ramen":
        assert "loss/task" in run.data.metrics and "lambda/task" in run.data.metrics
        assert "val/recall_at_10" in run.data.metrics and "examples_per_s" in run.data.metrics
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"training_curves.png", "lambda_trajectory.json", "prune_log.json"} <= artifacts
    model = mlflow.pyfunc.load_model(summary["model_uri"])
    vectors = model.predict(["red running shoes", "bank"])
    assert vectors.shape[0] == 2 and abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4


def test_fixed_anchors_give_the_same_loss_values_without_gradient_through_anchors(tiny_data: XCDataset,
                                                                                 tiny_home: Path,
                                                                                 tmp_path: Path) -> None:
    import numpy as np

    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    values = {}
    for grad in (True, False):
        trainer = Trainer(tiny_data, encoder_config(profile, tiny_home),
                          profile.train.model_copy(update={"anchor_grad": grad}), tmp_path / str(grad))
        trainer.encoder.model.eval()  # no dropout: both paths see the same function
        batch = trainer.builder.build(trainer.train_idx[:16], np.random.default_rng(3))
        losses = trainer.losses(batch)
        assert len(losses) > 1  # the regularizer terms are there
        values[grad] = {k: float(v) for k, v in losses.items()}
        anchors = trainer.encode_fixed([*batch.doc_texts, *batch.doc_texts])  # duplicates encoded once
        assert not anchors.requires_grad and anchors.shape[0] == 2 * len(batch.doc_texts)
    assert values[True] == pytest.approx(values[False], abs=1e-5)


def test_a_subsample_prunes_only_the_edges_its_batches_can_draw_with_the_same_decisions(
        tiny_data: XCDataset, tiny_home: Path, tmp_path: Path) -> None:
    import numpy as np

    from xc_core.graphs.pruning import prune_anchor_set
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    trainer = Trainer(tiny_data, encoder_config(profile, tiny_home),
                      profile.train.model_copy(update={"max_train_docs": 60, "prune_center": False}), tmp_path / "m")
    used_labels = set(tiny_data.y_train[trainer.train_idx].indices)
    for name, reachable in trainer.full_anchors.items():
        assert set(reachable.doc_edges[:, 0]) <= set(trainer.train_idx)
        assert set(reachable.label_edges[:, 0]) <= used_labels
        full = tiny_data.anchor_sets[name]
        assert len(reachable.doc_edges) + len(reachable.label_edges) < len(full.doc_edges) + len(full.label_edges)
    trainer._prune(1)
    doc_emb, label_emb = trainer.encode(tiny_data.train_texts), trainer.encode(tiny_data.label_texts)
    for name, reachable in trainer.full_anchors.items():  # same edges kept as pruning with every embedding
        expected, _ = prune_anchor_set(reachable, doc_emb, label_emb, trainer.encode(reachable.texts))
        np.testing.assert_array_equal(trainer.anchors[name].doc_edges, expected.doc_edges)
        np.testing.assert_array_equal(trainer.anchors[name].label_edges, expected.label_edges)


def test_validation_on_a_sampled_label_space_keeps_every_positive(tiny_data: XCDataset, tiny_home: Path,
                                                                  tmp_path: Path) -> None:
    import numpy as np

    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    enc = encoder_config(profile, tiny_home)
    full = Trainer(tiny_data, enc, profile.train, tmp_path / "a")
    sampled = Trainer(tiny_data, enc, profile.train.model_copy(update={"val_max_labels": 100}), tmp_path / "b")
    assert len(full.val_label_space) == len(tiny_data.label_texts) > 100
    space = sampled.val_label_space
    positives = np.unique(sampled.val_truth[sampled.val_idx].indices)
    assert len(space) == max(100, len(positives)) and set(positives) <= set(space)
    recall_full, recall_sampled = full.validation_recall(), sampled.validation_recall()
    assert recall_sampled >= recall_full  # fewer competitors for the same positives


@pytest.mark.parametrize("anchor_grad", [True, False])
def test_the_agreement_s_separate_passes_give_the_objective_s_terms_and_gradients(
        tiny_data: XCDataset, tiny_home: Path, tmp_path: Path, anchor_grad: bool) -> None:
    """The graph-worth check encodes each group of a batch's texts in a pass of its own (so a term's gradient runs
    back through its own texts only): every term and its gradient are those of the trainer's one shared pass."""
    import numpy as np
    import torch

    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.agreement import _flat_grad, _separate_losses
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    trainer = Trainer(tiny_data, encoder_config(profile, tiny_home),
                      profile.train.model_copy(update={"anchor_grad": anchor_grad, "regularize": True}), tmp_path)
    trainer.encoder.model.eval()
    params = [p for p in trainer.encoder.model.parameters() if p.requires_grad]
    batch = trainer.builder.build(trainer.train_idx[:16], np.random.default_rng(3))
    shared, separate = trainer.losses(batch), _separate_losses(trainer, batch)
    assert list(separate) == list(shared) == trainer.terms and len(shared) > 1
    for term in shared:
        assert float(separate[term]) == pytest.approx(float(shared[term]), abs=1e-5)
        one, other = _flat_grad(shared[term], params), _flat_grad(separate[term], params)
        assert float(torch.nn.functional.cosine_similarity(one, other, dim=0)) > 0.9999
