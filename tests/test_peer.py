"""The linear peer end to end: PECOS XR-Linear (libpecos, in .venv-peers) trained on a real small XC folder
exported by xc, its score matrix read back and scored by xc's own evaluation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from xc_core.stages import peer as peer_eval


def test_pecos_scores_the_same_split_with_xcs_metrics(tiny_home: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.record import fingerprint_test_split
    from xc_core.paths import anchors_dir, eval_dir

    if not peer_eval.PEER_PYTHON.exists():
        pytest.fail(f"{peer_eval.PEER_PYTHON} missing: `make test` builds it (`make peers`)")
    shutil.copytree(anchors_dir(tiny_home, "synthetic"), anchors_dir(tmp_path, "synthetic"))
    data = XCDataset.load(anchors_dir(tmp_path, "synthetic"))
    summary = peer_eval.evaluate_peer("synthetic", "tiny", [tmp_path])
    folder = tmp_path / "peers" / "synthetic"
    lines = (folder / "tst_X.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == len(data.test_texts), "one test document per line"
    assert json.loads((folder / "peer.json").read_text())["features"] > 0
    assert summary["method"] == "pecos" and summary["test_split"] == fingerprint_test_split(data)
    # a linear model on TF-IDF of simulated queries that name their intents finds far more than chance
    chance = float(np.mean(np.diff(data.y_test.tocsr().indptr))) / data.n_labels
    assert summary["P@1"] > 10 * chance
    out = eval_dir(tmp_path, "synthetic", "pecos", "tiny")
    assert {"per_row.npz", "ci.parquet", "metrics.json"} <= {p.name for p in out.iterdir()}
    # `xc peer` (the `peer_eval` asset's command) on the same home reuses the finished peer run, and writes the
    # same evaluation into every home it is given (the seed homes of `make results`)
    from xc_core.cli import main

    seed_home = tmp_path / "seed-1"
    assert main(["peer", "--dataset", "synthetic", "--profile", "tiny", "--homes", str(tmp_path), str(seed_home),
                 "--quiet"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["pecos"]["P@1"] == summary["P@1"] and again["pecos"]["test_split"] == summary["test_split"]
    assert (eval_dir(seed_home, "synthetic", "pecos", "tiny") / "per_row.npz").exists()
    assert json.loads((folder / "peer.json").read_text())["seconds"] > 0


def test_xc_run_refuses_an_unknown_peer_or_a_missing_peer_environment_before_any_stage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xc_assets.cli import main

    home = tmp_path / "home"
    run = ["run", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home), "--methods", "pretrained"]
    with pytest.raises(SystemExit, match=r"--peers linear: unknown peer linear: choose from pecos, pecos-xc"):
        main([*run, "--peers", "linear"])
    monkeypatch.setattr(peer_eval, "PEER_PYTHON", tmp_path / "no-venv" / "bin" / "python")
    with pytest.raises(SystemExit, match=r"--peers pecos: .*no-venv/bin/python missing: run `make peers` first"):
        main([*run, "--peers", "pecos"])
    assert not home.exists()  # refused before the home was made


def test_pecos_on_xcs_features_reads_the_encoders_vectors(tiny_home: Path, tmp_path: Path) -> None:
    """``pecos-xc``: the same peer on [TF-IDF ⊕ the untrained encoder's vectors], its own folder and eval name."""
    from xc_core.datasets.container import XCDataset
    from xc_core.paths import anchors_dir, eval_dir

    shutil.copytree(anchors_dir(tiny_home, "synthetic"), anchors_dir(tmp_path, "synthetic"))
    data = XCDataset.load(anchors_dir(tmp_path, "synthetic"))
    summary = peer_eval.evaluate_peer("synthetic", "tiny", [tmp_path], peer="pecos-xc")
    folder = tmp_path / "peers" / "synthetic-xc"
    assert np.load(folder / "trn_dense.npy").shape == (len(data.train_texts), 384)
    assert np.load(folder / "tst_dense.npy").shape == (len(data.test_texts), 384)
    info = json.loads((folder / "peer.json").read_text())
    assert info["feature_set"] == "hybrid" and info["dense_dim"] == 384 and info["features"] > 0
    assert summary["method"] == "pecos-xc"
    assert (eval_dir(tmp_path, "synthetic", "pecos-xc", "tiny") / "per_row.npz").exists()
    chance = float(np.mean(np.diff(data.y_test.tocsr().indptr))) / data.n_labels
    assert summary["P@1"] > 10 * chance
