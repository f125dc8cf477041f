"""Ingestion settings: every threshold a validation rule uses, in one typed place.

Defaults, overridden by ``<home>/xc.yaml`` (a top-level ``ingest:`` mapping whose keys are the fields of
:class:`IngestConfig`), overridden by what a caller passes (``xc ingest --markets``, Dagster run config)::

    ingest:
      markets: [zh-CN, en-US]   # default: any non-empty market
      max_query_chars: 1024
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from xc_core.logs.errors import IngestError

CONFIG_FILE = "xc.yaml"
#: ``markets`` value that means "accept every market" (the default), for overriding a restricting file.
ANY_MARKET = "*"


class IngestConfig(BaseModel):
    """Validation and sessionisation knobs (defaults suit both aol-1000 and the simulator)."""

    model_config = ConfigDict(extra="forbid")

    min_ts: datetime = Field(default=datetime(2000, 1, 1, tzinfo=UTC), description="earliest accepted event time")
    max_ts: datetime = Field(default=datetime(2030, 1, 1, tzinfo=UTC), description="latest accepted event time")
    max_query_chars: int = Field(default=512, gt=0, description="longer queries are quarantined")
    markets: tuple[str, ...] | None = Field(
        default=None, description="accepted markets, a list like [zh-CN, en-US] (rows of other markets are "
                                  "quarantined); null or '*': any non-empty market")
    session_gap_minutes: float = Field(default=30.0, gt=0, description="inactivity that starts a new session")
    batch_rows: int = Field(default=1_000_000, gt=0, description="rows validated per batch (bounds memory)")
    # Where the sources are validated: not part of what is stored (both engines store the same rows, tests/engines)
    engine: Literal["default", "spark"] = Field(
        default_factory=lambda: os.environ.get("XC_INGEST_ENGINE", "default"),  # type: ignore[arg-type]
        description="default (this process) or spark (each file validated by a Spark task, logs/spark_ingest.py; "
                    "pip install -e '.[scale]'); env XC_INGEST_ENGINE")
    spark_master: str = Field(default_factory=lambda: os.environ.get("XC_SPARK_MASTER", "local[2]"),
                              description="the Spark master URL when engine is spark; env XC_SPARK_MASTER")

    @field_validator("markets", mode="before")
    @classmethod
    def _market_list(cls, value: Any) -> Any:
        """``"zh-CN,en-US"`` (the CLI's spelling) or a list; ``"*"`` means any market."""
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list | tuple):
            names = [m.strip() if isinstance(m, str) else m for m in value]
            if ANY_MARKET in names:
                return None
            if any(not isinstance(m, str) or not m for m in names):
                raise ValueError(f"markets must be non-empty strings, got {value!r}")
            return tuple(dict.fromkeys(names))
        return value

    @field_validator("min_ts", "max_ts")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        """A time written without a zone is UTC, like every event time in the store."""
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _file_values(path: Path) -> dict[str, Any]:
    """The ``ingest:`` mapping of a home config file ({} when the file or the section is absent)."""
    import yaml

    expected = f"a YAML mapping with an 'ingest:' section whose keys are among {', '.join(IngestConfig.model_fields)}"
    if not path.exists():
        return {}
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise IngestError(path, f"not valid YAML ({exc})", expected) from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise IngestError(path, f"the top level is a {type(document).__name__}, not a mapping", expected)
    unknown = sorted(str(k) for k in document if k != "ingest")
    if unknown:
        raise IngestError(path, f"unknown top-level key(s) {', '.join(unknown)}", expected)
    section = document.get("ingest") or {}
    if not isinstance(section, dict):
        raise IngestError(path, f"'ingest' is a {type(section).__name__}, not a mapping", expected)
    return section


def _check(values: dict[str, Any], where: Path | str, prefix: str) -> IngestConfig:
    try:
        return IngestConfig(**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error["loc"] else ""
        if error["type"] == "extra_forbidden" or name not in IngestConfig.model_fields:
            problem, expected = f"unknown key '{prefix}{name}'", f"keys among {', '.join(IngestConfig.model_fields)}"
        else:
            field = IngestConfig.model_fields[name]
            problem = f"bad value {error.get('input')!r} for '{prefix}{name}' ({error['msg']})"
            expected = f"{name}: {field.description} (default {field.default})"
        raise IngestError(where, problem, expected) from exc


def load_ingest_config(home: Path | str, **overrides: Any) -> IngestConfig:
    """Defaults < ``<home>/xc.yaml`` (``ingest:``) < ``overrides`` (a None override is "not given").

    A bad key or value raises :class:`IngestError` naming the file (or "overrides") and the key.
    """
    path = Path(home) / CONFIG_FILE
    from_file = _file_values(path)
    _check(from_file, path, "ingest.")  # a mistake in the file is reported against the file
    given = {k: v for k, v in overrides.items() if v is not None}
    return _check({**from_file, **given}, "ingest options", "")
