import dagster as dg

from xc_assets.defs.constants import PARTITIONS_END, PARTITIONS_START

#: end_offset=1: today's (still open) day is a partition too, so a file landing today can be ingested today.
daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITIONS_START, end_date=PARTITIONS_END, timezone="UTC",
                                                end_offset=0 if PARTITIONS_END else 1)
