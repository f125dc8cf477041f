"""Collect what a set of homes holds: per data set and method, validation recall@10 (training), test
P@1/PSP@1 with bootstrap 95% CIs, HNSW recall@10 and timings; the registry's decisions from MLflow.

    .venv/bin/python experiments/results_tables/collect_results.py HOME:DATASET [HOME:DATASET ...] [--tracking-uri URI]

Prints markdown tables (used for the closing notes and the docs/results pages); reads only, writes nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl


def _ci(folder: Path, metric: str) -> str:
    table = pl.read_parquet(folder / "ci.parquet")
    row = table.filter(pl.col("metric") == metric).row(0, named=True)
    return f"[{100 * row['low']:.2f}, {100 * row['high']:.2f}]"


def method_rows(home: Path, dataset: str) -> list[str]:
    from xc_core.paths import dataset_slug

    slug = dataset_slug(dataset)
    rows = ["| method | val R@10 | train s | test P@1 (95% CI) | PSP@1 (95% CI) | P@5 | PSP@5 | R@10 | HNSW R@10 |",
            "|---|---|---|---|---|---|---|---|---|"]
    for folder in sorted((home / "eval" / slug).glob("*-*")):
        if not (folder / "metrics.json").exists():
            continue
        m = json.loads((folder / "metrics.json").read_text())
        train = json.loads((home / "models" / slug / folder.name / "train_summary.json").read_text())
        rows.append(f"| {m['method']} | {train['val_recall@10']:.3f} | {train['seconds']:.0f} | "
                    f"{100 * m['P@1']:.2f} {_ci(folder, 'P@1')} | {100 * m['PSP@1']:.2f} {_ci(folder, 'PSP@1')} | "
                    f"{100 * m['P@5']:.2f} | {100 * m['PSP@5']:.2f} | {100 * m['R@10']:.2f} | "
                    f"{m['hnsw_recall@10']:.3f} |")
    return rows


def registry_rows(uri: str) -> list[str]:
    import mlflow

    client = mlflow.MlflowClient(uri)
    rows = ["| model | version | method | decision | reason | aliases now |", "|---|---|---|---|---|---|"]
    for model in client.search_registered_models():
        for version in sorted(client.search_model_versions(f"name='{model.name}'"), key=lambda v: int(v.version)):
            tags = version.tags
            rows.append(f"| {model.name} | {version.version} | {tags.get('method', '')} | "
                        f"{tags.get('promotion.decision', '')} | "
                        f"{tags.get('promotion.reason', '')[:90]} | "
                        f"{', '.join(k for k, v in model.aliases.items() if v == version.version)} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("homes", nargs="+", help="HOME:DATASET pairs")
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args()
    for pair in args.homes:
        home, dataset = pair.rsplit(":", 1)
        print(f"\n### {dataset} ({home})\n")
        print("\n".join(method_rows(Path(home), dataset)))
    if args.tracking_uri:
        print("\n### registry\n")
        print("\n".join(registry_rows(args.tracking_uri)))


if __name__ == "__main__":
    main()
