"""RAMEN's initial regularizer weight λ0 over seeds: does a larger pull toward the anchors let the graph pay?

    .venv/bin/python experiments/ramen_lambda/lambda_grid.py --dataset aol-1000 --profile demo --seeds 0 1 2 \
        --lambdas 0.3 1.0 --root /tmp/xc-grid --json experiments/ramen_lambda/results/issue11_lambda_aol-1000.json

The seed homes are ``<root>/<dataset>-s<seed>`` as ``experiments/seeds/seed_grid.py`` leaves them (``dual_encoder`` and
``ramen`` trained and evaluated there at the profile's λ0). Each λ0 gets a home per seed,
``<root>/<dataset>-s<seed>-lambda<λ0>``, that links the seed home's data lineage (the results job's
:func:`~xc_core.stages.results.share_data`), so every λ0 trains on the same anchor sets and is scored on the same
test queries; its own models, evaluations and MLflow store stay apart. A step whose output exists is skipped, so a
killed grid restarts where it stopped; a finished training's resume checkpoint is removed (disk).

The table: per λ0, validation recall@10 of the selected epoch (the figure a choice of λ0 is made on, mean over
seeds), the test metrics seed-averaged per query with bootstrap 95% CIs, and paired differences against the seed
homes' ``ramen`` and ``dual_encoder`` on the same queries (``xc_core.evaluation.seed_homes``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.evaluation.seed_homes import METRICS, metric_ci, metric_value, paired_diff, seed_average
from xc_core.stages.variants import ci_cells, grid_arguments, pairs_table, publish, training_cost, variant_home
from xc_core.stages.variants import run_one as run_variant


def lambda_home(root: Path, dataset: str, seed: int, lam: float) -> Path:
    """The home of λ0 = ``lam`` for training seed ``seed``: ``<root>/<dataset>-s<seed>-lambda<λ0>``."""
    return variant_home(root, dataset, seed, f"lambda{lam:g}")


def run_one(root: Path, dataset: str, profile_name: str, seed: int, lam: float) -> Path:
    """Train and evaluate ``ramen`` at λ0 = ``lam`` with training seed ``seed``; the λ0 home."""
    return run_variant(root, dataset, profile_name, seed, "ramen", {"lambda_reg": lam}, f"lambda{lam:g}")


def build(root: Path, dataset: str, profile: str, seeds: list[int], lambdas: list[float]) -> dict[str, Any]:
    bases = [root / f"{dataset}-s{s}" for s in seeds]
    references = {name: seed_average(bases, dataset, name, profile)[0] for name in ("ramen", "dual_encoder")}
    rows = [{"lambda0": "profile", **training_cost(bases, dataset, "ramen", profile),
             **{m: [metric_value(references["ramen"], m), *metric_ci(references["ramen"], m)] for m in METRICS}}]
    pairs = []
    for lam in lambdas:
        homes = [lambda_home(root, dataset, s, lam) for s in seeds]
        rows_lam, n = seed_average(homes, dataset, "ramen", profile)
        rows.append({"lambda0": lam, "seeds": n, **training_cost(homes, dataset, "ramen", profile),
                     **{m: [metric_value(rows_lam, m), *metric_ci(rows_lam, m)] for m in METRICS}})
        for name, ref in references.items():
            pairs.append({"pair": f"ramen(λ0={lam:g}) − {name}",
                          **{m: list(paired_diff(rows_lam, ref, m))[:3] for m in METRICS}})
    return {"dataset": dataset, "profile": profile, "seeds": seeds, "rows": rows, "pairs": pairs}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"**{result['dataset']}** (profile `{result['profile']}`, seeds {result['seeds']})", "",
             "| λ0 | val R@10 (mean) | selected epochs | " + " | ".join(METRICS) + " |",
             "|---" * (3 + len(METRICS)) + "|"]
    for row in result["rows"]:
        lines.append(f"| {row['lambda0']} | {100 * float(np.mean(row['val_recall@10'])):.2f} | "
                     f"{row['selected_epoch']} | {ci_cells(row)} |")
    return "\n".join(lines + pairs_table(result["pairs"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    grid_arguments(parser)
    parser.add_argument("--lambdas", nargs="+", type=float, default=[0.3, 1.0])
    args = parser.parse_args()
    for lam in args.lambdas:
        for seed in args.seeds:
            run_one(args.root, args.dataset, args.profile, seed, lam)
    result = build(args.root, args.dataset, args.profile, args.seeds, args.lambdas)
    publish(markdown(result), result, args.json)


if __name__ == "__main__":
    main()
