"""Build any supported data set by name (the home's folders for them are in :mod:`xc_core.paths`).

Names: every :func:`register_dataset` entry — built in: ``synthetic`` (the simulator's events in the store,
markets MC-*), ``aol-1000`` (ingested from the shared archive on first use), ``wikispeedia`` (shared data) —
or a path to an Extreme Classification Repository folder (LF-* raw-text format).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl

from xc_core.datasets.container import XCDataset
from xc_core.datasets.events import EventsDatasetConfig, aol_1000_config, build_events_dataset
from xc_core.logs.store import EventStore
from xc_core.paths import aol_archive, graphs_dir, shared_data_dir

SIMULATOR_MARKETS = ["MC-1", "MC-2", "MC-3", "MC-4"]


@dataclass(frozen=True)
class RawEvents:
    """Where an event-log data set's raw events come from when a pipeline run ingests them: the simulator's day
    files (``simulated``) or files of a given kind (``aol`` block files, canonical ``events`` files)."""

    source: Literal["simulated", "aol", "events"]
    files: Callable[[], list[Path]] = list  # a file source's files (the simulator writes its own)


@dataclass(frozen=True)
class DatasetSpec:
    """A named data set: how to build it, and for event-log data sets their protocol and how to get events.

    Adding a data set is one :func:`register_dataset` call; the CLI, Dagster's per-data-set assets and the
    run commands read :data:`DATASETS`."""

    name: str
    description: str
    build: Callable[[Path, int], XCDataset] | None = None  # (home, seed) → data set; None for event logs
    events: Callable[[Path | None], EventsDatasetConfig] | None = None  # event-log protocol (given the home)
    fetch_events: Callable[[EventStore], None] | None = None  # put missing events into the store
    missing_events: str = "ingest them first (`xc ingest --source events FILE`)"  # the fix, when no fetch_events
    raw: RawEvents | None = None  # what `xc run` ingests before the graphs (None: events already in the store)
    world: Callable[[Path], Any] | None = None  # the ground truth (a simulated World) A/B tests score; None: replay

    @property
    def from_events(self) -> bool:
        return self.events is not None


DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    if (spec.build is None) == (spec.events is None):
        raise ValueError(f"data set {spec.name!r}: give exactly one of build (files) or events (an event log)")
    DATASETS[spec.name] = spec
    return spec


def dataset_names() -> tuple[str, ...]:
    """Every registered data set, in registration order (an XC-repository folder is accepted besides)."""
    return tuple(DATASETS)


def event_datasets() -> tuple[str, ...]:
    """The data sets built from the event store (they have graph tables)."""
    return tuple(name for name, spec in DATASETS.items() if spec.from_events)


class UnknownDatasetError(LookupError, ValueError):
    """A data set name that is neither registered nor a folder (a LookupError: the CLI prints one line)."""


def get_dataset_spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise UnknownDatasetError(f"unknown data set '{name}': use {', '.join(DATASETS)} or an XC-repository "
                                  "folder (a path to one with trn_X.txt, tst_X.txt, …)")
    return DATASETS[name]


def events_config(name: str, home: Path | None = None) -> EventsDatasetConfig:
    """The event-log protocol of data set ``name``."""
    spec = DATASETS.get(name)
    if spec is None or spec.events is None:
        raise UnknownDatasetError(f"'{name}' is not an event-log data set ({', '.join(event_datasets())})")
    return spec.events(home)


def _ensure_events(store: EventStore, spec: DatasetSpec) -> None:
    markets = events_config(spec.name, store.home).markets or []
    present = (store.scan().select(pl.col("market").is_in(markets).any()).collect().item()
               if store.days() else False)
    if present:
        return
    if spec.fetch_events is None:
        raise FileNotFoundError(f"{store.events_dir}: no events of data set {spec.name} (markets "
                                f"{', '.join(markets)}) — {spec.missing_events}")
    spec.fetch_events(store)


def build_dataset(name: str, home: Path, seed: int = 0) -> XCDataset:
    """Build (not load) the named data set; event-log data sets also rebuild their graph tables."""
    if name not in DATASETS and Path(name).is_dir():
        from xc_core.datasets.xc_repo import read_xc_repo

        return read_xc_repo(Path(name))
    spec = get_dataset_spec(name)
    if spec.build is not None:
        return spec.build(home, seed)
    store = EventStore(home)
    _ensure_events(store, spec)
    return build_events_dataset(store, graphs_dir(home, name), events_config(name, home))


# ---- the built-in data sets -----------------------------------------------------------------------------

def _synthetic_protocol(home: Path | None) -> EventsDatasetConfig:
    """The simulator's novel-keyword window (its last ``novel_days`` days) as the test period, read from the
    home's current simulation when there is one."""
    from xc_core.simulate.pipeline import current_simulation

    current = current_simulation(home) if home is not None else None
    test_days = int(current["novel_days"]) if current else 7
    return EventsDatasetConfig(name="synthetic", markets=SIMULATOR_MARKETS, test_days=test_days,
                               protocol="synthetic")


def _ingest_aol(store: EventStore) -> None:
    from xc_core.logs.ingest import Source, ingest

    ingest([Source("aol", aol_archive())], store.home, progress=False)


def _wikispeedia(home: Path, seed: int) -> XCDataset:
    from xc_core.datasets.wikispeedia import build_wikispeedia

    return build_wikispeedia(shared_data_dir() / "wikispeedia", seed=seed)


def _simulated_world(home: Path) -> Any:
    from xc_core.simulate.pipeline import load_current_world

    return load_current_world(home)


register_dataset(DatasetSpec("synthetic", "the simulator's events in the store (markets MC-*)",
                             events=_synthetic_protocol, missing_events="run `xc simulate --home ...` first",
                             raw=RawEvents("simulated"), world=_simulated_world))
register_dataset(DatasetSpec("aol-1000", "the shared AOL query-click sample, ingested on first use",
                             events=lambda home: aol_1000_config(), fetch_events=_ingest_aol,
                             raw=RawEvents("aol", lambda: [aol_archive()])))
register_dataset(DatasetSpec("wikispeedia", "shared data: article title → articles players navigated to",
                             build=_wikispeedia))


def leaked_test_nodes(dataset: XCDataset) -> int:
    """Anchors of document-space sets whose text is a novel test document (never seen in the train
    period): must be 0. ``meta["anchor_spaces"]`` names each set's space; sets of other spaces (items,
    categories) cannot hold documents, and their texts may coincide with a query's by chance."""
    test_only = {t for t, novel in zip(dataset.test_texts, dataset.test_novel, strict=True) if novel}
    return sum(len(test_only.intersection(dataset.anchor_sets[name].texts)) for name in dataset.document_space_sets())

