"""Validation mirrors the test protocol: on a folder where most documents are themselves labels (as in LF data
sets), the encoder alone scores the same on validation as on test — with the folder's train filter and, without
one, with own labels found by text — and `xc eval --split validation` reads the validation rows, never the test."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from xc_core.datasets.container import XCDataset

WORDS = [f"w{i}" for i in range(40)]


def titles_folder(folder: Path, train_filter: bool, n_labels: int = 150, n_train: int = 900, n_test: int = 300,
                  seed: int = 0) -> Path:
    """Labels are two-word titles; 65% of documents are a label's title (their own label: never a positive), the
    rest fresh two-word titles; a document's positives are up to three labels sharing a word with it. Ids are not
    shared, so only a filter file (or the text) says which label is a document's own."""
    rng = np.random.default_rng(seed)
    labels = list(dict.fromkeys(" ".join(rng.choice(WORDS, 2, replace=False)) for _ in range(4 * n_labels)))[:n_labels]

    def documents(n: int) -> tuple[list[str], list[list[int]], list[tuple[int, int]]]:
        texts, positives, own = [], [], []
        for row in range(n):
            if rng.random() < 0.65:
                label = int(rng.integers(n_labels))
                texts.append(labels[label])
                own.append((row, label))
            else:
                texts.append(" ".join(rng.choice(WORDS, 2, replace=False)))
            words = set(texts[-1].split())
            sharing = [j for j, t in enumerate(labels) if words & set(t.split()) and t != texts[-1]]
            positives.append(sorted(rng.choice(sharing, min(3, len(sharing)), replace=False).tolist()))
        return texts, positives, own

    folder.mkdir(parents=True)
    (folder / "Y.txt").write_text("".join(f"L{j}->{t}\n" for j, t in enumerate(labels)))
    for split, n in (("trn", n_train), ("tst", n_test)):
        texts, positives, own = documents(n)
        (folder / f"{split}_X.txt").write_text("".join(f"{split}{i}->{t}\n" for i, t in enumerate(texts)))
        body = "".join(" ".join(f"{j}:1" for j in row) + "\n" for row in positives)
        (folder / f"{split}_X_Y.txt").write_text(f"{n} {n_labels}\n{body}")
        if split == "tst" or train_filter:
            name = "filter_labels_test.txt" if split == "tst" else "filter_labels_train.txt"
            (folder / name).write_text("".join(f"{d} {j}\n" for d, j in own))
    return folder


def _p_at_1(home: Path, data: XCDataset, split: str) -> tuple[float, float]:
    """(P@1, its bootstrap interval's half-width) of the untrained tiny encoder on ``split``."""
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.stages.evaluate import evaluate_method, split_dirs

    summary = evaluate_method(data, "pretrained", "tiny", home, split=split)
    record = EvaluationRecord.load(split_dirs(home, data.name, "pretrained", "tiny", split)[1])
    assert record is not None
    _, low, high = record.ci()["P@1"]
    return float(summary["P@1"]), float(high - low) / 2


@pytest.mark.parametrize("train_filter", [True, False], ids=["train filter", "own labels by text"])
def test_encoder_only_validation_p_at_1_matches_test_within_noise(tmp_path: Path, train_filter: bool) -> None:
    from xc_core.datasets.xc_repo import read_xc_repo
    from xc_core.paths import dataset_dir
    from xc_core.stages.train import train_method

    home = tmp_path / "home"
    data = read_xc_repo(titles_folder(tmp_path / "LF-Titles", train_filter))
    data.save(dataset_dir(home, data.name))
    source = data.meta["own_label_pairs"]["train"]["source"]
    assert source == ("filter_labels_train.txt" if train_filter else "normalised text (no filter file)")
    train_method(data, "pretrained", "tiny", home)
    test, test_half = _p_at_1(home, data, "test")
    validation, val_half = _p_at_1(home, data, "validation")
    assert abs(validation - test) <= test_half + val_half, (validation, test)
    # the rule bites: without the own-label pairs a document's own title wins its validation ranking
    unfiltered = dataclasses.replace(data, train_filter_pairs=np.empty((0, 2), np.int64))
    blind, _ = _p_at_1(home, unfiltered, "validation")
    assert blind < test - test_half, (blind, test)


