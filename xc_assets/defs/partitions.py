import dagster as dg

from xc_assets.defs.constants import PARTITIONS_END, PARTITIONS_START

daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITIONS_START, end_date=PARTITIONS_END, timezone="UTC")
