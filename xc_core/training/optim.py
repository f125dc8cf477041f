"""The trainer's optimizer: AdamW over dense weights, and lazy (sparse) Adam over embedding tables whose gradient is
sparse — the tower's bag of token embeddings (encoders/tower.py), where a dense Adam step would touch every row of
a 30k-token table for the few hundred tokens a batch holds (a third of a tower step's time, measured on synthetic).

:class:`Group` holds one optimizer per kind and one LR schedule on each, and offers the calls the trainer makes
(``step``, ``zero_grad``, ``state_dict``, ``load_state_dict``) for both, so checkpoints stay one entry each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Group:
    """Several optimizers (or LR schedulers) stepped, cleared, saved and restored together, in order."""

    def __init__(self, members: list[Any]) -> None:
        self.members = members

    def step(self) -> None:
        for member in self.members:
            member.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for member in self.members:
            member.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"members": [member.state_dict() for member in self.members]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for member, saved in zip(self.members, state["members"], strict=True):
            member.load_state_dict(saved)


def build(params: list[Any], lr: float, weight_decay: float, schedule: Callable[[int], float],
          sparse: list[Any] | None = None) -> tuple[Group, Group]:
    """(optimizers, schedulers): AdamW on ``params`` and, when given, SparseAdam on the ``sparse`` parameters (no
    weight decay: lazy Adam updates only the rows a batch used), both on ``schedule`` (a multiplier of ``lr`` per
    step)."""
    import torch

    optimizers: list[Any] = [torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)] if params else []
    if sparse:
        optimizers.append(torch.optim.SparseAdam(sparse, lr=lr))
    schedulers = [torch.optim.lr_scheduler.LambdaLR(o, schedule) for o in optimizers]
    return Group(optimizers), Group(schedulers)
