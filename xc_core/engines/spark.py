"""The graph tables and the sessions on Apache Spark: the same SQL as the duckdb build, run by Spark SQL.

duckdb is the default and stays so (one machine, no JVM). Spark is for an ads team whose logs already live on a
Spark cluster: ``GraphConfig(engine="spark", spark_master="spark://host:7077")`` (or ``yarn``, ``k8s://…``)
runs the three tables where the events are; here and in tests it runs as ``local[2]``.

What is shared and what is not:
- the tables' logic is *one* definition — ``graph_tables._click_graph_sql`` and ``_co_occurrence_sql`` — written in
  the SQL both engines parse (``count(*) FILTER``, ``GROUP BY ALL``, ``CAST``, window functions); so are the
  sessions (``logs.sessions.sessions_sql``, run on Spark by ``logs.sessions.sessionise_on_spark``);
- reading the store's day files, the train-window and market filter and the label key are engine code (duckdb's
  ``SELECT * REPLACE`` and ``trim(x, '.')`` have no Spark SQL spelling; the host key is the same regular
  expression through Spark's column functions);
- Spark writes each table's part files, streamed into one Parquet file where the duckdb build writes its own, so
  every reader (polars, duckdb views, the data-set builder) is unchanged.

pyspark is the optional extra ``scale`` (``pip install -e '.[scale]'``; Java 17); nothing imports this module on the
default path.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@contextmanager
def spark_session(master: str, app_name: str = "xc-graph-tables") -> Iterator[SparkSession]:
    """The active Spark session if the caller has one (a notebook's, a test module's: left running), else a new
    one bound to loopback when local (no UI, UTC, few shuffle partitions for a small machine), stopped on exit.
    On a cluster the master URL is the only change."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ImportError("engine 'spark' needs pyspark and Java 17: pip install -e '.[scale]'") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        active.conf.set("spark.sql.session.timeZone", "UTC")  # the tables' timestamps are UTC instants
        active.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        yield active
        return
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", os.environ.get("XC_SPARK_SHUFFLE_PARTITIONS", "8"))
               .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"))
    if master.startswith("local"):  # services bind to loopback only
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        # Python tasks (ingestion's validation) run in this interpreter's environment, not whatever `python3` is
        # on the PATH (PySpark reads the variable when the context starts)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def train_events(spark: SparkSession, day_files: list[Path], train_start: datetime, train_end: datetime,
                 markets: list[str] | None, host_pattern: str | None) -> DataFrame:
    """The store's events of ``[train_start, train_end)`` (and ``markets``; None: all), labels keyed as the duckdb
    build keys them: the item id, or (``host_pattern``, graph_tables.HOST_PATTERN) the host of a URL-like id."""
    from pyspark.sql import functions as F

    events = spark.read.parquet(*(path.as_posix() for path in day_files))
    events = events.where((F.col("ts") >= F.lit(train_start)) & (F.col("ts") < F.lit(train_end)))
    if markets is not None:
        events = events.where(F.col("market").isin(markets))
    if host_pattern is not None:  # the same regular expression, in Java's dialect (it uses none that differs)
        host = F.regexp_replace(F.expr("trim(BOTH '.' FROM _host)"), r"^www\.", "")
        events = (events.withColumn("_host", F.regexp_extract(F.lower("item_id"), host_pattern, 1))
                  .withColumn("item_id", F.when(host.like("%_._%"), host))  # a host has a dot
                  .withColumn("item_text", F.lit(None).cast("string")).drop("_host"))
    return events


def build_tables(spark: SparkSession, events: DataFrame, queries: dict[str, str], train_start: datetime,
                 train_end: datetime, out: dict[str, Path]) -> None:
    """Each of ``queries`` (SQL over the view ``train``) with the train window's columns, one Parquet file each.

    Spark writes each table's part files itself (a table of tens of millions of co-session pairs does not pass
    through the driver's memory); they are then streamed, in order, into the single file readers expect."""
    import tempfile

    from pyspark.sql import functions as F

    events.createOrReplaceTempView("train")
    for name, sql in queries.items():
        table = spark.sql(sql).withColumn("train_start", F.lit(train_start)).withColumn("train_end", F.lit(train_end))
        with tempfile.TemporaryDirectory(prefix=f"xc-spark-{name}-", dir=out[name].parent) as parts:
            table.write.mode("overwrite").parquet(parts)
            files = sorted(Path(parts).glob("part-*.parquet"))
            if not files:  # an empty table may leave no part file: its schema is all there is
                import pyarrow.parquet as pq

                files = [Path(parts) / "part-empty.parquet"]
                pq.write_table(table.limit(0).toArrow(), files[0])
            _concatenate(files, out[name])


def _concatenate(parts: list[Path], out: Path) -> None:
    """Part files → one Parquet file, batch by batch (an ORDER BY's parts are in file-name order). Timestamps are
    written with their zone, as the duckdb build writes them (Spark's are UTC instants without one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(parts[0])
    schema = pa.schema([pa.field(f.name, pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f
                        for f in schema])
    with pq.ParquetWriter(out, schema) as writer:
        for part in parts:
            for batch in pq.ParquetFile(part).iter_batches(batch_size=65536):
                writer.write_table(pa.Table.from_batches([batch]).cast(schema))

