"""``xc graphs`` and the graph-table assets: an event-log data set's click / co-session / co-click tables of its
train window, from the home's event store."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from xc_core.paths import resolve_home
from xc_core.stages import Command, Payload, register
from xc_core.stages.options import add_dataset


def materialize_graph_tables(name: str, home: Path) -> Any:
    """The graph-table stage of event-log data set ``name`` (``xc graphs`` and the Dagster graph-table asset):
    click / co-session / co-click tables of its train window, from the home's event store.

    Args:
        name: an event-log data set (built in or defined in the home).
        home: the data root holding the event store; the tables go to ``<home>/graphs/<name>``.

    Returns:
        The build's :class:`~xc_core.datasets.graph_tables.GraphTablesSummary`.
    """
    from xc_core.datasets.events import event_window
    from xc_core.datasets.graph_tables import build_graph_tables
    from xc_core.datasets.registry import events_config
    from xc_core.logs.store import EventStore
    from xc_core.paths import graphs_dir

    store, cfg = EventStore(home), events_config(name, home)
    first, split, _ = event_window(store, cfg)
    return build_graph_tables(store, graphs_dir(home, name), first, split, cfg.graph_config())


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.datasets.registry import events_config

    home = resolve_home(args.home)
    events_config(args.dataset, home)  # an unknown or non-event data set: one clear line
    summary = materialize_graph_tables(args.dataset, home)
    return {"dataset": args.dataset, **summary.to_dict()}


COMMAND = register(Command("graphs", "event store → click/co-session/co-click tables",
                           lambda command: add_dataset(command, events_only=True), _run,
                           docs="docs/graphs.md", assets=("click_graph", "cosession_queries", "coclick_items")))
