"""The experiment's table: per variant its trainer's validation (P@1, R@10 of the served epoch, from
``results/grid``) and its ranking on validation-period simulated traffic (``results/<dataset>-validation-*.json``).

    .venv/bin/python experiments/ab_depth/depth_table.py [--dataset synthetic]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
COLUMNS = ("expected_ctr", "shown_grade>=2", "shown_rank_median", "grade@1-1", "grade@2-5", "grade@6-20",
           "grade@21-100", "score@1", "score@100")


def _trainer(dataset: str, name: str) -> str:
    path = RESULTS / "grid" / f"{dataset}-dual_encoder-{name}.json"
    if not path.exists():
        return "| | | "
    record = json.loads(path.read_text())
    served = next(h for h in record["history"] if h["epoch"] == record["selected_epoch"])
    return (f"| `{json.dumps(record['overrides'])}` | {100 * served['val_P@1']:.1f} | "
            f"{100 * served['val_recall@10']:.2f} ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="synthetic")
    args = parser.parse_args()
    print("| variant | overrides | val P@1 | val R@10 | " + " | ".join(COLUMNS) + " |")
    print("|---" * (4 + len(COLUMNS)) + "|")
    for path in sorted(RESULTS.glob(f"{args.dataset}-validation-*.json")):
        record = json.loads(path.read_text())
        cells = " | ".join(f"{record[c]:.3f}" if isinstance(record.get(c), float) else "" for c in COLUMNS)
        print(f"| {record['name']} {_trainer(args.dataset, record['name'])}| {cells} |")


if __name__ == "__main__":
    main()
