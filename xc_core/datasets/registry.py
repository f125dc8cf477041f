"""Build any supported data set by name, and the per-data-set defaults (PSP constants, coverage gates).

Names: ``synthetic`` (the simulator's events in the store, markets MC-*), ``aol-1000`` (ingested from
the shared archive on first use), ``wikispeedia`` (shared data), or a path to an Extreme
Classification Repository folder (LF-* raw-text format).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from xc_core.datasets.container import XCDataset
from xc_core.datasets.events import EventsDatasetConfig, aol_1000_config, build_events_dataset
from xc_core.logs.store import EventStore
from xc_core.paths import aol_archive, shared_data_dir
from xc_core.quality.coverage import CoverageThreshold

SIMULATOR_MARKETS = ["MC-1", "MC-2", "MC-3", "MC-4"]
EVENT_DATASETS = ("synthetic", "aol-1000")


def dataset_dir(home: Path, name: str) -> Path:
    return home / "datasets" / dataset_slug(name)


def graphs_dir(home: Path, name: str) -> Path:
    return home / "graphs" / dataset_slug(name)


def dataset_slug(name: str) -> str:
    return Path(name).name if ("/" in name or Path(name).is_dir()) else name


def events_config(name: str, home: Path | None = None) -> EventsDatasetConfig:
    """The event-log protocol of ``name``; ``synthetic`` tests on the simulated world's novel-keyword
    window (its last ``novel_days`` days), read from the home's current simulation when there is one."""
    if name == "aol-1000":
        return aol_1000_config()
    if name == "synthetic":
        from xc_core.simulate.pipeline import current_simulation

        current = current_simulation(home) if home is not None else None
        test_days = int(current["novel_days"]) if current else 7
        return EventsDatasetConfig(name="synthetic", markets=SIMULATOR_MARKETS, test_days=test_days,
                                   protocol="synthetic")
    raise ValueError(f"'{name}' is not an event-log data set ({', '.join(EVENT_DATASETS)})")


def _ensure_events(store: EventStore, name: str) -> None:
    markets = events_config(name, store.home).markets or []
    present = (store.scan().select(pl.col("market").is_in(markets).any()).collect().item()
               if store.days() else False)
    if present:
        return
    if name == "aol-1000":
        from xc_core.logs.ingest import Source, ingest

        ingest([Source("aol", aol_archive())], store.home, progress=False)
        return
    raise FileNotFoundError(f"{store.events_dir}: no simulated events (markets {', '.join(markets)}) — "
                            "run `xc simulate --home ...` first")


def build_dataset(name: str, home: Path, seed: int = 0) -> XCDataset:
    """Build (not load) the named data set; event-log data sets also rebuild their graph tables."""
    if name in EVENT_DATASETS:
        store = EventStore(home)
        _ensure_events(store, name)
        return build_events_dataset(store, graphs_dir(home, name), events_config(name, home))
    if name == "wikispeedia":
        from xc_core.datasets.wikispeedia import build_wikispeedia

        return build_wikispeedia(shared_data_dir() / "wikispeedia", seed=seed)
    path = Path(name)
    if path.is_dir():
        from xc_core.datasets.xc_repo import read_xc_repo

        return read_xc_repo(path)
    raise ValueError(f"unknown data set '{name}': use synthetic, aol-1000, wikispeedia or an XC-repository folder")


def leaked_test_nodes(dataset: XCDataset) -> int:
    """Anchors of document-space sets whose text is a novel test document (never seen in the train
    period): must be 0. ``meta["anchor_spaces"]`` names each set's space; sets of other spaces (items,
    categories) cannot hold documents, and their texts may coincide with a query's by chance."""
    test_only = {t for t, novel in zip(dataset.test_texts, dataset.test_novel, strict=True) if novel}
    return sum(len(test_only.intersection(dataset.anchor_sets[name].texts)) for name in dataset.document_space_sets())


def default_thresholds(dataset: XCDataset, min_share: float = 0.5) -> list[CoverageThreshold]:
    """Gate every (anchor set, node type) that has native edges at all: ≥ min_share covered after RWR."""
    out = []
    for name, a in dataset.anchor_sets.items():
        for node_type, edges in (("document", a.doc_edges), ("label", a.label_edges)):
            if len(edges):
                out.append(CoverageThreshold(anchor_set=name, node_type=node_type, stage="after_rwr",
                                             min_share=min_share))
    return out
