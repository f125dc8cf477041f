"""The executor of the runs the code location launches (the UI, the schedule, the sensors): Dagster's multiprocess
executor, a process per step, forked from a server that has imported the code location once.

Dagster's default start method, ``spawn``, starts every step in a fresh interpreter that imports Dagster and the
code location again (about 3 s of CPU a step here, before the step's own imports). With ``forkserver`` and the code
location preloaded, a step is a fork of a process that already holds them; nothing of a step is shared with another
step (each is still its own process). ``xc run`` is not concerned: its runs execute in process.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

#: imported once per run by the fork server, before any step forks from it
PRELOADED = ["xc_assets.definitions"]


def step_executor(max_concurrent: int | None = None) -> Any:
    """The multiprocess executor forking its steps from a preloaded server; ``max_concurrent`` steps at once (None:
    Dagster's default, one per core)."""
    config: dict[str, Any] = {"start_method": {"forkserver": {"preload_modules": PRELOADED}}}
    if max_concurrent is not None:
        config["max_concurrent"] = max_concurrent
    return dg.multiprocess_executor.configured(config)
