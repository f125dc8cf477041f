"""The registry of the fused search's channels, and :class:`Fusion`, the weights a fused model gives them.

Registry order is the order in which the fusion grid and the served search add the channels' scores (float sums:
the same order in both keeps a model's out-of-fold and served rankings equal), and the order in which the
selection chooses the ``each``-step weights. A new channel is a module with its :class:`~channel.Channel` and
:class:`~channel.ChannelSpec`, and one line below.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from xc_core.classifier import lexical, memory, names, xrlinear
from xc_core.classifier.channel import ChannelSpec

CHANNELS: tuple[ChannelSpec, ...] = (
    lexical.SPEC,  # TF-IDF nearest training documents
    xrlinear.SPEC,  # "hybrid": XR-Linear on TF-IDF ⊕ the encoder's vector
    memory.MEMORY,  # a repeated query's clicked labels
    memory.POPULARITY,  # the labels' click popularity (a per-label prior)
    names.SPEC,  # a label whose name the query writes out
)

ALPHA = "alpha"  # the encoder's share of the two dense scores (1 - alpha: W's)
UNTRAINED_OFFSET = "untrained_offset"  # added to every label without a training positive
TAIL_OFFSET = "tail_offset"  # added to every label of the tail frequency bin of W's training documents
#: the channel whose shortlist tells the queries the click memory knows from new ones (the new-query rule)
KNOWS_QUERIES = "memory"


def registered() -> tuple[ChannelSpec, ...]:
    """The registry, read at call time (a test may extend :data:`CHANNELS`)."""
    return CHANNELS


def spec(name: str) -> ChannelSpec:
    for entry in registered():
        if entry.name == name:
            return entry
    raise KeyError(f"no classifier channel named {name!r}; the registered ones: "
                   f"{', '.join(s.name for s in registered())}")


def present(channels: Mapping[str, Any]) -> list[ChannelSpec]:
    """The registry entries of the channels in ``channels`` (by name), in registry order."""
    return [entry for entry in registered() if entry.name in channels]


def fusion_keys() -> tuple[str, ...]:
    """Every weight of a fusion: α, each channel's weight, the two label offsets."""
    return (ALPHA, *(s.weight_key for s in registered()), UNTRAINED_OFFSET, TAIL_OFFSET)


class Fusion(Mapping[str, float]):
    """The weights of one fused model, by name (:func:`fusion_keys`): α (default 1, the encoder alone), each
    channel's weight and the two offsets (default 0). Immutable and hashable, so a grid can cache its rankings."""

    __slots__ = ("_values", "_hash")

    def __init__(self, values: Mapping[str, float] | None = None, /, **weights: float) -> None:
        known = fusion_keys()
        merged = {**(values or {}), **weights}
        unknown = sorted(set(merged) - set(known))
        if unknown:
            raise KeyError(f"fusion weights {unknown} name no registered channel; known: {', '.join(known)}")
        self._values = {k: float(v) for k, v in merged.items() if float(v) != _default(k)}
        self._hash = hash(frozenset(self._values.items()))

    def __getitem__(self, key: str) -> float:
        if key in self._values:
            return self._values[key]
        if key not in fusion_keys():
            raise KeyError(key)
        return _default(key)

    def __iter__(self) -> Iterator[str]:
        return iter(fusion_keys())

    def __len__(self) -> int:
        return len(fusion_keys())

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Fusion):
            return self._values == other._values
        return isinstance(other, Mapping) and dict(self) == dict(other)

    def __repr__(self) -> str:
        return f"Fusion({', '.join(f'{k}={v:g}' for k, v in self._values.items())})"

    @property
    def alpha(self) -> float:
        return self[ALPHA]

    def weight(self, channel: str) -> float:
        """The weight of the channel named ``channel``."""
        return self[spec(channel).weight_key]

    def replace(self, **weights: float) -> Fusion:
        return Fusion({**self._values, **weights})

    def changed(self) -> dict[str, float]:
        """α and every weight that is not 0 (the fusion as recorded)."""
        return {ALPHA: self.alpha, **{k: v for k, v in self._values.items() if k != ALPHA}}


def _default(key: str) -> float:
    return 1.0 if key == ALPHA else 0.0


ENCODER_ONLY = Fusion()  # α 1, every channel and offset 0: the do-nothing fallback of every fusion
