"""Progress bars: one switch for every bar xc draws (training epochs, encoding batches, RWR chunks, ingestion).

A stage draws a bar when its caller asks (``progress=True``: the stage commands without ``--quiet``), and also
while a terminal run has turned bars on (:func:`bars_to`: ``xc run`` in a terminal). There, bars draw on that
stream and vanish when done, so the run's step lines stay the record; everywhere else a bar goes to stderr and
stays, as tqdm's do.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

_terminal: TextIO | None = None  # the stream a terminal run draws on (None: no run turned bars on)


@contextmanager
def bars_to(stream: TextIO | None) -> Iterator[None]:
    """Every bar drawn inside the block goes to ``stream`` (a terminal) and is cleared when it ends; ``None`` leaves
    the bars as their callers set them."""
    global _terminal
    saved, _terminal = _terminal, stream
    try:
        yield
    finally:
        _terminal = saved


def bar(iterable: Iterable[T], *, desc: str, enabled: bool = False, unit: str = "it", total: int | None = None,
        initial: int = 0) -> tqdm[T]:
    """``iterable`` under a tqdm bar, drawn when ``enabled`` or while a terminal run turned bars on.

    Args:
        iterable: what the loop walks.
        desc: the bar's label (e.g. ``epoch 3/30``).
        enabled: the caller's own ``progress`` flag.
        unit, total, initial: as tqdm's.

    Returns:
        A tqdm over ``iterable`` (a disabled one draws nothing; ``update``, ``set_postfix`` and ``close`` still work).
    """
    on = enabled or _terminal is not None
    if _terminal is not None:
        return tqdm(iterable, desc=desc, unit=unit, total=total, initial=initial, file=_terminal, leave=False,
                    dynamic_ncols=True)
    return tqdm(iterable, desc=desc, unit=unit, total=total, initial=initial, file=sys.stderr, disable=not on)
