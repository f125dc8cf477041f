"""Named random streams: every seeded draw of training says which stream it comes from.

numpy's ``SeedSequence`` mixes all the integers it is given, so ``(seed, TAG)`` streams never overlap and
adding a draw to one stream never shifts another. The tags are part of every published number: changing one
changes results, so they are fixed here once (their values are arbitrary but frozen)."""

from __future__ import annotations

import numpy as np


class Stream:
    """Stream tags (plain ints: two streams may share a tag when their scopes differ)."""

    VALIDATION_SPLIT = 17  # which training documents are held out for validation (trainer and classifier)
    TRAIN_SUBSAMPLE = 23  # the documents a profile's max_train_docs keeps
    VALIDATION_LABELS = 31  # labels sampled beside the validation positives (val_max_labels)
    BANDIT_REWARD_BATCH = 99  # the fixed training-side mini-batch the bandit's reward is measured on
    PRUNE_PASS_RATES = 41  # random (document, label) pairs of the pruning pass-rate log, per epoch
    EPOCH_BATCHES = 7  # the order of documents into batches, per epoch
    FUSION_HALVES = 53  # the classifier stage's row folds of one grid: the fusion's cross-fitted test
    FALLBACK_HALVES = 61  # the other stages' row folds of validation rows: each fold ranked by the candidate the
    #                       others pick, against the do-nothing fallback (evaluation/fallback.py)
    CLASSIFIER_FOLDS = 67  # the classifier stage's out-of-fold refits: document folds and scored-row samples
    CLASSIFIER_NEGATIVES = 41  # the classifier stage's uniform negatives ([seed, 41]: no epoch scope, so
    #                            never the same stream as PRUNE_PASS_RATES' [seed, epoch, 41])
    LABEL_TREE = 71  # the hybrid channel's label tree: the 2-means seeds of every split
    GRAPH_WORTH = 43  # the graph-worth check's training and validation batches (training/agreement.py)


def rng(seed: int, stream: int, *scope: int) -> np.random.Generator:
    """The generator of ``stream`` for ``seed`` (``scope``: epoch, … where a stream restarts per epoch).

    Keeps the historical entropy order: ``[seed, tag]`` for whole-run streams, ``[seed, *scope, tag]`` for
    per-epoch ones."""
    return np.random.default_rng([seed, *scope, stream])


def step_rng(seed: int, epoch: int, step: int) -> np.random.Generator:
    """The batch-content stream (in-batch negatives sampled by the builder) of one training step."""
    return np.random.default_rng([seed, epoch, step])
