"""Issue #32: would impressed-but-not-clicked items make brand- / location-safe negatives?

    .venv/bin/python experiments/brand_match/brand_impressions.py --home /work/brand_home/base [--dataset synthetic] \
        [--json experiments/brand_match/results/issue32_impressions.json]

Reads the home's event store (training period only: before the data set's split) and the data set's item metadata.
For the query events whose text names a brand (place) some label carries (``xc_core.evaluation.mismatch``'s rule),
it counts the shown items by what they carry — the query's own value, another value, none — apart for clicked
items and for items impressed but not clicked, and the latter per position (1–4, 5+). A negative that carries the
query's *own* brand teaches the encoder to push that brand away: the signal is brand-safe only where impressed,
unclicked items are mostly of another brand. Only log columns (``brand``, ``location``, ``position``,
``impressed``, ``clicked``) are read; never the simulator's grades.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import duckdb

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.mismatch import words
from xc_core.provenance import write_result
from xc_core.training.attributes import AttributeIndex

KINDS = ("own", "other", "none")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def measure(home: Path, dataset: str) -> dict[str, Any]:
    data = XCDataset.load(home / "datasets" / dataset)
    index = AttributeIndex.build(data.label_attributes, data.label_texts)
    if index is None:
        raise SystemExit(f"{dataset}: no item metadata")
    glob = (home / "events" / "day=*" / "events.parquet").as_posix()
    attributes = index.attributes
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        rows = con.sql(f"SELECT query_text, {', '.join(attributes)}, position, impressed, clicked "
                       f"FROM read_parquet('{glob}') WHERE item_id IS NOT NULL AND ts < ?::TIMESTAMPTZ",
                       params=[data.meta["split"]]).fetchall()
    queries = sorted({r[0] for r in rows})
    out: dict[str, Any] = {"home": str(home), "dataset": dataset, "period": f"before {data.meta['split']}",
                           "item_rows": len(rows)}
    for a, attribute in enumerate(attributes):
        named = dict(zip(queries, index.named(queries, attribute), strict=True))
        code = {v: i for i, v in enumerate(index.lexicons[attribute])}
        counts: dict[str, dict[str, int]] = {}
        for row in rows:
            found = named[row[0]]
            if not found:
                continue
            value = row[1 + a]
            kind = "none" if value is None else ("own" if code.get(" ".join(words(value)), -1) in found else "other")
            position, impressed, clicked = row[1 + len(attributes):]
            groups = ["clicked"] if clicked else ["impressed, not clicked"] if impressed else []
            if groups and not clicked and position is not None:
                groups.append(f"impressed, not clicked, position {min(int(position), 5)}{'+' if position >= 5 else ''}")
            for group in groups:
                counts.setdefault(group, dict.fromkeys(KINDS, 0))[kind] += 1
        out[attribute] = {group: {"items": sum(c.values()),
                                  **{f"{k}_pct": round(100 * c[k] / max(sum(c.values()), 1), 2) for k in KINDS}}
                          for group, c in sorted(counts.items())}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "issue32_impressions.json")
    args = parser.parse_args()
    result = measure(args.home, args.dataset)
    write_result(args.json, json.dumps(result, indent=1))
    for attribute in (k for k in result if isinstance(result[k], dict)):
        print(f"\n{attribute}: | group | items | own % | other % | none % |")
        for group, row in result[attribute].items():
            print(f"| {group} | {row['items']} | {row['own_pct']} | {row['other_pct']} | {row['none_pct']} |")


if __name__ == "__main__":
    main()
