"""One interface for the fused search's channels (lexical, hybrid, click memory, popularity, names).

A channel scores (query, label) pairs beside the two dense scores every fused model has (the encoder's text vector
and W). The stage, its fusion grid and the served search never name a channel: they loop over the registry
(``channels.py``), and each entry says how its channel is fitted, stored and weighted. A new channel is one module
(a :class:`Channel` subclass and its :class:`ChannelSpec`) plus one line in ``channels.CHANNELS``.

The fused score of a candidate label is ``alpha * encoder + (1 - alpha) * W`` plus, for every channel, its weight
times its score, plus the per-label offsets. Weights are chosen out of fold (``stage.py``); 0 switches a channel off.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from xc_core.classifier.shortlist import scores_on, union_ids

#: a ``ClassifierConfig`` (not imported here: the config imports the channels' own settings, which import this)
ClassifierConfig = Any


@dataclass(frozen=True)
class FitData:
    """What a channel may be fitted on: the fit documents (texts, the encoder's vectors, labels, click days) and the
    catalogue's label texts."""

    texts: list[str]
    vectors: np.ndarray  # (documents, dim)
    labels: sp.csr_matrix  # (documents, labels) 0/1
    clicks: sp.csr_matrix  # (documents, labels) click days (the 0/1 labels where the data set records none)
    label_texts: list[str]


class Proposal:
    """A channel's answer for a batch of queries: the labels it adds to the shortlist (``ids``, −1 padded; zero
    columns for a channel that adds none) and its score of any candidate (``scores_on``)."""

    def __init__(self, ids: np.ndarray, score: Callable[[np.ndarray], np.ndarray]) -> None:
        self.ids = ids
        self._score = score

    def scores_on(self, candidates: np.ndarray) -> np.ndarray:
        """(rows, candidates) float32 scores; 0 on −1 pads."""
        return self._score(candidates)

    def rows_with_labels(self) -> np.ndarray:
        """Per query: whether the channel proposes any label for it (the click memory: a query it knows)."""
        return np.asarray((self.ids >= 0).any(axis=1))

    @classmethod
    def listed(cls, scores: np.ndarray, ids: np.ndarray) -> Proposal:
        """A channel that scores only the labels it lists itself (0 elsewhere)."""
        return cls(ids, lambda candidates: scores_on(ids, scores, candidates))


class Channel(abc.ABC):
    """A fitted channel. ``propose`` is the only call a search makes; ``store`` writes it into a classifier folder
    (its :class:`ChannelSpec` reads it back)."""

    #: whether ``propose`` reads the query texts (a search then needs them)
    needs_texts: bool = True

    @abc.abstractmethod
    def propose(self, texts: list[str], queries: np.ndarray, depth: int) -> Proposal:
        """Its shortlist (at most ``depth`` labels a query, its best) and scores for ``texts`` / ``queries`` (the
        encoder's vectors of the same queries)."""

    @abc.abstractmethod
    def store(self, folder: Path) -> None:
        """Write the channel into the classifier folder ``folder`` (at its spec's ``saved_as``)."""

    @property
    @abc.abstractmethod
    def megabytes(self) -> float: ...

    def label_scores(self) -> np.ndarray | None:
        """A per-label prior's score of every label (its weight times it joins the served model's label offsets);
        None for a channel that scores (query, label) pairs."""
        return None

    def alone(self, texts: list[str], queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Top-``k`` (scores, label ids) by this channel alone, for the report's trade-off table; None: not shown."""
        return None

    def grown(self, n_new: int) -> Channel:
        """The channel over a catalogue grown by ``n_new`` labels that have no click yet (they follow the current
        ids). The default: the new labels score 0 here, and the channel is unchanged."""
        return self

    def record(self) -> dict[str, Any] | None:
        """What the fit should leave in the classifier's ``fusion.json`` (None: nothing)."""
        return None


def proposals(channels: dict[str, Channel], texts: list[str], queries: np.ndarray, depth: int,
              candidates: np.ndarray) -> tuple[np.ndarray, dict[str, Proposal]]:
    """Each channel's proposal for a batch of queries (in the order given: the registry's), and ``candidates`` ∪
    every label they propose — the one shortlist the fusion grid and the served search both build."""
    proposed = {name: channel.propose(texts, queries, depth) for name, channel in channels.items()}
    for proposal in proposed.values():
        if proposal.ids.shape[1]:
            candidates = union_ids(candidates, proposal.ids)
    return candidates, proposed


Step = Literal["joint", "each", "prior"]


@dataclass(frozen=True)
class ChannelSpec:
    """A registry entry: how the stage fits, weights, stores and loads one channel.

    ``step`` says where the out-of-fold selection (``stage.fusion_selector``) chooses its weight: ``joint`` on the
    grid with α and the other joint channels, ``each`` after them one channel at a time in registry order, ``prior``
    with the untrained-label offset, in the seen-label view (a per-label prior orders the labels with clicks among
    themselves)."""

    name: str
    weight_key: str  # its weight's name in a fusion, ``fusion.json`` and the MLflow metrics
    step: Step
    grid: Callable[[ClassifierConfig], tuple[float, ...]]  # the weights tried out of fold (0 = off)
    fit: Callable[[FitData, ClassifierConfig], Channel]
    load: Callable[[Path], Channel]  # from a classifier folder
    saved_as: str  # the file or folder it stores in a classifier folder (checked before loading)

    @property
    def prior(self) -> bool:
        return self.step == "prior"

    def tried(self, cfg: ClassifierConfig) -> bool:
        """Whether any weight > 0 is tried, so the channel is worth fitting."""
        return any(w > 0 for w in self.grid(cfg))


def configured(name: str, default: tuple[float, ...]) -> Callable[[ClassifierConfig], tuple[float, ...]]:
    """The weight grid of a channel without a field of its own in the config: ``cfg.channel_weights[name]``, else
    ``default``."""
    return lambda cfg: tuple(cfg.channel_weights.get(name, default))

