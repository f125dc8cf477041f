"""The data-set stage as the CLI and Dagster both run it: build, save, summarise."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.datasets.definitions import DatasetDefinition, write_definition
from xc_core.datasets.registry import build_dataset, leaked_test_nodes, spec_from_definition
from xc_core.paths import dataset_dir

log = logging.getLogger(__name__)


def materialize_dataset(name: str, home: Path, seed: int = 0,
                        definition: DatasetDefinition | None = None) -> tuple[XCDataset, dict[str, Any]]:
    """Build data set ``name`` and save it under ``<home>/datasets/<name>``; return it and its summary.
    ``definition``: a new or changed definition, saved to ``<home>/datasets/<name>.yaml`` only once the data set
    it defines was built (a definition that selects nothing leaves the home as it was)."""
    started = time.perf_counter()
    spec = spec_from_definition(definition) if definition is not None else None
    dataset = build_dataset(name, home, seed=seed, spec=spec)
    leaks = leaked_test_nodes(dataset)
    if leaks and dataset.meta.get("graphs_dir"):
        # xc built these anchors from the event store, where a query's text is the query: a real leak
        raise RuntimeError(f"{dataset.name}: {leaks} anchors are test-only documents — the split leaks into the "
                           "graphs; this is a bug in the builder, nothing was saved")
    if leaks:  # a folder's nodes are ids: equal text is not the same node, but the user should know
        log.warning("%s: %d anchor texts equal the text of a test-only document (e.g. a category and a headword "
                    "both called 'language'); kept — they are different nodes, but check the folder if unexpected",
                    dataset.name, leaks)
    path = dataset.save(dataset_dir(home, name))
    defined = {"definition": str(write_definition(home, definition))} if definition is not None else {}
    summary = {**dataset.summary(), **defined, "leaked_test_nodes": leaks, "path": str(path),
               "seconds": round(time.perf_counter() - started, 2)}
    return dataset, summary


def materialize_graph_tables(name: str, home: Path) -> Any:
    """The graph-table stage of event-log data set ``name`` (``xc graphs`` and the Dagster graph-table asset):
    click / co-session / co-click tables of its train window, from the home's event store."""
    from xc_core.datasets.events import event_window
    from xc_core.datasets.graph_tables import build_graph_tables
    from xc_core.datasets.registry import events_config
    from xc_core.logs.store import EventStore
    from xc_core.paths import graphs_dir

    store, cfg = EventStore(home), events_config(name, home)
    first, split, _ = event_window(store, cfg)
    return build_graph_tables(store, graphs_dir(home, name), first, split, cfg.graph_config())


def load_or_build(name: str, home: Path, seed: int = 0) -> XCDataset:
    path = dataset_dir(home, name)
    if (path / "meta.json").exists():
        return XCDataset.load(path)
    return materialize_dataset(name, home, seed)[0]
