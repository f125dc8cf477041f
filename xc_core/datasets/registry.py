"""Build any supported data set by name (the home's folders for them are in :mod:`xc_core.paths`).

Names: the data sets registered in code (:func:`register_dataset`; built in: ``wikispeedia``), the built-in
definitions (``synthetic``, ``aol-1000``: YAML files in ``xc_core/datasets/builtin/``), the definitions saved in
the home (``<home>/datasets/NAME.yaml``, :mod:`xc_core.datasets.definitions`), or a path to an Extreme
Classification Repository folder (LF-* raw-text format).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl

from xc_core.datasets.container import XCDataset
from xc_core.datasets.definitions import (
    SOURCES,
    DatasetDefinition,
    DefinitionError,
    builtin_definitions,
    read_definition,
    write_definition,
)
from xc_core.datasets.events import EventsDatasetConfig, build_events_dataset
from xc_core.logs.store import EventStore
from xc_core.paths import graphs_dir, resolve_home, shared_data_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RawEvents:
    """Where an event-log data set's raw events come from when a pipeline run ingests them: the simulator's day
    files (``simulated``) or files of a given kind (``aol`` block files, canonical ``events`` files)."""

    source: Literal["simulated", "aol", "events"]
    files: Callable[[], list[Path]] = list  # a file source's files (the simulator writes its own)


@dataclass(frozen=True)
class DatasetSpec:
    """A named data set: how to build it, and for event-log data sets their protocol and how to get events.

    Built from a definition file (:func:`spec_from_definition`) or registered in code (:func:`register_dataset`:
    a builder over files); the CLI, Dagster's per-data-set assets and the run commands read the specs."""

    name: str
    description: str
    build: Callable[[Path, int], XCDataset] | None = None  # (home, seed) → data set; None for event logs
    events: Callable[[Path | None], EventsDatasetConfig] | None = None  # event-log protocol (given the home)
    fetch_events: Callable[[EventStore], None] | None = None  # put missing events into the store
    missing_events: str = "ingest them first (`xc ingest --source events FILE`)"  # the fix, when no fetch_events
    raw: RawEvents | None = None  # what `xc run` ingests before the graphs (None: events already in the store)
    world: Callable[[Path], Any] | None = None  # the ground truth (a simulated World) A/B tests score; None: replay
    definition: DatasetDefinition | None = None  # the file it was defined by (None: registered in code)

    @property
    def from_events(self) -> bool:
        return self.events is not None


#: The data sets registered in code and the built-in definitions (a home adds its own: :func:`datasets_in`).
DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    if (spec.build is None) == (spec.events is None):
        raise ValueError(f"data set {spec.name!r}: give exactly one of build (files) or events (an event log)")
    DATASETS[spec.name] = spec
    return spec


def spec_from_definition(definition: DatasetDefinition) -> DatasetSpec:
    """The spec of a definition: an XC folder is read from its path; an event log follows its protocol, and its
    raw source says what a run ingests, how events missing from the store are fetched, and whether it has a world."""
    if definition.kind == "xc-folder":
        folder = Path(str(definition.path)).expanduser()

        def read(home: Path, seed: int) -> XCDataset:
            from xc_core.datasets.xc_repo import read_xc_repo

            return read_xc_repo(folder, name=definition.name)

        return DatasetSpec(definition.name, definition.description or f"XC-repository folder {folder}",
                           build=read, definition=definition)
    raw = definition.raw
    kind = SOURCES[raw.source] if raw is not None else None
    fetch = None
    if raw is not None and kind is not None and kind.fetch:
        def fetch(store: EventStore) -> None:
            from xc_core.logs.ingest import Source, ingest

            ingest([Source("aol" if raw.source == "aol" else "events", f) for f in raw.files()], store.home,
                   progress=False)

    return DatasetSpec(definition.name, definition.description or "an event log in the home's store",
                       events=definition.events_config, fetch_events=fetch,
                       missing_events=kind.missing if kind else "ingest them first (`xc ingest --source events FILE`)",
                       raw=RawEvents(raw.source, raw.files) if raw is not None else None,
                       world=kind.world if kind else None, definition=definition)


def datasets_in(home: Path | None = None, skip_broken: bool = False) -> dict[str, DatasetSpec]:
    """Every data set a command in ``home`` can name: the built-in ones, then the home's definitions (``home``
    None: ``$XC_HOME`` or ``./.xc``). A definition that cannot be read raises :class:`DefinitionError` naming the
    file, or with ``skip_broken`` (Dagster's code location: one bad file must not hide every data set) is logged
    and left out."""
    folder = resolve_home(home)
    found = dict(DATASETS)
    for path in sorted((folder / "datasets").glob("*.yaml")):
        try:
            definition = read_definition(path)
            if definition.name in DATASETS:
                raise DefinitionError(f"{path}: '{definition.name}' is a built-in data set; name yours differently")
        except DefinitionError as err:
            if not skip_broken:
                raise
            log.warning("skipped a data-set definition: %s", err)
            continue
        found[definition.name] = spec_from_definition(definition)
    return found


def dataset_names(home: Path | None = None, skip_broken: bool = False) -> tuple[str, ...]:
    """Every data set of ``home``, built-in ones first (an XC-repository folder is accepted besides)."""
    return tuple(datasets_in(home, skip_broken))


