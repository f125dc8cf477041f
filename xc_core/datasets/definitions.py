"""Data-set definitions a person can read and edit: one YAML file per data set.

A definition says what a data set is, never how xc builds it: an event log in the home's store (its markets,
the temporal split, what a label is, minimum clicks/impressions, PSP constants, and where a pipeline run reads
its raw events), or an Extreme Classification Repository folder. The built-in ``synthetic`` and ``aol-1000``
are two such files (``xc_core/datasets/builtin/``); a user's own live in ``<home>/datasets/NAME.yaml`` (written by
``xc dataset --name NAME --from-events`` / ``--from-xc-folder PATH``) beside the built data set
``<home>/datasets/NAME/``. Every command then takes ``--dataset NAME``.

Raw sources are a small registry (:data:`SOURCES`): the simulator's day files, AOL block files, or canonical event
files (Parquet/CSV/TSV/JSON Lines) — what each reads by default, how it fetches events outside Dagster, and
whether it has a ground truth for simulated A/B tests.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from xc_core.datasets.container import DEFAULT_PSP
from xc_core.datasets.events import EventsDatasetConfig
from xc_core.datasets.graph_tables import LabelKey

BUILTIN_DIR = Path(__file__).parent / "builtin"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"  # Dagster groups and ops take letters, digits, _
HEADER = ("# xc data set definition: edit and rebuild with `xc dataset --name {name}`; every command takes "
          "--dataset {name}\n")


class DefinitionError(LookupError, ValueError):
    """A definition file that cannot be used: the message names the file, the field and the fix (a LookupError:
    the CLI prints one line)."""


class RawEventsSource(BaseModel):
    """Where a pipeline run (``xc run``, Dagster's ``raw_events``) reads this data set's raw events."""

    model_config = ConfigDict(extra="forbid")
    source: Literal["simulated", "aol", "events"] = Field(
        description="simulated: the home's simulator day files; aol: AOL block files (none given: the shared "
                    "aol-1000 archive); events: canonical Parquet/CSV/TSV/JSON Lines files")
    paths: list[str] = Field(default_factory=list, description="files or glob patterns (~ and $VARS expanded)")

    def files(self) -> list[Path]:
        """The files the patterns match now, in order (a pattern matching nothing is kept: ingestion names it)."""
        out: list[Path] = []
        for pattern in self.paths:
            expanded = str(Path(pattern).expanduser())
            matches = sorted(glob.glob(expanded)) if any(c in expanded for c in "*?[") else [expanded]
            out += [Path(m) for m in (matches or [expanded])]
        return out or SOURCES[self.source].default_files()


class DatasetDefinition(BaseModel):
    """One data set. ``kind: events`` uses the protocol fields (``EventsDatasetConfig``'s, documented there);
    ``kind: xc-folder`` only ``path``."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME_PATTERN, description="the data set's name (letters, digits, '_', '-')")
    kind: Literal["events", "xc-folder"] = "events"
    description: str = ""
    path: str | None = Field(default=None, description="xc-folder: the folder with trn_X.txt, tst_X.txt, …")
    markets: list[str] | None = Field(default=None, description="events: markets to use (null: all)")
    split: datetime | None = Field(default=None, description="events: first test instant (null: last test_days)")
    test_days: int = Field(default=7, ge=1, description="events: test period length when split is null")
    label: LabelKey = Field(default="item_id", description="events: the item id, or the host of a URL item id")
    min_clicks: int = Field(default=1, ge=1, description="events: clicks a label needs in the window")
    min_impressions: int = Field(default=0, ge=0, description="events: impressions a label needs in the window")
    psp_A: float = Field(default=DEFAULT_PSP[0], description="inverse-propensity A (pyxclib default)")
    psp_B: float = Field(default=DEFAULT_PSP[1], description="inverse-propensity B (pyxclib default)")
    raw: RawEventsSource | None = Field(default=None, description="events: what `xc run` ingests first (null: "
                                                                  "the events are already in the store)")

    @field_validator("split")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """A split without a time zone is UTC (the store's time zone)."""
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    def events_config(self, home: Path | None) -> EventsDatasetConfig:
        if self.kind != "events":
            raise DefinitionError(f"data set {self.name} is an XC folder, not an event log")
        cfg = EventsDatasetConfig(name=self.name, markets=self.markets, split=self.split, test_days=self.test_days,
                                  label=self.label, min_clicks=self.min_clicks, min_impressions=self.min_impressions,
                                  psp_A=self.psp_A, psp_B=self.psp_B, protocol=self.name)
        if self.raw is not None and "test_days" not in self.model_fields_set and "split" not in self.model_fields_set:
            cfg = SOURCES[self.raw.source].default_protocol(cfg, home)
        return cfg

    def to_yaml(self) -> str:
        body = self.model_dump(mode="json", exclude_defaults=True)
        body = {"name": self.name, "kind": self.kind, **body}
        return HEADER.format(name=self.name) + yaml.safe_dump(body, sort_keys=False, allow_unicode=True)


# ---- raw sources ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SourceKind:
    """What a raw source means for a data set defined on it."""

    default_files: Callable[[], list[Path]] = list  # files read when the definition names none
    fetch: bool = False  # outside Dagster, build_dataset ingests the files itself when the store lacks the events
    missing: str = "ingest them first (`xc ingest --source events FILE`)"  # the fix when events are missing
    world: Callable[[Path], Any] | None = None  # the ground truth simulated A/B tests score (None: replay)
    default_protocol: Callable[[EventsDatasetConfig, Path | None], EventsDatasetConfig] = lambda cfg, home: cfg


def _aol_files() -> list[Path]:
    from xc_core.paths import aol_archive

    return [aol_archive()]


def _simulated_protocol(cfg: EventsDatasetConfig, home: Path | None) -> EventsDatasetConfig:
    """The simulator's novel-keyword window (its last ``novel_days`` days) is the test period unless the definition
    sets one: the home's current simulation says how long it is."""
    from xc_core.simulate.pipeline import current_simulation

    current = current_simulation(home) if home is not None else None
    return cfg.model_copy(update={"test_days": int(current["novel_days"])}) if current else cfg


def _simulated_world(home: Path) -> Any:
    from xc_core.simulate.pipeline import load_current_world

    return load_current_world(home)


SOURCES: dict[str, SourceKind] = {
    "simulated": SourceKind(missing="run `xc simulate --home ...` first", world=_simulated_world,
                            default_protocol=_simulated_protocol),
    "aol": SourceKind(default_files=_aol_files, fetch=True),
    "events": SourceKind(fetch=True),
}


# ---- files --------------------------------------------------------------------------------------------------

def definition_path(home: Path, name: str) -> Path:
    return home / "datasets" / f"{name}.yaml"


def read_definition(path: Path) -> DatasetDefinition:
    """Parse one definition file; any problem is a :class:`DefinitionError` naming the file, the field and why."""
    try:
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise DefinitionError(f"{path}: not a readable YAML file ({err})") from err
    if not isinstance(body, dict):
        raise DefinitionError(f"{path}: expected a mapping of fields (name, kind, markets, …), got "
                              f"{type(body).__name__}")
    body.setdefault("name", path.stem)
    try:
        definition = DatasetDefinition(**body)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in err.errors())
        raise DefinitionError(f"{path}: {problems} (the fields are documented in `xc dataset --help`)") from err
    if definition.name != path.stem:
        raise DefinitionError(f"{path}: name '{definition.name}' differs from the file name; rename one of them")
    if definition.kind == "xc-folder" and not definition.path:
        raise DefinitionError(f"{path}: kind xc-folder needs `path:` (the XC-repository folder)")
    return definition


def write_definition(home: Path, definition: DatasetDefinition) -> Path:
    """Save (atomically) ``<home>/datasets/NAME.yaml``."""
    path = definition_path(home, definition.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(definition.to_yaml(), encoding="utf-8")
    tmp.replace(path)
    return path


def builtin_definitions() -> dict[str, DatasetDefinition]:
    return {d.name: d for d in (read_definition(p) for p in sorted(BUILTIN_DIR.glob("*.yaml")))}


def home_definitions(home: Path) -> dict[str, DatasetDefinition]:
    """The definitions saved in ``home`` (none when it has no ``datasets/`` folder)."""
    folder = home / "datasets"
    return {d.name: d for d in (read_definition(p) for p in sorted(folder.glob("*.yaml")))} if folder.is_dir() \
        else {}