def test_validation_split_reads_only_training_documents_and_keeps_its_own_folders(tmp_path: Path) -> None:
    from xc_core.datasets.xc_repo import read_xc_repo
    from xc_core.stages.evaluate import split_dirs, validation_split
    from xc_core.training.record import TrainedModel

    data = read_xc_repo(titles_folder(tmp_path / "LF-Titles", train_filter=True, n_train=300, n_test=50))
    from xc_core.profiles import get_profile, train_settings
    from xc_core.training.validation import SplitSettingsMissing, split_record

    record = {"seed": 0, "validation_split": split_record(train_settings(get_profile("tiny")))}
    trained = TrainedModel(dataset=data.name, method="pretrained", profile="tiny", model_uri="", mlflow_run_id="",
                           tracking_uri="", folder=tmp_path, summary=record)
    view = validation_split(data, trained)
    assert set(view.test_texts) <= set(data.train_texts) and len(view.test_texts) + len(view.train_texts) == 300
    assert not set(view.test_ids) & set(data.test_ids) and not set(view.test_ids) & set(view.train_ids)
    rows = [data.train_ids.index(i) for i in view.test_ids]
    assert (view.y_test != data.y_train[rows]).nnz == 0
    own = {(view.test_ids[r], data.label_ids[j]) for r, j in view.filter_pairs}
    listed = {(data.train_ids[d], data.label_ids[j]) for d, j in data.train_filter_pairs}
    assert own == {pair for pair in listed if pair[0] in set(view.test_ids)} and own
    unrecorded = TrainedModel(dataset=data.name, method="pretrained", profile="tiny", model_uri="", mlflow_run_id="",
                              tracking_uri="", folder=tmp_path, summary={"seed": 0})
    with pytest.raises(SplitSettingsMissing, match="retrain it"):  # never the profile's guess
        validation_split(data, unrecorded)
    index, out = split_dirs(tmp_path, data.name, "pretrained", "tiny", "validation")
    assert out.parent.name == index.parent.name == "validation"
    with pytest.raises(ValueError, match="choose one of test, validation"):
        split_dirs(tmp_path, data.name, "pretrained", "tiny", "dev")


def test_a_clf_model_is_scored_on_validation_unless_its_classifier_saw_those_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #64: a -clf model's classifier stage holds the validation rows out (``hold_out_validation``), so the gate
    can decide on them; one trained with the setting off learnt from them, and `xc eval --split validation` says so
    in one line and exits 2."""
    from xc_core.classifier.fusion import FusedClassifier
    from xc_core.cli import main
    from xc_core.datasets.xc_repo import read_xc_repo
    from xc_core.paths import dataset_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.train import train_method

    home = tmp_path / "home"
    data = read_xc_repo(titles_folder(tmp_path / "LF-Titles", train_filter=True, n_train=60, n_test=20))
    data.save(dataset_dir(home, data.name))
    profile = get_profile("tiny")
    seen = profile.model_copy(update={"classifier": profile.classifier.model_copy(
        update={"hold_out_validation": False})})
    train_method(data, "pretrained", profile, home)
    evaluate = ["eval", "--dataset", data.name, "--method", "pretrained-clf", "--profile", "tiny", "--split",
                "validation", "--home", str(home), "--quiet"]
    unheld = train_method(data, "pretrained-clf", seen, home)
    assert not unheld["classifier_holds_out_validation"]
    pairs_seen = FusedClassifier.load(Path(unheld["classifier_dir"])).info["train_pairs"]
    capsys.readouterr()
    code = main(evaluate)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "in-sample" in err[0] and "hold_out_validation" in err[0], err
    held = train_method(data, "pretrained-clf", profile, home)
    assert held["classifier_holds_out_validation"]
    assert FusedClassifier.load(Path(held["classifier_dir"])).info["train_pairs"] < pairs_seen  # W saw fewer pairs
    capsys.readouterr()
    assert main(evaluate) == 0
    assert "P@1" in json.loads(capsys.readouterr().out)


def test_xc_eval_split_validation_rebuilds_the_split_the_model_recorded(tmp_path: Path) -> None:
    """Trained with --set val_fraction=0.3 --set val_max=100: the validation score covers that model's 30% (its
    recorded settings), not the profile's share."""
    from xc_core.datasets.xc_repo import read_xc_repo
    from xc_core.profiles import get_profile, train_settings
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.train import train_method
    from xc_core.training.validation import split_validation

    data = read_xc_repo(titles_folder(tmp_path / "LF-Titles", train_filter=True, n_train=200, n_test=30))
    overrides = {"val_fraction": 0.3, "val_max": 100}
    record = train_method(data, "pretrained", "tiny", tmp_path, overrides=overrides)
    assert record["validation_split"]["val_fraction"] == 0.3
    result = evaluate_method(data, "pretrained", "tiny", tmp_path, split="validation")
    recorded = train_settings(get_profile("tiny")).model_copy(update=overrides)
    profile_rows = len(split_validation(200, train_settings(get_profile("tiny")))[1])
    assert result["test_documents"] == len(split_validation(200, recorded)[1]) == 60 != profile_rows
