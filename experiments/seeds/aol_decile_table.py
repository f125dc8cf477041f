"""Issue #64 item 3: an aol-1000 `-clf` model by query-frequency decile of the training window, over the seed homes
of `aol_seed_table.py` — where the classifier stage's gain over the untrained encoder and over PECOS lies, from the
head queries (decile 0) to the queries the training window never saw (decile 9).

    .venv/bin/python experiments/seeds/aol_decile_table.py --home HOME --seeds 0,1,2 [--method M] [--out FILE]

The `-clf` model's per-query metrics are averaged over the seeds; `pretrained` and PECOS have no seed (the first
home's). Each difference is paired on the same test queries (bootstrap, 95%), in points.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from xc_core.provenance import write_result
from xc_core.stages.results import seed_home

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DATASET, PROFILE = "aol-1000", "demo"
METRICS = ("P@1", "P@5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--method", default="pretrained-clf", help="the -clf method tabulated")
    parser.add_argument("--out", type=Path, default=None, help="the JSON written (default: print only)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    homes = [args.home if i == 0 else seed_home(args.home, s) for i, s in enumerate(seeds)]
    out = decile_table(homes, args.method)
    print(markdown(out))
    if args.out is not None:
        write_result(args.out, json.dumps(out, indent=1) + "\n")


def decile_table(homes: list[Path], method: str) -> dict[str, object]:
    """Per subset (all, the tail half, each decile): its rows, each model's metrics and the paired differences."""
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.graph_gain import query_deciles
    from xc_core.evaluation.seed_homes import paired_diff, seed_average
    from xc_core.paths import dataset_dir

    deciles, basis = query_deciles(XCDataset.load(dataset_dir(homes[0], DATASET)))
    model, seeds = seed_average(homes, DATASET, method, PROFILE)
    beside = {name: seed_average(homes[:1], DATASET, name, PROFILE)[0] for name in ("pretrained", "pecos")}
    subsets = {"all": np.ones(len(deciles), bool), "tail half (deciles 5-9)": deciles >= 5,
               **{f"decile {d}": deciles == d for d in range(10)}}
    rows = []
    for name, mask in subsets.items():
        row: dict[str, object] = {"subset": name, "rows": int(mask.sum())}
        for metric in METRICS:
            row[f"{method} {metric}"] = round(100 * float(model[metric][mask].mean()), 2)
            for other, theirs in beside.items():
                picked = ({k: v[mask] for k, v in model.items()}, {k: v[mask] for k, v in theirs.items()})
                diff, low, high, _ = paired_diff(*picked, metric)
                row[f"{metric} - {other}"] = [round(100 * x, 2) for x in (diff, low, high)]
        rows.append(row)
    return {"method": method, "seeds": seeds, "homes": [str(h) for h in homes], "basis": basis, "rows": rows}


def markdown(table: dict[str, object]) -> str:
    """The P@1 columns as a markdown table."""
    method = table["method"]
    lines = [f"| subset | rows | `{method}` P@1 | − `pretrained` | − PECOS |", "|---|---|---|---|---|"]
    for row in table["rows"]:  # type: ignore[attr-defined]  # the list decile_table built
        cells = [f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]" for d, lo, hi in (row["P@1 - pretrained"], row["P@1 - pecos"])]
        lines.append(f"| {row['subset']} | {row['rows']:,} | {row[f'{method} P@1']:.2f} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
