"""The grid's validation table (markdown) from ``results/*.json``: per variant the served epoch's validation P@1 and
R@10 beside epoch 0's (the untrained encoder), the fallback test's cross-fitted R@10 gain with its 95% interval, and
examples/s (a whole epoch's loop, validation included, on the machine and load of that run).

    .venv/bin/python experiments/encoder_tower/table.py [--dataset synthetic] [--base VARIANT] [--results DIR]
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


def _family(record: dict) -> str:
    """The variant's name without its seed suffix (grid.py names a seed other than 0 ``<variant>-s<seed>``)."""
    seed = record.get("seed", 0)
    return record["variant"].removesuffix(f"-s{seed}") if seed else record["variant"]


def paired(records: list[dict], base: str) -> None:
    """Each variant with per-row validation hits against the ``base`` variant's of the same seed (the same
    validation rows), per seed and pooled over the seeds both have (rows concatenated): served P@1 difference and
    served − its own epoch 0, with 95% bootstrap intervals."""
    import numpy as np

    from xc_core.evaluation.analyses import paired_bootstrap_diff

    hits = {(_family(r), r.get("seed", 0)): r for r in records if "val_hits" in r}
    print(f"\n| variant | seeds | served val P@1 − {base}'s [95%] | served − its epoch 0 [95%] | fit s |")
    print("|---|---|---|---|---|")
    for family in dict.fromkeys(f for f, _ in hits):
        seeds = sorted(s for f, s in hits if f == family and (base, s) in hits)
        if family == base or not seeds:
            continue
        groups = [[s] for s in seeds] + ([seeds] if len(seeds) > 1 else [])
        for group in groups:
            mine = np.concatenate([hits[family, s]["val_hits"]["P@1"] for s in group])
            theirs = np.concatenate([hits[base, s]["val_hits"]["P@1"] for s in group])
            start = np.concatenate([hits[family, s]["val_hits"]["P@1_epoch0"] for s in group])
            d, lo, hi, _ = paired_bootstrap_diff(mine, theirs)
            e, elo, ehi, _ = paired_bootstrap_diff(mine, start)
            fit = np.mean([hits[family, s]["fit_s"] for s in group])
            print(f"| {family} | {','.join(map(str, group))} | {100 * d:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}] | "
                  f"{100 * e:+.2f} [{100 * elo:+.2f}, {100 * ehi:+.2f}] | {fit:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--base", help="also pair every variant that recorded per-row hits with this one")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the folder of the grid's records (a round "
                        "kept apart, e.g. results/round6)")
    args = parser.parse_args()
    found = [json.loads(p.read_text()) for p in sorted(args.results.glob(f"{args.dataset}-*.json"))]
    records = [r for r in found if "history" in r]  # grid records (not plateau.py's or the oracle's)
    print("| variant | overrides of the demo profile | served epoch | val P@1 (epoch 0 → served) | "
          "val R@10 | R@10 gain, out of fold [95%] | examples/s | code |")
    print("|---|---|---|---|---|---|---|---|")
    for record in records:
        print(row(record))
    if args.base:
        paired(records, args.base)


if __name__ == "__main__":
    main()