def event_datasets(home: Path | None = None, skip_broken: bool = False) -> tuple[str, ...]:
    """The data sets built from the event store (they have graph tables)."""
    return tuple(name for name, spec in datasets_in(home, skip_broken).items() if spec.from_events)


class UnknownDatasetError(LookupError, ValueError):
    """A data set name that is neither registered nor a folder (a LookupError: the CLI prints one line)."""


def get_dataset_spec(name: str, home: Path | None = None) -> DatasetSpec:
    found = datasets_in(home)
    if name not in found:
        raise UnknownDatasetError(
            f"unknown data set '{name}': use {', '.join(found)}, an XC-repository folder (a path to one with "
            f"trn_X.txt, tst_X.txt, …), or define it: `xc dataset --name {name} --from-events --markets ...` "
            f"(or `--from-xc-folder PATH`)")
    return found[name]


def resolve_dataset(name_or_path: str, home: Path, define: bool = True) -> str:
    """The name commands file a data set under: a known name as is; an XC-repository folder by its folder name,
    defined in the home on first use (``define``: ``<home>/datasets/NAME.yaml``, kind xc-folder) so that Dagster,
    the registry and ``xc predict`` know it by that name afterwards."""
    found = datasets_in(home)
    if name_or_path in found:
        return name_or_path
    folder = Path(name_or_path).expanduser()
    if not folder.is_dir():
        get_dataset_spec(name_or_path, home)  # raises, naming the choices and how to define one
    folder = folder.resolve()
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", folder.name).strip("-_")[:64] or "xc-folder"
    known = found.get(name)
    if known is not None:
        defined = known.definition
        if defined is None or defined.kind != "xc-folder" or Path(str(defined.path)).resolve() != folder:
            raise DefinitionError(f"{folder}: the name '{name}' is taken by another data set; define this folder "
                                  f"under another name: `xc dataset --name NAME --from-xc-folder {folder}`")
        return name
    if define:
        write_definition(home, DatasetDefinition(name=name, kind="xc-folder", path=str(folder),
                                                 description=f"XC-repository folder {folder}"))
    return name


def events_config(name: str, home: Path | None = None) -> EventsDatasetConfig:
    """The event-log protocol of data set ``name``."""
    found = datasets_in(home)
    spec = found.get(name)
    if spec is None or spec.events is None:
        raise UnknownDatasetError(f"'{name}' is not an event-log data set "
                                  f"({', '.join(n for n, s in found.items() if s.from_events)})")
    return spec.events(home)


def _ensure_events(store: EventStore, spec: DatasetSpec) -> None:
    assert spec.events is not None
    markets = spec.events(store.home).markets
    market = pl.lit(True) if markets is None else pl.col("market").is_in(markets)
    present = store.scan().select(market.any()).collect().item() if store.days() else False
    if present:
        return
    if spec.fetch_events is None:
        held = (store.scan().group_by("market").len().sort("len", descending=True).head(8).collect().iter_rows()
                if store.days() else [])
        stored = ", ".join(f"{m} ({n:,} rows)" for m, n in held) or "nothing"
        raise FileNotFoundError(f"{store.events_dir}: no events of data set {spec.name} (markets "
                                f"{', '.join(markets) if markets else 'any'}; the store holds {stored}) — "
                                f"{spec.missing_events}, or change the data set's markets")
    spec.fetch_events(store)


def build_dataset(name: str, home: Path, seed: int = 0, spec: DatasetSpec | None = None) -> XCDataset:
    """Build (not load) the named data set; event-log data sets also rebuild their graph tables. ``spec``: a
    definition not saved yet (``xc dataset --from-events`` builds before it saves)."""
    if spec is None:
        if name not in datasets_in(home) and Path(name).is_dir():
            from xc_core.datasets.xc_repo import read_xc_repo

            return read_xc_repo(Path(name))
        spec = get_dataset_spec(name, home)
    if spec.build is not None:
        return spec.build(home, seed)
    assert spec.events is not None
    store = EventStore(home)
    _ensure_events(store, spec)
    return build_events_dataset(store, graphs_dir(home, name), spec.events(home))


# ---- the built-in data sets -----------------------------------------------------------------------------

def _wikispeedia(home: Path, seed: int) -> XCDataset:
    from xc_core.datasets.wikispeedia import build_wikispeedia

    return build_wikispeedia(shared_data_dir() / "wikispeedia", seed=seed)


for _definition in builtin_definitions().values():
    register_dataset(spec_from_definition(_definition))
register_dataset(DatasetSpec("wikispeedia", "shared data: article title → articles players navigated to",
                             build=_wikispeedia))


def leaked_test_nodes(dataset: XCDataset) -> int:
    """Anchors of document-space sets whose text is a novel test document (never seen in the train
    period): must be 0. ``meta["anchor_spaces"]`` names each set's space; sets of other spaces (items,
    categories) cannot hold documents, and their texts may coincide with a query's by chance."""
    test_only = {t for t, novel in zip(dataset.test_texts, dataset.test_novel, strict=True) if novel}
    return sum(len(test_only.intersection(dataset.anchor_sets[name].texts)) for name in dataset.document_space_sets())

