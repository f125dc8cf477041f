"""Methods trained with other training settings than their profile's, over seeds, paired with the seed homes' models.

    .venv/bin/python experiments/training_budget/variant_grid.py --dataset aol-1000 --profile demo --seeds 0 \
        --methods dual_encoder,ramen --set max_train_docs=20000 --tag docs20000 --root /tmp/xc-grid \
        --json experiments/training_budget/results/issue11_budget_aol-1000.json

The seed homes are ``<root>/<dataset>-s<seed>`` as ``experiments/seeds/seed_grid.py`` leaves them (``pretrained``,
``dual_encoder`` and ``ramen`` trained and evaluated there at the profile's settings). A variant (``--set`` holds
TrainConfig fields, ``--tag`` names it) gets a home per seed, ``<root>/<dataset>-s<seed>-<tag>``, that links the seed
home's data lineage (the results job's :func:`~xc_core.stages.results.share_data`): every variant trains on the same
anchor sets and is scored on the same test queries; its models, evaluations and MLflow store stay apart. A step whose
output exists and was made by the method's current code (``xc_core.methods.versions.record_outdated``: the
results job's per-method rule) is skipped, so a killed grid restarts where it stopped; a finished training's resume
checkpoint and selection copy are removed (disk).

The table: per method, at the profile's settings and at the variant's, the selected epoch's validation recall@10
(mean over seeds), the steps trained and the test metrics seed-averaged per query with bootstrap 95% CIs; then
paired differences on the same queries: each variant against the same method at the profile's settings and
against ``pretrained``, and ``ramen`` against ``dual_encoder`` within the variant (the statistics of
``xc_core.evaluation.seed_homes``). The grid, the table and the markdown are ``xc_core.stages.variants``.
"""

from __future__ import annotations

import argparse

from xc_core.stages.variants import build, grid_arguments, markdown, parse_settings, publish, run_one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    grid_arguments(parser)
    parser.add_argument("--methods", default="dual_encoder,ramen")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="FIELD=VALUE",
                        help="a TrainConfig field the variant changes (repeatable)")
    parser.add_argument("--tag", required=True, help="the variant's name (its homes' suffix and table label)")
    args = parser.parse_args()
    settings, methods = parse_settings(args.settings), args.methods.split(",")
    if not settings:
        raise SystemExit("--set: name at least one setting the variant changes")
    for seed in args.seeds:
        for method in methods:
            run_one(args.root, args.dataset, args.profile, seed, method, settings, args.tag)
    result = build(args.root, args.dataset, args.profile, args.seeds, methods, args.tag, settings)
    publish(markdown(result), result, args.json)


if __name__ == "__main__":
    main()
