"""Does the classifier stage absorb a trained encoder's gain when the channels that already span the tower's
features are left out? (issue #62, item 4: `dual_encoder-clf` above `pretrained-clf`)

The CPU profiles' encoder is the light tower: ``normalize((I + L)·base + mean of the tokens' bag rows)``, linear in
the frozen vector and a bag of the text's tokens up to the normalisation. The stage's W is linear in the encoder's
vector, and its hybrid channel is XR-Linear on TF-IDF n-grams ⊕ that vector. So W and the hybrid channel can already
express most of what the tower adds. This probe measures it: for a home with both ``pretrained-clf`` and
``dual_encoder-clf`` trained, it rebuilds each model's out-of-fold grid (the stage's folds, W and every channel refit
per fold; training documents only, never the test split) and runs the stage's own selection, cross-fitted over its
folds, under restricted channel sets:

- ``stage``: every channel, as the method serves it;
- ``no text channels``: the lexical and hybrid weights fixed at 0 (W, memory, names, popularity, offsets kept);
- ``W only``: α between the encoder and W, every other channel and offset at 0;
- ``encoder alone``: α 1.

Each variant's per-row P@1 and P@5 is paired between the two models on the rows both score (same fold,
same document), 95% bootstrap. The claim under test: with the text channels on the pair ties (as on the test
split), with them off the trained encoder's gain shows through.

    .venv/bin/python experiments/encoder_under_stage/overlap.py --home HOME --dataset synthetic [--profile demo]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.provenance import code_stamp, write_result

METHODS = ("pretrained-clf", "dual_encoder-clf")
METRICS = ("P@1", "P@5")


def variants(cfg: Any) -> dict[str, Any]:
    """The classifier settings of each variant: the served one with some channels' weight grids fixed at 0."""
    no_text = {"linear_weights": (0.0,), "lexical": cfg.lexical.model_copy(update={"weights": (0.0,)})}
    w_only = {**no_text, "memory_weights": (0.0,), "popularity_weights": (0.0,), "name_weights": (0.0,),
              "untrained_offsets": (0.0,), "tail_offsets": (0.0,),
              "channel_weights": {k: (0.0,) for k in cfg.channel_weights}}
    return {"stage": cfg, "no text channels": cfg.model_copy(update=no_text),
            "W only": cfg.model_copy(update=w_only)}


def procedure_rows(grid: Any, cfg: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """The cross-fitted selection's ranking of every out-of-fold row (each block ranked by the fusion picked on the
    other blocks) and the fusion picked on all rows."""
    from xc_core.classifier.channels import ENCODER_ONLY
    from xc_core.classifier.stage import fusion_selector
    from xc_core.evaluation.fallback import cross_fitted_ranking

    top, _, served = cross_fitted_ranking(fusion_selector(grid, cfg), grid.top, grid.top(ENCODER_ONLY), grid.blocks)
    return top, served.changed()


def per_row(grid: Any, top: np.ndarray) -> dict[str, np.ndarray]:
    from xc_core.evaluation.metrics import hit_matrix

    hits = hit_matrix(grid.truth, top)
    return {"P@1": hits[:, 0].astype(float), "P@5": hits[:, :5].sum(axis=1) / 5}


def model_rows(home: Path, dataset: str, profile: str, method: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """(row keys, {variant: {"served": fusion, "rows": per-row metrics}}) of one trained ``-clf`` model."""
    from xc_core.classifier.channels import ENCODER_ONLY
    from xc_core.classifier.stage import OutOfFoldGrid
    from xc_core.datasets.container import XCDataset
    from xc_core.methods.encoder.training import trained_stage_grids
    from xc_core.paths import dataset_dir

    started = time.perf_counter()
    _, folds, parts, cfg = trained_stage_grids(home, XCDataset.load(dataset_dir(home, dataset)), method, profile)
    keys = [(f.name, int(r)) for f in folds for r in f.score_rows]
    grid = OutOfFoldGrid(parts)
    out: dict[str, Any] = {"encoder alone": {"served": {}, "rows": per_row(grid, grid.top(ENCODER_ONLY))}}
    for name, settings in variants(cfg).items():
        top, served = procedure_rows(grid, settings)
        out[name] = {"served": served, "rows": per_row(grid, top)}
    print(f"{method}: {len(keys)} rows, {time.perf_counter() - started:.0f} s", flush=True)
    return keys, out


def main() -> None:
    from xc_core.evaluation.analyses import paired_bootstrap_diff

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    args = parser.parse_args()
    models = {m: model_rows(args.home, args.dataset, args.profile, m) for m in METHODS}
    (keys_a, a), (keys_b, b) = models["dual_encoder-clf"], models["pretrained-clf"]
    index_b = {k: i for i, k in enumerate(keys_b)}
    common = [(i, index_b[k]) for i, k in enumerate(keys_a) if k in index_b]
    ia, ib = (np.asarray(x, dtype=int) for x in zip(*common, strict=True))
    table = {}
    for variant in a:
        row = {"served": {"dual_encoder-clf": a[variant]["served"], "pretrained-clf": b[variant]["served"]}}
        for metric in METRICS:
            if metric not in a[variant]["rows"]:
                continue
            x, y = a[variant]["rows"][metric][ia], b[variant]["rows"][metric][ib]
            gain, low, high, _ = paired_bootstrap_diff(x, y)
            row[metric] = {"dual_encoder-clf": round(100 * float(x.mean()), 2),
                           "pretrained-clf": round(100 * float(y.mean()), 2),
                           "difference": [round(100 * gain, 2), round(100 * low, 2), round(100 * high, 2)]}
        table[variant] = row
        print(f"{variant:18s} " + "  ".join(f"{m} {row[m]['dual_encoder-clf']:.2f} vs {row[m]['pretrained-clf']:.2f}"
                                            f" {row[m]['difference'][0]:+.2f} [{row[m]['difference'][1]:+.2f}, "
                                            f"{row[m]['difference'][2]:+.2f}]" for m in METRICS if m in row))
    out = Path(__file__).parent / "results" / f"{args.dataset}-{args.profile}.json"
    write_result(out, json.dumps({"dataset": args.dataset, "profile": args.profile, "home": str(args.home),
                                  "rows": {"dual_encoder-clf": len(keys_a), "pretrained-clf": len(keys_b),
                                           "common": len(common)},
                                  "variants": table, **code_stamp()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
