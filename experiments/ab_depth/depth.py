"""How relevant is each encoder's ranking at the depths the simulated A/B's auction draws from?

For every distinct query row of one A/B traffic draw (the demo default: 20,000 events of the test period), rank the
query's market's labels by the encoder's cosine and read the world's true grade at ranks 1, 2-5, 6-20, 21-100;
then run the A/B's own selection step (score x bid, 5 slots) on those candidates and report the shown ads' grade,
their share with grade >= 2 (what IY counts) and the median rank they come from.

    .venv/bin/python experiments/ab_depth/depth.py --home HOME --encoder NAME=FOLDER [--encoder NAME=FOLDER ...]
    .venv/bin/python experiments/ab_depth/depth.py --home HOME --fused dual_encoder-clf

FOLDER is an encoder folder (``<home>/models/synthetic/<method>-demo/encoder``; the shipped MiniLM for the untrained
encoder). The result JSON goes to ``experiments/ab_depth/results/<name>.json`` with the code stamp.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from xc_core.abtest.arms import Bm25Arm, by_market, label_keyword_rows, scorer_candidates
from xc_core.abtest.auction import select
from xc_core.abtest.config import SelectionConfig
from xc_core.abtest.traffic import draw_traffic, validation_days
from xc_core.datasets.container import XCDataset
from xc_core.encoders.text import encoder_for
from xc_core.paths import dataset_dir, index_dir, model_dir
from xc_core.provenance import git_commit, write_result
from xc_core.stages.abtest import ground_truth
from xc_core.training.record import TrainedModel

BANDS = ((0, 1), (1, 5), (5, 20), (20, 100))
K = 100  # the A/B's candidates per query (SelectionConfig.candidates)
RESULTS = Path(__file__).parent / "results"


def encoder_candidates(world, rows: np.ndarray, q_vecs: dict[str, np.ndarray], label_vecs: np.ndarray,
                       label_rows: np.ndarray, k: int = K) -> tuple[np.ndarray, np.ndarray]:
    """The encoder's in-market top-k over the data set's labels for each world query row (the model arm's view)."""
    kw_to_label = np.full(len(world.keywords), -1, dtype=np.int64)
    kw_to_label[label_rows[label_rows >= 0]] = np.flatnonzero(label_rows >= 0)
    texts = world.queries["text"].to_numpy()

    def block(part: np.ndarray, market: int, members: np.ndarray) -> np.ndarray:
        at = kw_to_label[members]
        q = np.stack([q_vecs[t] for t in texts[part]])
        out = np.full((len(part), len(members)), -np.inf, dtype=np.float32)
        known = at >= 0
        out[:, known] = q @ label_vecs[at[known]].T
        return out

    return by_market(world, rows, k, block)


def depth_profile(world, traffic, rows: np.ndarray, found: tuple[np.ndarray, np.ndarray],
                  logging_policy: np.ndarray, kw_clicks: np.ndarray) -> dict[str, float]:
    """Grades by rank band, the shown ads of the A/B's selection, and the overlap with the logging policy's
    (BM25's) top-k, for candidates ``found`` of the distinct query rows ``rows``."""
    k = found[1].shape[1]
    scores = np.full((len(world.queries), k), -np.inf, dtype=np.float32)
    kws = np.full((len(world.queries), k), -1, dtype=np.int64)
    scores[rows], kws[rows] = found
    cand = kws[rows]
    grade = world.grades(np.repeat(rows, k), np.maximum(cand, 0).ravel()).reshape(cand.shape).astype(float)
    grade[cand < 0] = np.nan
    out = {f"grade@{lo + 1}-{hi}": float(np.nanmean(grade[:, lo:hi])) for lo, hi in BANDS}
    top_scores = np.where(cand >= 0, found[0], np.nan)
    out |= {f"score@{r}": float(np.nanmean(top_scores[:, r - 1])) for r in (1, 5, 20, 100)}
    safe = np.maximum(cand, 0)
    for name, per_kw in (("train_clicks", kw_clicks), ("bid", world.kw_bid)):
        value = np.where(cand >= 0, per_kw[safe], np.nan)
        out |= {f"{name}@{lo + 1}-{hi}": float(np.nanmean(value[:, lo:hi])) for lo, hi in BANDS}
    shown = select(world, traffic, traffic.query, scores, kws, SelectionConfig())
    e, slot = np.nonzero(shown.keyword >= 0)
    shown_kw = shown.keyword[e, slot]
    shown_grade = world.grades(traffic.query[e], shown_kw)
    rank = (kws[traffic.query[e]] == shown_kw[:, None]).argmax(axis=1)
    # the click model's expected clicks per shown ad (position-based: the A/B's CTR without its click noise)
    expected_ctr = world.click_probabilities(traffic.query[e], shown_kw, slot + 1).mean()
    out |= {"expected_ctr": float(100 * expected_ctr), "shown_grade": float(shown_grade.mean()),
            "shown_grade>=2": float((shown_grade >= 2).mean()),
            "shown_rank_median": float(np.median(rank) + 1), "shown_from_top5": float((rank < 5).mean()),
            "shown_bid": float(world.kw_bid[shown_kw].mean()), "distinct_queries": int(len(rows)),
            f"overlap_with_bm25@{k}": _overlap(cand, logging_policy)}
    return out


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Mean share of each row's valid entries of ``b`` that ``a``'s row holds too (rows where ``b`` has any)."""
    shares = [len(np.intersect1d(x[x >= 0], y[y >= 0])) / (y >= 0).sum()
              for x, y in zip(a, b, strict=True) if (y >= 0).any()]
    return float(np.mean(shares))


#: the parts of the fusion switched off one at a time (its weights by name, classifier/channels.fusion_keys; in
#: memory, no artifact changes)
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
        variant = fused.with_fusion(**overrides)

        def score(texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
            vectors = np.asarray(model.predict(texts), dtype=np.float32)
            return fused_search(vectors, index, classifier, label_vectors, variant, k, texts=texts)

        return score

    return fused, scorer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--encoder", action="append", default=[], help="NAME=FOLDER")
    parser.add_argument("--fused", default="", help="a -clf method trained in HOME: its fused ranking as chosen "
                        "and with one part of its fusion off at a time (VARIANTS), instead of --encoder")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--period", choices=("validation", "test"), default="validation",
                        help="traffic of the training window's last days (to develop on) or of the test period")
    args = parser.parse_args()
    world = ground_truth(args.dataset, args.home)
    if world is None:
        raise SystemExit(f"{args.dataset}: no simulated world (ground truth) to grade the rankings with")
    days = validation_days(world) if args.period == "validation" else None
    traffic = draw_traffic(world, args.queries, 0, days=days)
    data = XCDataset.load(dataset_dir(args.home, args.dataset))
    label_rows = label_keyword_rows(world, data.label_ids)
    texts = sorted(set(world.queries["text"].to_numpy()[np.unique(traffic.query)]))
    kw_clicks = np.zeros(len(world.keywords))
    kw_clicks[label_rows[label_rows >= 0]] = np.asarray(data.y_train.sum(axis=0)).ravel()[label_rows >= 0]
    rows = np.unique(traffic.query)
    bm25 = Bm25Arm().candidates(world, rows, K)
    RESULTS.mkdir(exist_ok=True)
    # the commit, marked only when code differs from it (git describe --dirty also marked an earlier record's file)
    commit = git_commit()
    records = [("bm25", "the simulator's BM25 serving policy (wrote the logs)", bm25)]
    extra: dict[str, dict] = {}
    for spec in args.encoder:
        name, folder = spec.split("=", 1)
        encoder = encoder_for(Path(folder))
        vectors = dict(zip(texts, encoder.encode(texts), strict=True))
        label_vecs = encoder.encode(list(data.label_texts))
        records.append((name, folder, encoder_candidates(world, rows, vectors, label_vecs, label_rows)))
    if args.fused:
        fused, scorer = fused_scorers(args.home, args.dataset, args.fused, args.profile)
        chosen = dict(fused.fusion)  # every weight of the fusion as served, by name
        for variant, overrides in VARIANTS.items():
            name = f"{args.fused}-{variant}"
            records.append((name, args.fused, scorer_candidates(world, rows, K, scorer(overrides), data.label_ids)))
            extra[name] = {"fusion": chosen, "overrides": overrides}
    for name, source, found in records:
        profile = depth_profile(world, traffic, rows, found, bm25[1], kw_clicks)
        record = {"name": name, "source": source, "dataset": args.dataset, "period": args.period,
                  "code": commit, **extra.get(name, {}), **profile}
        write_result(RESULTS / f"{args.dataset}-{args.period}-{name}.json", json.dumps(record, indent=1) + "\n")
        print(json.dumps(record))


if __name__ == "__main__":
    main()
