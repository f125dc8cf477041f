"""Which tail calibration keeps the tail bin's P@5 at the encoder's without giving up the head, out of fold? (#63)

Builds a home's ``dual_encoder-clf`` out-of-fold grid once (the stage's own folds, W and channels refit per fold:
training documents only, never the test split), then scores fusions on it: the encoder alone, the fusion main served
(``--fusion``), and that fusion under tail offsets applied to the bin's trained labels only or to the whole bin
(untrained labels included); finally the stage's own selection. Writes ``results/<dataset>.json``.

    .venv/bin/python experiments/tail_fusion/probe.py --home HOME --dataset synthetic \\
        --fusion 0.4,0.05,0.05,0.2,0.8,0.05,0.2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.provenance import write_result

METRICS = ("P@1", "P@5", "PSP@5", "tail_P@5")
OFFSETS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)


def out_of_fold_grid(home: Path, dataset: str, profile: str) -> Any:
    """The stage's out-of-fold grid for the home's trained ``dual_encoder-clf``, rebuilt as the method fit it, and
    its settings."""
    from xc_core.classifier.stage import OutOfFoldGrid
    from xc_core.datasets.container import XCDataset
    from xc_core.methods.encoder.training import trained_stage_grids
    from xc_core.paths import dataset_dir

    data = XCDataset.load(dataset_dir(home, dataset))
    _, _, parts, cfg = trained_stage_grids(home, data, "dual_encoder-clf", profile)
    return OutOfFoldGrid(parts), cfg


def scores(grid: Any, fusion: Any) -> dict[str, float]:
    rows = np.arange(grid.truth.shape[0])
    return {m: round(100 * grid.value(fusion, m, rows), 2) for m in METRICS}


def main() -> None:
    from xc_core.classifier.channels import ENCODER_ONLY, Fusion, fusion_keys
    from xc_core.classifier.stage import OutOfFoldGrid, choose_fusion

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--fusion", required=True, help="alpha,lexical,untrained,hybrid,memory,popularity,name")
    args = parser.parse_args()
    grid, cfg = out_of_fold_grid(args.home, args.dataset, args.profile)
    head = Fusion(dict(zip(("alpha", "lexical_weight", "untrained_offset", "linear_weight", "memory_weight",
                            "popularity_weight", "name_weight"), (float(x) for x in args.fusion.split(",")),
                           strict=True)))
    rows: list[dict[str, Any]] = [{"fusion": "encoder alone", **scores(grid, ENCODER_ONLY)}]
    whole = [p.on_tail.copy() for p in grid.parts]  # the stage's tail: the whole bin
    for name, masks in (("trained tail labels", [w & ~p.on_untrained for w, p in zip(whole, grid.parts, strict=True)]),
                        ("whole tail bin", whole)):
        for part, mask in zip(grid.parts, masks, strict=True):
            part.on_tail = mask
        probe = OutOfFoldGrid(grid.parts)
        rows += [{"fusion": f"main's fusion, offset {t} on {name}", **scores(probe, head.replace(tail_offset=t))}
                 for t in OFFSETS]
    best, record, _ = choose_fusion(OutOfFoldGrid(grid.parts), cfg)
    rows.append({"fusion": f"the stage's choice {record['fusion']['candidate']}", **scores(
        grid, Fusion({k: best[k] for k in fusion_keys()}))})
    from xc_core.provenance import code_stamp

    out = Path(__file__).parent / "results" / f"{args.dataset}.json"
    write_result(out, json.dumps({"dataset": args.dataset, "out_of_fold_rows": int(grid.truth.shape[0]),
                               "rows": rows, "decision": record["fusion"]["reason"], **code_stamp()}, indent=1))
    for row in rows:
        print(f"{row['fusion'][:70]:70s}", "  ".join(f"{m} {row[m]:6.2f}" for m in METRICS))


if __name__ == "__main__":
    main()
