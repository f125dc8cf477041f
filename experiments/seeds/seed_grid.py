"""Resumable method × seed grid on one data set: one home per seed, each step skipped when its output exists (a
model or evaluation only when the method's current code made it: ``xc_core.methods.versions.record_outdated``, the
per-method rule the results job applies to Dagster's records, ``xc_assets.defs.freshness``).

    .venv/bin/python experiments/seeds/seed_grid.py --dataset wikispeedia --profile cpu --seeds 0 1 2 \
        --methods pretrained,dual_encoder,ramen --root /tmp/xc-grid [--anchors-profile cpu]

Per seed it runs, through the `xc` CLI: `dataset` → `anchors` (only if a method needs them) → per method
`train --seed S` → `eval`; with ``--peer``, PECOS XR-Linear scored into every home. A killed grid restarts where it
stopped (a half-finished training restarts from its last epoch checkpoint with `--resume`). Then
`experiments/seeds/seed_table.py` turns the homes into the table.
Progress goes to ``<root>/grid.log``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

XC = [sys.executable, "-m", "xc_core.cli"]


def _run(args: list[str], log: Path) -> None:
    started = time.perf_counter()
    with log.open("a") as handle:
        handle.write(f"$ xc {' '.join(args)}\n")
        handle.flush()
        result = subprocess.run([*XC, *args, "--quiet"], stdout=handle, stderr=subprocess.STDOUT, check=False)
        handle.write(f"# exit {result.returncode} after {time.perf_counter() - started:.0f} s\n")
    if result.returncode != 0:
        raise SystemExit(f"xc {' '.join(args)} failed (exit {result.returncode}); see {log}")


def run_seed(dataset: str, profile: str, anchors_profile: str, seed: int, methods: list[str], root: Path) -> None:
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.methods import get_method
    from xc_core.methods.versions import record_outdated
    from xc_core.paths import anchors_dir, dataset_dir, eval_dir, model_dir
    from xc_core.training.record import SUMMARY

    home = root / f"{dataset}-s{seed}"
    log = root / "grid.log"
    common = ["--home", str(home)]
    if not (dataset_dir(home, dataset) / "meta.json").exists():
        _run(["dataset", "--dataset", dataset, *common], log)
    if (any(get_method(m).needs_anchor_sets for m in methods)
            and not (anchors_dir(home, dataset) / "meta.json").exists()):
        _run(["anchors", "--dataset", dataset, "--profile", anchors_profile, *common], log)
    for method in methods:
        trained = model_dir(home, dataset, method, profile)
        finished = (trained / SUMMARY).exists()
        stale = (record_outdated(json.loads((trained / SUMMARY).read_text()), method, "train") if finished
                 else "nothing trained yet")
        if stale is not None:
            with log.open("a") as handle:
                handle.write(f"# {method} seed {seed}: training ({stale})\n")
            # a checkpoint without a summary is a killed run of this grid: resume it; a finished stale one starts over
            resume = ["--resume"] if not finished and (trained / "checkpoint").exists() else []
            _run(["train", "--dataset", dataset, "--method", method, "--profile", profile, "--seed", str(seed),
                  *resume, *common], log)
        evaluation = EvaluationRecord.load(eval_dir(home, dataset, method, profile))
        if (stale is not None or evaluation is None
                or record_outdated(evaluation.summary, method, "evaluate") is not None):
            _run(["eval", "--dataset", dataset, "--method", method, "--profile", profile, *common], log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--anchors-profile", default=None, help="profile of the anchor stage (default: --profile)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--methods", default="pretrained,dual_encoder,ramen")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--peer", action="store_true", help="also score PECOS XR-Linear in every home "
                        "(xc peer; needs `make peers`)")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        run_seed(args.dataset, args.profile, args.anchors_profile or args.profile, seed, args.methods.split(","),
                 args.root)
    if args.peer:
        from xc_core.stages.peer import evaluate_peer

        evaluate_peer(args.dataset, args.profile, [args.root / f"{args.dataset}-s{seed}" for seed in args.seeds])


if __name__ == "__main__":
    main()
