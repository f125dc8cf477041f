"""Names and defaults shared by the Dagster definitions (thresholds live in configs, not here)."""

import os

#: The daily partitions: from the AOL log's first day (the simulator's default calendar starts on the same day, so
#: one partition set serves both) up to today, growing each day, so logs dated today have a partition.
#: ``XC_PARTITIONS_END`` (exclusive, YYYY-MM-DD) pins the end.
PARTITIONS_START = os.environ.get("XC_PARTITIONS_START", "2006-03-01")
PARTITIONS_END = os.environ.get("XC_PARTITIONS_END") or None

INGEST_GROUP = "ingestion"

#: The data set the nightly chain operates (rebuild → train/eval → report → gate): its asset group and jobs.
#: Any registered event-log data set; ``XC_DATASET`` picks another than the embedded simulator.
OPERATED_DATASET = os.environ.get("XC_DATASET", "synthetic")
