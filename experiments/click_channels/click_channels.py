"""Issue #40: would the clicks themselves pay? The click memory and label popularity (``classifier/memory.py``) tried on
an event-log data set's out-of-fold rows before they were built into the stage, with the served fusion held fixed.

Step 1 (``--dump``, minutes per block on aol-1000): the classifier stage's out-of-fold blocks for a trained ``-clf``
model's encoder — W, the lexical and the hybrid channel refit per block exactly as the stage does — and each block's
candidates and channel scores saved under ``--work``. Step 2: extra channels over those candidates, from the click days
before each block: the memory (a repeated query's click days over its most clicked label's), popularity over all days,
the last 7/14/28 days or halving every 7/14/28 days, and click-day-weighted lexical votes; each weight chosen on the
other blocks (cross-fitted), P@1 paired against the served fusion, on all labels and with predictions restricted to
labels trained before the block ("seen"). Then the memory, popularity and the untrained-label offset together.

    .venv/bin/python experiments/click_channels/click_channels.py --home /work/exp_home --dataset aol-1000 --dump
    .venv/bin/python experiments/click_channels/click_channels.py --home /work/exp_home --dataset aol-1000

The encoder's document vectors are read from ``xc peer --peer pecos-xc``'s exchange folder (the
untrained encoder's), so the model must be ``pretrained-clf``.
"""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.provenance import write_result

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def dump(home: Path, dataset_name: str, work: Path) -> None:
    from xc_core.classifier.folds import out_of_fold
    from xc_core.classifier.stage import fold_grid
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.metrics import propensity
    from xc_core.profiles import get_profile

    ds = XCDataset.load(home / "datasets" / dataset_name)
    cfg = get_profile("demo").classifier
    # the channels as at 68e8b41 (no memory, no popularity): what the extra channels are measured against
    cfg = cfg.model_copy(update={"memory_weights": (0.0,), "popularity_weights": (0.0,)})
    doc_vecs = np.load(home / "peers" / f"{dataset_name}-xc" / "trn_dense.npy")
    label_vecs = np.load(home / "models" / dataset_name / "pretrained-clf-demo" / "label_vectors.npy")
    folds = out_of_fold(ds, cfg.folds, cfg.oof_max_rows, cfg.seed, cfg.fold_kind, cfg.temporal_span, None,
                        cfg.time_blocks, cfg.oof_min_rows, cfg.max_time_blocks)
    work.mkdir(parents=True, exist_ok=True)
    for i, fold in enumerate(folds):
        path = work / f"fold{i}.npz"
        if path.exists():  # resumable: a block already dumped is kept
            continue
        grid, seconds = fold_grid(ds, fold, doc_vecs, label_vecs, propensity(ds), cfg)
        assert grid.has("lexical") and grid.has("hybrid"), "both text channels are tried"
        np.savez(path, candidates=grid.candidates, enc=grid.encoder_scores, clf=grid.classifier_scores,
                 lex=grid.channel_scores["lexical"], lin=grid.channel_scores["hybrid"], blocked=grid.blocked,
                 on_untrained=grid.on_untrained, score_rows=fold.score_rows, truth_indptr=grid.truth.indptr,
                 truth_indices=grid.truth.indices, truth_shape=np.array(grid.truth.shape), name=np.array(fold.name))
        print(fold.name, seconds, flush=True)


def _on(ids_scores: list[tuple[np.ndarray, np.ndarray]], candidates: np.ndarray) -> np.ndarray:
    out = np.zeros(candidates.shape, np.float32)
    for r, (ids, values) in enumerate(ids_scores):
        if len(ids):
            at = np.minimum(np.searchsorted(ids, candidates[r]), len(ids) - 1)
            out[r] = np.where((candidates[r] >= 0) & (ids[at] == candidates[r]), values[at], 0.0)
    return out


def features(home: Path, dataset_name: str, work: Path) -> list[dict[str, Any]]:
    """Per dumped block: its grid and every extra channel's score of its candidates (cached in ``work``)."""
    from xc_core.classifier.lexical import LexicalChannel, LexicalConfig
    from xc_core.classifier.memory import ClickMemory, label_popularity
    from xc_core.datasets.container import XCDataset

    cache = work / "features.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes())  # this script's own cache, never a download
    ds = XCDataset.load(home / "datasets" / dataset_name)
    days, shape = ds.train_pair_days, ds.y_train.shape
    parts = []
    for path in sorted(work.glob("fold*.npz")):
        z = dict(np.load(path))
        start = int(str(z["name"]).split()[1].split("-")[0])
        before = days[days[:, 2] < start]
        candidates, rows = z["candidates"], z["score_rows"]
        safe = np.maximum(candidates, 0)
        texts = [ds.train_texts[i] for i in rows]
        feats: dict[str, np.ndarray] = {}
        for name, weight in {"prior": np.ones(len(before)),
                             **{f"prior{w}": (before[:, 2] >= start - w).astype(float) for w in (7, 14, 28)},
                             **{f"prior_half{h}": 0.5 ** ((start - 1 - before[:, 2]) / h) for h in (7, 14, 28)}
                             }.items():
            clicks = sp.csr_matrix((weight.astype(np.float32), (before[:, 0], before[:, 1])), shape=shape)
            feats[name] = label_popularity(clicks)[safe]
        counts = sp.csr_matrix((np.ones(len(before), np.float32), (before[:, 0], before[:, 1])), shape=shape)
        counts.sum_duplicates()
        fit = np.flatnonzero(np.diff(counts.indptr) > 0)
        fit_texts = [ds.train_texts[i] for i in fit]
        memory = ClickMemory.fit(fit_texts, counts[fit])
        feats["memory"] = _on([memory.scores(t) for t in texts], candidates)
        lexical = LexicalChannel.fit(fit_texts, counts[fit], LexicalConfig())
        feats["lexical_days"] = _on([lexical.scores(t) for t in texts], candidates)
        truth = sp.csr_matrix((np.ones(len(z["truth_indices"]), np.float32), z["truth_indices"], z["truth_indptr"]),
                              shape=tuple(z["truth_shape"]))
        parts.append({"z": z, "truth": truth, "feats": feats})
        print(path.name, flush=True)
    cache.write_bytes(pickle.dumps(parts))
    return parts


