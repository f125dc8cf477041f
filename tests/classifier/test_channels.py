"""The channel interface: a new channel is one module (its Channel and ChannelSpec, here this file) plus one registry
entry (here added by monkeypatch), and the stage's selection, its record, the saved model and the served search take
it up with no other change."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.classifier import channels
from xc_core.classifier.channel import Channel, ChannelSpec, FitData, Proposal, configured

TOY_FILE = "toy.json"


@dataclass
class HashTagChannel(Channel):
    """A toy channel: a query text holding ``#<id>`` names label ``<id>`` (score 1)."""

    n_labels: int

    def propose(self, texts: list[str], queries: np.ndarray, depth: int) -> Proposal:
        named = [[int(m) for m in re.findall(r"#(\d+)", text) if int(m) < self.n_labels][:depth] for text in texts]
        ids = np.full((len(texts), max([1, *(len(n) for n in named)])), -1, np.int64)
        for row, labels in enumerate(named):
            ids[row, :len(labels)] = labels
        return Proposal.listed(np.where(ids >= 0, 1.0, 0.0).astype(np.float32), ids)

    def store(self, folder: Path) -> None:
        (folder / TOY_FILE).write_text(json.dumps({"n_labels": self.n_labels}))

    @property
    def megabytes(self) -> float:
        return 0.0


TOY = ChannelSpec("hashtag", "hashtag_weight", "each", grid=configured("hashtag", (0.0, 0.5, 2.0)),
                  fit=lambda data, cfg: HashTagChannel(len(data.label_texts)),
                  load=lambda folder: HashTagChannel(**json.loads((folder / TOY_FILE).read_text())),
                  saved_as=TOY_FILE)


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channels, "CHANNELS", (*channels.CHANNELS, TOY))  # the one registry line


def _rows(tagged: np.ndarray) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray, list[str]]:
    """Every row's truth is ``positive``, which the encoder ranks below a decoy; its text tags ``tagged``."""
    rng = np.random.default_rng(0)
    n_labels, dim = 100, 32
    labels = rng.normal(size=(n_labels, dim)).astype(np.float32)
    labels /= np.linalg.norm(labels, axis=1, keepdims=True)
    positive = np.arange(len(tagged)) % n_labels
    decoy = (positive + 1) % n_labels
    queries = 0.5 * labels[positive] + 0.7 * labels[decoy] + 0.05 * rng.normal(size=(len(tagged), dim))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    truth = sp.csr_matrix((np.ones(len(tagged)), (np.arange(len(tagged)), positive)), shape=(len(tagged), n_labels))
    return queries, truth, labels, [f"query {i} #{t}" for i, t in enumerate(tagged)]


def _config() -> object:
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.lexical import LexicalConfig

    return ClassifierConfig(alphas=(1.0,), lexical=LexicalConfig(weights=(0.0,)), linear_weights=(0.0,),
                            memory_weights=(0.0,), popularity_weights=(0.0,), name_weights=(0.0,),
                            untrained_offsets=(0.0,), tail_offsets=(0.0,))


@pytest.mark.usefixtures("toy_registered")
def test_a_registered_toy_channel_is_fitted_chosen_out_of_fold_and_recorded() -> None:
    from xc_core.classifier.stage import FusionGrid, choose_fusion, fit_channels

    n_rows = 400
    assert "hashtag_weight" in channels.fusion_keys()
    for case in ("tags the truth", "tags elsewhere"):
        queries, truth, labels, texts = _rows(np.arange(n_rows) % 100 if case == "tags the truth"
                                              else (np.arange(n_rows) + 50) % 100)
        data = FitData(texts, queries, truth, truth, [f"label {i}" for i in range(100)])
        fitted, seconds = fit_channels(data, _config())  # type: ignore[arg-type]
        assert set(fitted) == set(seconds) == {"hashtag"}, "only channels with a weight > 0 to try are fitted"
        grid = FusionGrid(queries, truth, labels, labels, 5, np.empty((0, 2), np.int64), np.ones(100),
                          channels=fitted, texts=texts)
        served, tests, _ = choose_fusion(grid, _config())  # type: ignore[arg-type]
        assert tests["fusion"]["kept"] is (case == "tags the truth"), (case, tests["fusion"]["reason"])
        assert (served["hashtag_weight"] > 0) is (case == "tags the truth")
        if case == "tags the truth":
            assert served["P@1"] == 1.0, "the tagged label joins the 5-deep shortlist and outranks the decoy"
            assert tests["fusion"]["served"] == {"alpha": 1.0, "hashtag_weight": served["hashtag_weight"]}


@pytest.mark.usefixtures("toy_registered")
def test_a_registered_toy_channel_is_saved_loaded_and_served(tmp_path: Path) -> None:
    from xc_core.classifier import ClassifierConfig
    from xc_core.classifier.channels import Fusion
    from xc_core.classifier.fusion import FusedClassifier, fused_search
    from xc_core.index import IndexConfig, LabelIndex

    queries, _, labels, texts = _rows(np.array([7, 42]))
    fused = FusedClassifier(labels, Fusion(hashtag_weight=2.0), 3, channels={"hashtag": HashTagChannel(100)})
    loaded = FusedClassifier.load(fused.save(tmp_path / "clf"))
    assert loaded.weight("hashtag") == 2.0 and loaded.uses_texts and (tmp_path / "clf" / TOY_FILE).exists()
    index = LabelIndex.build(labels, None, IndexConfig(kind="flat"))
    _, ids = fused_search(queries, index, index, labels, loaded, 3, texts=texts)
    assert ids[:, 0].tolist() == [7, 42], "the tagged label first, though the 3-deep ANN shortlists may miss it"
    _, plain = fused_search(queries, index, index, labels, loaded.with_fusion(hashtag_weight=0.0), 3)
    assert plain[:, 0].tolist() != [7, 42], "without the channel the decoys lead: the test can fail"
    (tmp_path / "clf" / TOY_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=f"hashtag_weight 2.0 but no {TOY_FILE}"):
        FusedClassifier.load(tmp_path / "clf")
    cfg = ClassifierConfig(channel_weights={"hashtag": (0.0, 1.0)})
    assert TOY.grid(cfg) == (0.0, 1.0) and TOY.grid(ClassifierConfig()) == (0.0, 0.5, 2.0)


def test_a_fusion_names_only_registered_weights_and_is_hashable() -> None:
    from xc_core.classifier.channels import ENCODER_ONLY, Fusion

    fusion = Fusion(alpha=0.5, memory_weight=0.8)
    assert fusion == Fusion({"memory_weight": 0.8, "alpha": 0.5}) and hash(fusion) == hash(Fusion(alpha=0.5,
                                                                                             memory_weight=0.8))
    assert fusion["name_weight"] == 0.0 and fusion.weight("memory") == 0.8 and ENCODER_ONLY.alpha == 1.0
    assert fusion.replace(memory_weight=0.0) == Fusion(alpha=0.5) != fusion
    assert fusion.changed() == {"alpha": 0.5, "memory_weight": 0.8}
    with pytest.raises(KeyError, match="hashtag_weight"):
        Fusion(hashtag_weight=1.0)  # not registered here
    with pytest.raises(KeyError, match="no classifier channel named 'nope'"):
        channels.spec("nope")
