"""Ingestion settings: every threshold a validation rule uses, in one typed place."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

DEFAULT_MARKETS: tuple[str, ...] = ("en-US", "MC-1", "MC-2", "MC-3", "MC-4")


class IngestConfig(BaseModel):
    """Validation and sessionisation knobs (defaults suit both aol-1000 and the simulator)."""

    min_ts: datetime = Field(default=datetime(2000, 1, 1, tzinfo=UTC), description="earliest accepted event time")
    max_ts: datetime = Field(default=datetime(2030, 1, 1, tzinfo=UTC), description="latest accepted event time")
    max_query_chars: int = Field(default=512, gt=0, description="longer queries are quarantined")
    known_markets: tuple[str, ...] = Field(default=DEFAULT_MARKETS, description="other markets are quarantined")
    session_gap_minutes: float = Field(default=30.0, gt=0, description="inactivity that starts a new session")
    batch_rows: int = Field(default=1_000_000, gt=0, description="rows validated per batch (bounds memory)")
