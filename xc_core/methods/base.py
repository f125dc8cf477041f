"""A method is a name plus how it configures the one trainer: no method-specific branch in the trainer.

A method module builds a :class:`Method` and calls :func:`register`; ``xc_core.methods`` imports every
module, so ``get_method(name)`` sees all of them. Adding a method is adding a module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.training.config import TrainConfig


@dataclass(frozen=True)
class Method:
    name: str
    description: str
    train: bool = True  # False: the encoder as shipped (the zero-shot floor)
    overrides: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields this method sets
    transform: Callable[[XCDataset, TrainConfig], XCDataset] | None = None  # e.g. AugGT's label propagation
    needs_anchor_sets: bool = False  # trains on the graph: refuse to run without materialized anchor sets
    encoder_overrides: dict[str, Any] = field(default_factory=dict)  # EncoderConfig fields this method sets
    classifier: bool = False  # ends with the classifier stage: per-label vectors fused with the encoder (#18)
    baselines: tuple[str, ...] = ()  # reports pair this method against these (this − baseline); first: DIFF@k
    ablation_of: str | None = None  # the full method this one switches an ingredient off; reports pair full − this

    def configure(self, base: TrainConfig) -> TrainConfig:
        return base.model_copy(update=self.overrides)

    def prepare(self, dataset: XCDataset, cfg: TrainConfig) -> XCDataset:
        return self.transform(dataset, cfg) if self.transform else dataset


METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    if method.name in METHODS:
        raise ValueError(f"method '{method.name}' registered twice")
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    """A registered method, or a graph method restricted to some anchor sets: ``ramen@links`` or
    ``ramen@links+categories`` (both sides, only those sets) — the "which graph helps" ablation on any data
    set without a module per set name."""
    base, _, restrict = name.partition("@")
    if base not in METHODS:
        raise ValueError(f"unknown method '{base}': choose one of {', '.join(sorted(METHODS))}")
    method = METHODS[base]
    if not restrict:
        return method
    if not method.needs_anchor_sets:
        raise ValueError(f"'{name}': only a method that trains on anchor sets can be restricted to some")
    sets = restrict.split("+")

    def only(current: list[str] | None) -> list[str]:
        return [s for s in sets if current is None or s in current]

    overrides = {**method.overrides, "doc_sets": only(method.overrides.get("doc_sets")),
                 "label_sets": only(method.overrides.get("label_sets"))}
    return replace(method, name=name, description=f"{method.description}; anchor sets {', '.join(sets)} only",
                   overrides=overrides)
