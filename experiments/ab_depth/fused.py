"""The same depth profile for a ``-clf`` method's fused ranking, with its fusion as chosen and with one part of it
switched off at a time (the tail offset, the untrained offset, the popularity channel, all three), on
validation-period simulated traffic. Reads no test row; changes no served artifact (the variants live in memory).

    .venv/bin/python experiments/ab_depth/fused.py --home HOME [--method dual_encoder-clf]

Records: ``results/<dataset>-validation-<method>-<variant>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np

from xc_core.abtest.arms import Bm25Arm, scorer_candidates
from xc_core.abtest.traffic import draw_traffic, validation_days
from xc_core.datasets.container import XCDataset
from xc_core.paths import dataset_dir, index_dir, model_dir
from xc_core.stages.abtest import ground_truth
from xc_core.training.record import TrainedModel

from depth import K, RESULTS, depth_profile  # the experiment's own module, beside this script

VARIANTS: dict[str, dict[str, float]] = {
    "as-chosen": {}, "no-tail-offset": {"tail_offset": 0.0}, "no-untrained-offset": {"untrained_offset": 0.0},
    "no-popularity": {"popularity_weight": 0.0},
    "no-offsets": {"tail_offset": 0.0, "untrained_offset": 0.0, "popularity_weight": 0.0},
}


def fused_scorers(home: Path, dataset: str, method: str, profile: str):
    """(the fused model as chosen, a scorer factory taking the fusion's overrides)."""
    import mlflow

    from xc_core.classifier.fusion import CLASSIFIER_INDEX, LABEL_VECTORS, fused_search
    from xc_core.index import LabelIndex
    from xc_core.tracking.store import activate

    trained = TrainedModel.load(model_dir(home, dataset, method, profile))
    activate(trained.tracking_uri)
    model = mlflow.pyfunc.load_model(trained.model_uri)
    folder = index_dir(home, dataset, method, profile)
    index = LabelIndex.load(folder, expect_dataset=dataset)
    classifier = LabelIndex.load(folder / CLASSIFIER_INDEX, expect_dataset=dataset)
    label_vectors = np.load(folder / LABEL_VECTORS)
    fused = model.unwrap_python_model().classifier

    def scorer(overrides: dict[str, float]):
        variant = replace(fused, **overrides)

        def score(texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
            vectors = np.asarray(model.predict(texts), dtype=np.float32)
            return fused_search(vectors, index, classifier, label_vectors, variant, k, texts=texts)

        return score

    return fused, scorer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--method", default="dual_encoder-clf")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--queries", type=int, default=20_000)
    args = parser.parse_args()
    world = ground_truth(args.dataset, args.home)
    if world is None:
        raise SystemExit(f"{args.dataset}: no simulated world (ground truth) to grade the rankings with")
    traffic = draw_traffic(world, args.queries, 0, days=validation_days(world))
    data = XCDataset.load(dataset_dir(args.home, args.dataset))
    position = {kid: i for i, kid in enumerate(world.keywords["keyword_id"].to_list())}
    label_rows = np.array([position.get(x, -1) for x in data.label_ids], dtype=np.int64)
    kw_clicks = np.zeros(len(world.keywords))
    kw_clicks[label_rows[label_rows >= 0]] = np.asarray(data.y_train.sum(axis=0)).ravel()[label_rows >= 0]
    rows = np.unique(traffic.query)
    bm25 = Bm25Arm().candidates(world, rows, K)
    fused, scorer = fused_scorers(args.home, args.dataset, args.method, args.profile)
    chosen = {f: getattr(fused, f) for f in ("alpha", "tail_offset", "untrained_offset", "popularity_weight",
                                              "memory_weight", "linear_weight", "name_weight", "lexical_weight")}
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    for name, overrides in VARIANTS.items():
        found = scorer_candidates(world, rows, K, scorer(overrides), data.label_ids)
        record = {"name": f"{args.method}-{name}", "source": args.method, "fusion": chosen, "overrides": overrides,
                  "dataset": args.dataset, "period": "validation", "code": commit,
                  **depth_profile(world, traffic, rows, found, bm25[1], kw_clicks)}
        (RESULTS / f"{args.dataset}-validation-{args.method}-{name}.json").write_text(json.dumps(record, indent=1)
                                                                                    + "\n")
        print(json.dumps(record))


if __name__ == "__main__":
    main()
