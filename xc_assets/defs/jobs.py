import dagster as dg

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.groups("ingestion"),
    description="Ingest raw logs for a range of days, then refresh the quarantine report.",
)
