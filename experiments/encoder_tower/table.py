"""The grid's validation table (markdown) from ``results/*.json``: per variant the served epoch's validation P@1 and
R@10 beside epoch 0's (the untrained encoder), the fallback test's cross-fitted R@10 gain with its 95% interval, and
examples/s (a whole epoch's loop, validation included, on the machine and load of that run).

    .venv/bin/python experiments/encoder_tower/table.py [--dataset synthetic]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def row(record: dict) -> str:
    history = {h["epoch"]: h for h in record["history"]}
    start, served = history[0], history[record["selected_epoch"]]
    test = record.get("fallback_test") or {}
    gain = (f"{100 * test['gain']:+.2f} [{100 * test['low']:+.2f}, {100 * test['high']:+.2f}]"
            if "gain" in test else "—")
    return (f"| {record['variant']} | `{json.dumps(record['overrides'])}` | {record['selected_epoch']} | "
            f"{100 * start['val_P@1']:.2f} → {100 * served['val_P@1']:.2f} | "
            f"{100 * start['val_recall@10']:.2f} → {100 * served['val_recall@10']:.2f} | {gain} | "
            f"{record['examples_per_s']:.0f} | {record['code']['git_commit'][:7]} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="synthetic")
    args = parser.parse_args()
    records = [json.loads(p.read_text()) for p in sorted(RESULTS.glob(f"{args.dataset}-*.json"))]
    print("| variant | overrides of the demo profile | served epoch | val P@1 (epoch 0 → served) | "
          "val R@10 | R@10 gain, out of fold [95%] | examples/s | code |")
    print("|---|---|---|---|---|---|---|---|")
    for record in records:
        print(row(record))


if __name__ == "__main__":
    main()
