"""Names and defaults shared by the Dagster definitions (thresholds live in configs, not here)."""

import os

#: The daily partition window. It covers the AOL log (2006-03-01..2006-05-31) and the simulator's
#: default calendar, which deliberately starts on the same day so one partition set serves both.
PARTITIONS_START = os.environ.get("XC_PARTITIONS_START", "2006-03-01")
PARTITIONS_END = os.environ.get("XC_PARTITIONS_END", "2006-06-01")

INGEST_GROUP = "ingestion"
