"""The graph-worth check (issue #43): constructed anchor sets whose worth is known by construction get the verdict
they should, and ``ramen`` follows it — sets that do not add information start at λ = 0, and with none left it
trains exactly as ``dual_encoder``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xc_core.datasets.container import AnchorSet, XCDataset
from xc_core.graphs.worth import (
    ADDS,
    AGAINST,
    NOTHING,
    REPEATS,
    SetWorth,
    WorthConfig,
    graph_statistics,
    judge,
    verdict,
)
from xc_core.training.config import TrainConfig
from xc_core.training.validation import validation_split

N_DOCS, N_LABELS = 600, 60


def _world() -> XCDataset:
    """600 queries, each with one of 60 labels (query i → label i % 60); validation holds out documents."""
    rows = np.arange(N_DOCS)
    y = sp.csr_matrix((np.ones(N_DOCS, np.float32), (rows, rows % N_LABELS)), shape=(N_DOCS, N_LABELS))
    return XCDataset("worth", [f"query {i}" for i in rows], ["query test"], [f"label {j}" for j in range(N_LABELS)],
                     y, sp.csr_matrix((1, N_LABELS), dtype=np.float32))


def _split(data: XCDataset):
    return validation_split(data, TrainConfig(val_split="documents", val_fraction=0.2, val_min=100, seed=0))


def _check(data: XCDataset, sets: dict[str, AnchorSet]) -> dict[str, SetWorth]:
    split = _split(data)
    cfg = WorthConfig()
    return judge(graph_statistics(data, sets, split.y_fit, split.y_val, split.train_rows, split.val_rows, cfg), cfg)


def test_an_anchor_set_equal_to_the_training_labels_repeats_them() -> None:
    data = _world()
    train = _split(data).train_rows
    # each training query anchored on the text of its own training label: the label matrix as a graph
    edges = np.stack([train, train % N_LABELS], axis=1)
    found = _check(data, {"labels_again": AnchorSet("labels_again", list(data.label_texts), edges, np.empty((0, 2)))})
    worth = found["labels_again"]
    assert worth.redundancy == 1.0 and worth.novelty == 0.0
    assert worth.verdict == REPEATS, worth.reason


def test_anchors_that_carry_held_out_positives_add_information() -> None:
    data = _world()
    split = _split(data)
    train = split.train_rows
    # every query (validation ones too) anchored on a training query of the same label, as a co-session graph of
    # queries that share an intent: a held-out query reaches its positive through its neighbour's training label
    by_label = {j: train[train % N_LABELS == j] for j in range(N_LABELS)}
    edges = np.array([(i, next(t for t in by_label[i % N_LABELS] if t != i)) for i in range(N_DOCS)])
    found = _check(data, {"same_intent": AnchorSet("same_intent", list(data.train_texts), edges, np.empty((0, 2)))})
    worth = found["same_intent"]
    assert worth.novelty == 1.0 and worth.redundancy == 0.0 and worth.lift > 10
    assert worth.verdict == ADDS, worth.reason


def test_what_the_text_already_ranks_is_not_counted_beyond_text() -> None:
    """The same informative set: where the starting encoder already ranks every held-out positive first, the graph
    tells it nothing new; where it ranks none, all the set reaches is beyond the text."""
    data = _world()
    split = _split(data)
    train = split.train_rows
    by_label = {j: train[train % N_LABELS == j] for j in range(N_LABELS)}
    edges = np.array([(i, next(t for t in by_label[i % N_LABELS] if t != i)) for i in range(N_DOCS)])
    sets = {"same_intent": AnchorSet("same_intent", list(data.train_texts), edges, np.empty((0, 2)))}
    knows = (split.val_rows % N_LABELS)[:, None]
    found = [graph_statistics(data, sets, split.y_fit, split.y_val, train, split.val_rows, WorthConfig(),
                              text_top=top)["same_intent"] for top in (knows, np.full_like(knows, -1))]
    assert found[0].beyond_text == 0.0 and found[1].beyond_text == found[1].novelty == 1.0


def test_random_anchors_reach_held_out_positives_only_by_chance() -> None:
    data = _world()
    train = _split(data).train_rows
    rng = np.random.default_rng(0)
    edges = np.stack([np.arange(N_DOCS), rng.choice(train, N_DOCS)], axis=1)
    worth = _check(data, {"random": AnchorSet("random", list(data.train_texts), edges, np.empty((0, 2)))})["random"]
    assert worth.lift < 2 and worth.verdict == NOTHING, worth.reason


def test_a_gradient_against_the_task_outweighs_novelty() -> None:
    worth = SetWorth("s", novelty=0.5, chance=0.01, lift=50.0, redundancy=0.0, reached_per_document=3.0,
                     validation_positives=100, edges_drawn=100,
                     agreement={"cosine": -0.2, "mean": -0.2, "low": -0.3, "high": -0.1, "task_cosine": 0.5})
    assert verdict(worth, WorthConfig())[0] == AGAINST
    worth.agreement["high"] = 0.05  # the sign is not sure: novelty decides
    assert verdict(worth, WorthConfig())[0] == ADDS


@pytest.mark.parametrize("verdicts, as_dual_encoder", [({"cosession_queries": REPEATS, "click_graph": REPEATS,
                                                         "coclick_items": NOTHING}, True),
                                                        ({"cosession_queries": ADDS, "click_graph": REPEATS,
                                                          "coclick_items": NOTHING}, False)])
def test_ramen_follows_the_check(tiny_data: XCDataset, tiny_home: Path, tmp_path: Path, verdicts: dict[str, str],
                                 as_dual_encoder: bool) -> None:
    """Sets the check does not keep start at λ = 0; with no set left ramen's training is dual_encoder's, weight for
    weight."""
    import dataclasses

    import torch
    from safetensors.torch import load_file

    from xc_core.profiles import encoder_config, get_profile
    from xc_core.training.trainer import Trainer

    profile = get_profile("tiny")
    data = dataclasses.replace(tiny_data, meta={**tiny_data.meta, "graph_worth": {
        "sets": {name: {"verdict": v} for name, v in verdicts.items()}}})
    base = profile.train.model_copy(update={"epochs": 1, "select_best": False})
    ramen = Trainer(data, encoder_config(profile, tiny_home), base.model_copy(
        update={"regularize": True, "prune": True, "bandit": True}), tmp_path / "ramen")
    assert ramen.graph_worth["as_dual_encoder"] is as_dual_encoder
    if not as_dual_encoder:
        lambdas = ramen.bandit.lambdas()
        assert lambdas["doc/cosession_queries"] > 0
        assert all(v == 0.0 for t, v in lambdas.items() if t.startswith("label/"))
        return
    assert ramen.terms == ["task"]
    text_only = Trainer(data, encoder_config(profile, tiny_home), base.model_copy(
        update={"regularize": False, "prune": False, "bandit": False}), tmp_path / "dual")
    a, b = ramen.fit(), text_only.fit()
    wa, wb = load_file(str(a.encoder_dir / "model.safetensors")), load_file(str(b.encoder_dir / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_the_check_reads_held_out_anchors_as_the_training_settings_do(tmp_path: Path) -> None:
    from xc_core.profiles import get_profile
    from xc_core.stages.anchor_sets import assess_graph

    data = _world()
    # half the training queries anchored on the test query's text: dropped where held-out texts never act as anchors
    edges = np.stack([np.arange(0, N_DOCS, 2), np.zeros(N_DOCS // 2, np.int64)], axis=1)
    texts = ["query test", *data.train_texts]
    edges = np.concatenate([edges, np.stack([np.arange(1, N_DOCS, 2), np.arange(1, N_DOCS, 2) + 1], axis=1)])
    data.anchor_sets = {"mixed": AnchorSet("mixed", texts, edges, np.empty((0, 2)))}
    profile = get_profile("tiny")
    dropped = assess_graph(data, tmp_path, profile, use_encoder=False)["sets"]["mixed"]["edges_drawn"]
    kept = assess_graph(data, tmp_path, profile, use_encoder=False,
                        overrides={"exclude_heldout_anchors": False})["sets"]["mixed"]["edges_drawn"]
    assert 0 < dropped < kept


def test_the_check_ranks_with_the_vectors_the_anchor_stage_computed(tiny_data: XCDataset, tiny_home: Path) -> None:
    """The validation ranking of the check (what the text already knows) reads the anchor stage's vectors of the same
    encoder instead of encoding the texts again; a text the stage never embedded is encoded."""
    import numpy as np

    from xc_core.encoders import TextEncoder
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.stages.anchor_sets import KnownVectors

    encoder = TextEncoder(encoder_config(get_profile("tiny"), tiny_home))
    known = KnownVectors(encoder)
    labels = list(tiny_data.label_texts)
    stored = known.remember(labels, 2 * encoder.encode(labels))  # marked: the stage's rows, never re-encoded
    picked = [labels[2], labels[0], labels[2]]
    assert np.array_equal(known.encode(picked), stored[[2, 0, 2]])
    unseen = "a query the anchor stage never embedded"
    fresh = known.encode([unseen, labels[1]])
    assert np.allclose(fresh[0], encoder.encode([unseen])[0], atol=1e-5) and np.array_equal(fresh[1], stored[1])
