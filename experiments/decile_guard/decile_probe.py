"""Does the classifier stage's out-of-fold choice see the P@5 its fusion gives up on the middle label deciles, and
what would a guard on the rarer half of the labels cost? (issue #63)

Builds a home's ``-clf`` out-of-fold grid once (the stage's own folds, W and every channel refit per fold: training
documents only, never the test split), then runs the stage's selection procedure under several guard sets, each
cross-fitted over the stage's folds exactly as the stage tests its fusion (each fold ranked by the fusion picked on the
other folds). For every variant it prints and saves the procedure's out-of-fold P@1, P@5, tail-bin P@5 and P@5 by
label-frequency decile, each paired against the encoder alone on the same rows (95% bootstrap), and the fusion the
variant would serve.

Deciles are ``label_quantiles`` with 10 bins over each fold's *fit* rows (as the test's are over W's training
documents), so a row's label bins are those its own W saw. Variants:

- ``stage``: the configured guards (P@1's guards: PSP@1, PSP@5, tail-bin P@5), what ``make run`` serves;
- ``rare half``: also the P@5 share of deciles 0–4 together (the rarer half of the positives) at least the encoder's;
- ``each rare decile``: also each of deciles 0–4 on its own;
- ``rare half, lifted``: the ``rare half`` guard, with the tail offset τ lifting deciles 0–4 (not only the tail bin).

    .venv/bin/python experiments/decile_guard/decile_probe.py --home HOME --dataset synthetic \\
        [--method dual_encoder-clf]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.provenance import code_stamp, write_result

N_DECILES = 10
RARE_HALF = (0, 4)  # deciles 0..4: the rarer half of the training positives


def out_of_fold(home: Path, dataset: str, profile: str, method: str) -> tuple[Any, list[Any], Any, Any]:
    """(the stage's out-of-fold grid parts, their folds, the classifier config, the data set it saw) for the home's
    trained ``method``, rebuilt as the method fit it."""
    from xc_core.datasets.container import XCDataset
    from xc_core.methods.encoder.training import trained_stage_grids
    from xc_core.paths import dataset_dir

    seen, folds, parts, cfg = trained_stage_grids(home, XCDataset.load(dataset_dir(home, dataset)), method, profile)
    return parts, folds, cfg, seen


def decile_grid(parts: list[Any], folds: list[Any]) -> Any:
    """An :class:`OutOfFoldGrid` whose ``value`` also reads ``P@5_deciles_LO-HI``: the P@5 share of the labels in
    deciles LO..HI of each row's own fold."""
    from xc_core.classifier.stage import OutOfFoldGrid
    from xc_core.evaluation.analyses import label_quantiles
    from xc_core.stages.label_deciles import decile_terms

    bins = [label_quantiles(sp.csr_matrix(f.y_fit[f.fit_rows]), N_DECILES) for f in folds]

    class DecileGrid(OutOfFoldGrid):
        def decile_terms(self, top: np.ndarray) -> np.ndarray:
            """(rows, 10): each row's P@5 share per decile of its fold's bins."""
            out = np.zeros((top.shape[0], N_DECILES))
            for block, part_bins in zip(self.blocks, bins, strict=True):
                out[block] = decile_terms(self.truth[block], top[block], part_bins)
            return out

        def value(self, fusion: Any, metric: str, rows: np.ndarray, seen: bool = False) -> float:
            if not metric.startswith("P@5_deciles_"):
                return super().value(fusion, metric, rows, seen)
            key = (fusion, metric, seen)
            if key not in self._terms:
                lo, hi = (int(x) for x in metric.removeprefix("P@5_deciles_").split("-"))
                self._terms[key] = {metric: self.decile_terms(self.top(fusion, seen))[:, lo: hi + 1].sum(axis=1)}
            return float(self._terms[key][metric][rows].mean()) if len(rows) else 0.0

    grid = DecileGrid(parts)
    return grid


def lift_rare_half(parts: list[Any], folds: list[Any]) -> None:
    """The tail offset lifts every label of deciles 0..4 of each fold (instead of the tail bin only)."""
    from xc_core.evaluation.analyses import label_quantiles

    for part, fold in zip(parts, folds, strict=True):
        deciles = label_quantiles(sp.csr_matrix(fold.y_fit[fold.fit_rows]), N_DECILES)
        part.on_tail = deciles[np.maximum(part.candidates, 0)] <= RARE_HALF[1]
        part._views.clear()  # the part's cached tail views were ranked with the former mask


def run_variant(name: str, grid: Any, cfg: Any, guards: tuple[str, ...]) -> dict[str, Any]:
    """The selection under ``guards``, cross-fitted over the grid's folds: its served fusion, the test the stage
    would make (against the encoder alone, under the configured policy) and the procedure's paired gains."""
    from xc_core.classifier.channels import ENCODER_ONLY
    from xc_core.classifier.stage import fusion_selector
    from xc_core.evaluation.analyses import paired_bootstrap_diff
    from xc_core.evaluation.fallback import against_fallback, cross_fitted_ranking
    from xc_core.evaluation.metrics import hit_matrix

    started = time.perf_counter()
    policy = cfg.fallback.model_copy(update={"guards": guards})
    select = fusion_selector(grid, cfg.model_copy(update={"fallback": policy}))
    everything = np.arange(grid.truth.shape[0])
    encoder_top = grid.top(ENCODER_ONLY)
    procedure, picks, served = cross_fitted_ranking(select, grid.top, encoder_top, grid.blocks)
    decision = against_fallback(name, procedure, encoder_top, grid.truth, grid.inv_propensity, cfg.select_metric,
                                cfg.fallback, picked_on_rows=len(everything), candidate=served.changed(),
                                tail=grid.tail_truth)

    def per_row(top: np.ndarray) -> dict[str, np.ndarray]:
        hits = hit_matrix(grid.truth, top)
        deciles = grid.decile_terms(top)
        return {"P@1": hits[:, 0].astype(float), "P@5": hits[:, :5].sum(axis=1) / 5,
                "rare half P@5": deciles[:, RARE_HALF[0]: RARE_HALF[1] + 1].sum(axis=1),
                **{f"decile {d}": deciles[:, d] for d in range(N_DECILES)}}

    ours, theirs = per_row(procedure), per_row(encoder_top)
    paired = {}
    for key in ours:
        gain, low, high, _ = paired_bootstrap_diff(ours[key], theirs[key])
        paired[key] = [round(100 * gain, 2), round(100 * low, 2), round(100 * high, 2)]
    return {"variant": name, "guards": list(guards), "served": served.changed(),
            "folds_picking_the_served": float(np.mean([p == served for p in picks])),
            "stage_test": {"kept": decision.kept, "reason": decision.reason},
            "procedure_minus_encoder": paired,
            "procedure": {k: round(100 * float(v.mean()), 2) for k, v in ours.items()},
            "encoder": {k: round(100 * float(v.mean()), 2) for k, v in theirs.items()},
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--method", default="dual_encoder-clf")
    args = parser.parse_args()
    parts, folds, cfg, _ = out_of_fold(args.home, args.dataset, args.profile, args.method)
    configured = tuple(cfg.fallback.guards)
    rare = f"P@5_deciles_{RARE_HALF[0]}-{RARE_HALF[1]}"
    each = tuple(f"P@5_deciles_{d}-{d}" for d in range(RARE_HALF[0], RARE_HALF[1] + 1))
    variants = [("stage", configured), ("rare half", (*configured, rare)), ("each rare decile", (*configured, *each))]
    shared = decile_grid(parts, folds)  # one grid: the variants share its cached rankings
    results = [run_variant(name, shared, cfg, guards) for name, guards in variants]
    lift_rare_half(parts, folds)
    results.append(run_variant("rare half, lifted", decile_grid(parts, folds), cfg, (*configured, rare)))
    out = Path(__file__).parent / "results" / f"{args.dataset}-{args.method}.json"
    write_result(out, json.dumps({"dataset": args.dataset, "method": args.method, "profile": args.profile,
                                  "out_of_fold_rows": int(sum(len(f.score_rows) for f in folds)),
                                  "folds": [f.name for f in folds], "variants": results, **code_stamp()}, indent=1))
    for r in results:
        gains = r["procedure_minus_encoder"]
        print(f"{r['variant']:20s} served {r['served']}  test kept {r['stage_test']['kept']}  ({r['seconds']} s)")
        print("   " + "  ".join(f"{k} {v[0]:+.2f} [{v[1]:+.2f}, {v[2]:+.2f}]" for k, v in gains.items()))


if __name__ == "__main__":
    main()