def hits(part: dict[str, Any], base: dict[str, float], weights: dict[str, float], seen: bool) -> np.ndarray:
    """Per row, 1 when the top label under the fixed fusion plus ``weights`` is a positive."""
    z, feats = part["z"], part["feats"]
    lexical = feats["lexical_days"] if "lexical_days" in weights else z["lex"]
    score = (base["alpha"] * z["enc"] + (1 - base["alpha"]) * z["clf"] + base["lexical_weight"] * lexical
             + base["linear_weight"] * z["lin"] + weights.get("offset", 0.0) * z["on_untrained"])
    for name, weight in weights.items():
        if name in feats and name != "lexical_days":
            score = score + weight * feats[name]
    score = np.where(z["blocked"] | (z["on_untrained"] if seen else False), -np.inf, score)
    rows = np.arange(len(score))
    best = np.lexsort((z["candidates"], -score), axis=1)[:, 0]
    top, truth = z["candidates"][rows, best], part["truth"]
    found = np.isfinite(score[rows, best])
    return np.array([found[r] and top[r] in truth.indices[truth.indptr[r]: truth.indptr[r + 1]] for r in rows], float)


def cross_fitted(parts: list[dict[str, Any]], base: dict[str, float], grid: list[dict[str, float]],
                 seed: int = 0) -> dict[str, Any]:
    """Each block scored by the grid point best (all-label P@1) on the other blocks; the paired gain over ``base``
    with a bootstrap interval, on all labels and in the seen-label view."""
    table = {seen: [[hits(p, base, w, seen) for p in parts] for w in grid] for seen in (False, True)}
    out: dict[str, Any] = {"chosen": []}
    picks = []
    for b in range(len(parts)):
        others = [o for o in range(len(parts)) if o != b]
        pick = max(range(len(grid)), key=lambda i: (sum(table[False][i][o].sum() for o in others), -i))
        picks.append(pick)
        out["chosen"].append(grid[pick])
    rng = np.random.default_rng(seed)
    for seen in (False, True):
        before = np.concatenate([hits(p, base, {}, seen) for p in parts])
        after = np.concatenate([table[seen][picks[b]][b] for b in range(len(parts))])
        diff = after - before
        boots = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(2000)]
        out["seen" if seen else "all"] = {"base_P@1": round(100 * before.mean(), 2),
                                          "gain": round(100 * diff.mean(), 2),
                                          "low": round(100 * float(np.percentile(boots, 2.5)), 2),
                                          "high": round(100 * float(np.percentile(boots, 97.5)), 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="aol-1000")
    parser.add_argument("--work", type=Path, default=None, help="dumped blocks (default: /tmp/xc-click-channels)")
    parser.add_argument("--dump", action="store_true", help="dump the out-of-fold blocks first")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path("/tmp/xc-click-channels") / args.dataset
    if args.dump:
        dump(args.home, args.dataset, work)
    parts = features(args.home, args.dataset, work)
    fusion = json.loads((args.home / "models" / args.dataset / "pretrained-clf-demo" / "classifier" / "fusion.json")
                        .read_text())
    base = {k: float(fusion[k]) for k in ("alpha", "lexical_weight", "linear_weight")}
    weights = (0.05, 0.1, 0.2, 0.3)
    grids: dict[str, list[dict[str, float]]] = {
        "memory": [{"memory": m} for m in (0.0, 0.8, 1.6, 3.2, 6.4)],
        # click-day-weighted votes replace the lexical channel's 0/1 votes, at the served lexical weight
        "lexical votes by click days": [{"lexical_days": 1.0}],
        **{f"popularity ({name})": [{name: 0.0}] + [{name: w} for w in weights]
           for name in ("prior", "prior7", "prior14", "prior28", "prior_half7", "prior_half14", "prior_half28")},
        # the three weights chosen together on the other blocks (the stage chooses the memory first)
        "memory, popularity and offset": [
            {"memory": m, "prior": p, "offset": b} for m in (0.0, 1.6, 3.2, 6.4) for p in (0.0, *weights)
            for b in (-0.1, -0.05, 0.0, 0.05, 0.1, 0.2)],
    }
    out = {"dataset": args.dataset, "home": str(args.home), "base_fusion": base,
           "blocks": [str(p["z"]["name"]) for p in parts], "rows": int(sum(len(p["z"]["score_rows"]) for p in parts)),
           "channels": {}}
    for name, grid in grids.items():
        out["channels"][name] = cross_fitted(parts, base, grid)
        print(name, json.dumps({k: v for k, v in out["channels"][name].items() if k != "chosen"}), flush=True)
    target = args.out or RESULTS_DIR / f"click_channels-{args.dataset}.json"
    write_result(target, json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
