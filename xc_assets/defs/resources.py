"""Resources: where xc keeps its data. One interface; the local implementation is a folder."""


from pathlib import Path

import dagster as dg
from pydantic import Field

from xc_core.logs.store import EventStore
from xc_core.paths import resolve_home


class XcHome(dg.ConfigurableResource):
    """The data root (event store, graphs, data sets, models). Empty means ``$XC_HOME`` or ``./.xc``."""

    home: str = Field(default="", description="data root; empty for $XC_HOME or the repo's .xc/")

    @property
    def path(self) -> Path:
        return resolve_home(self.home or None)

    def event_store(self) -> EventStore:
        return EventStore(self.path)
