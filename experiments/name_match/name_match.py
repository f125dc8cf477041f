"""Issue #40: would a label's *name* written into the query pay as a channel of the fusion? On aol-1000 a label is a
clicked host and its text the host's words ("bankofamerica"); a query that spells the name out ("bank of america",
"www.bankofamerica.com") names the label, and neither the encoder's subword vectors nor the TF-IDF n-grams match the
unsegmented name exactly.

Features per (row, candidate), all from texts alone (nothing learned): ``equal`` — the query without spaces is the
label's text without spaces; ``contained`` — the label's text without spaces (4+ characters) occurs in the query
without spaces, scored by the share of the query it covers; ``covers`` — the query without spaces (4+ characters)
occurs in the label's, scored by the share of the label's text it covers; ``channel`` — the name channel as built
from these (``xc_core/classifier/names.py``: either containment, the share squared), here on the stage's shortlist
only (the built channel also adds the labels a query names to it). Measured on the classifier stage's own
out-of-fold blocks (the stage's folds, settings and channels, untrained encoder: ``pretrained-clf``): each block is
ranked by the fusion the stage's procedure picks on the other blocks, then a feature is added with the weight best
(P@1) on the other blocks under their own picks; paired with the same ranking without it, all labels and the
seen-label view.

    .venv/bin/python experiments/name_match/name_match.py --home /work/exp/aol --dataset aol-1000

Blocks are kept under ``--work`` (resumable).
"""

from __future__ import annotations

import argparse
import json
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.provenance import write_result

RESULTS_DIR = Path(__file__).resolve().parent / "results"
FEATURES = ("equal", "contained", "covers", "channel")
WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)  # fixed before any run: the stage's doubling grids


def compact(text: str) -> str:
    return "".join(text.split())


def name_features(queries: list[str], label_texts: list[str], candidates: np.ndarray) -> dict[str, np.ndarray]:
    """Every feature of the module docstring on every row's candidates."""
    from xc_core.classifier.names import LabelNames

    names = [compact(t) for t in label_texts]
    out = {name: np.zeros(candidates.shape, np.float32) for name in FEATURES}
    for r, query in enumerate(queries):
        q = compact(query)
        for c, label in enumerate(candidates[r]):
            name = names[label] if label >= 0 else ""
            if len(name) < 4:
                continue
            out["equal"][r, c] = float(name == q)
            out["contained"][r, c] = len(name) / max(len(q), 1) if name in q else 0.0
            out["covers"][r, c] = len(q) / len(name) if len(q) >= 4 and q in name else 0.0
    out["channel"] = LabelNames.fit(label_texts).scores_on(queries, candidates)
    return out


def fused(grid: Any, fusion: Any, extra: np.ndarray | None, seen: bool) -> np.ndarray:
    """The stage's fused score of every candidate (``FusionGrid.ranked``'s sum) plus ``extra``; −inf where blocked."""
    score = fusion.alpha * grid.encoder_scores + (1 - fusion.alpha) * grid.classifier_scores
    for name, values in grid.channel_scores.items():  # the base grid has no name channel
        if name != "names" and (weight := fusion.weight(name)) > 0:
            score = score + np.float32(weight) * values
    score = score + np.float32(fusion["untrained_offset"]) * grid.on_untrained
    if extra is not None:
        score = score + extra
    return np.where(grid.blocked | (grid.on_untrained if seen else False), -np.inf, score)


def hits(grid: Any, fusion: Any, extra: np.ndarray | None, seen: bool) -> np.ndarray:
    """Per row, 1 when the best candidate (equal scores: the lower id) is a positive."""
    from xc_core.classifier.shortlist import best_first

    scores, top = best_first(fused(grid, fusion, extra, seen).astype(np.float32), grid.candidates, 1)
    return positive(grid.truth, np.where(np.isfinite(scores[:, 0]), top[:, 0], -1))


def positive(truth: Any, ids: np.ndarray) -> np.ndarray:
    """Per row, 1 when ``ids[row]`` is one of the row's positives."""
    return np.array([ids[r] in truth.indices[truth.indptr[r]: truth.indptr[r + 1]] for r in range(len(ids))], float)


def evaluate(blocks: list[dict[str, Any]], picks: Sequence[Any], feature: str) -> dict[str, Any]:
    """Each block: its base pick plus ``feature`` at the weight best on the other blocks (under their picks)."""
    from xc_core.evaluation.analyses import paired_bootstrap_diff

    def extra(block: dict[str, Any], weight: float) -> np.ndarray | None:
        return weight * block["features"][feature] if weight else None

    table = {w: [hits(b["grid"], p, extra(b, w), False) for b, p in zip(blocks, picks, strict=True)] for w in WEIGHTS}
    chosen = [max(WEIGHTS, key=lambda w: (sum(table[w][o].sum() for o in range(len(blocks)) if o != i), -w))
              for i in range(len(blocks))]
    out: dict[str, Any] = {"weights": chosen}
    for seen in (False, True):
        before = np.concatenate([hits(b["grid"], p, None, seen) for b, p in zip(blocks, picks, strict=True)])
        after = np.concatenate([hits(b["grid"], p, extra(b, w), seen)
                                for b, p, w in zip(blocks, picks, chosen, strict=True)])
        diff, low, high, _ = paired_bootstrap_diff(after, before, n_boot=2000, seed=0)
        out["seen" if seen else "all"] = {"base": round(100 * before.mean(), 2), "with": round(100 * after.mean(), 2),
                                          "gain": round(100 * diff, 2), "low": round(100 * low, 2),
                                          "high": round(100 * high, 2)}
    return out


def main() -> None:
    from xc_core.classifier.folds import out_of_fold
    from xc_core.classifier.stage import OutOfFoldGrid, fold_grid, fusion_selector
    from xc_core.datasets.container import XCDataset
    from xc_core.encoders.text import default_model_path, encoder_for
    from xc_core.evaluation.metrics import propensity
    from xc_core.profiles import get_profile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="aol-1000")
    parser.add_argument("--work", type=Path, default=None, help="kept blocks (default: /tmp/xc-name-match/<data>)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path("/tmp/xc-name-match") / args.dataset
    work.mkdir(parents=True, exist_ok=True)
    ds = XCDataset.load(args.home / "datasets" / args.dataset)
    profile = get_profile("demo")
    # the stage as before the name channel: what the features are measured against
    cfg = profile.classifier.model_copy(update={"name_weights": (0.0,)})
    encoder = encoder_for(default_model_path(), profile.encoder.max_length, work / "vectors")
    label_vecs = encoder.encode(ds.label_texts, progress=True, desc="labels")
    doc_vecs = encoder.encode(ds.train_texts, progress=True, desc="train documents")
    folds = out_of_fold(ds, cfg.folds, cfg.oof_max_rows, cfg.seed, cfg.fold_kind, cfg.temporal_span, None,
                        cfg.time_blocks, cfg.oof_min_rows, cfg.max_time_blocks)
    blocks = []
    for i, fold in enumerate(folds):
        path = work / f"block{i}.pkl"
        if not path.exists():
            grid, seconds = fold_grid(ds, fold, doc_vecs, label_vecs, propensity(ds), cfg)
            path.write_bytes(pickle.dumps({"name": fold.name, "grid": grid, "seconds": seconds}))
            print(fold.name, seconds, flush=True)
        block = pickle.loads(path.read_bytes())
        block["features"] = name_features([ds.train_texts[r] for r in fold.score_rows], ds.label_texts,
                                          block["grid"].candidates)
        blocks.append(block)
    oof = OutOfFoldGrid([b["grid"] for b in blocks])
    select = fusion_selector(oof, cfg)
    everything = np.arange(oof.truth.shape[0])
    picks = [select(np.setdiff1d(everything, rows, assume_unique=True)) for rows in oof.blocks]
    for block, pick in zip(blocks, picks, strict=True):  # this script's fused score is the stage's
        assert np.array_equal(hits(block["grid"], pick, None, False),
                              positive(block["grid"].truth, block["grid"].ranked(pick)[1][:, 0])), block["name"]
    out: dict[str, Any] = {"dataset": args.dataset, "home": str(args.home), "blocks": [b["name"] for b in blocks],
                           "rows": int(len(everything)), "base_picks": [p.changed() for p in picks],
                           "rows_with": {f: int(sum((b["features"][f] > 0).any(axis=1).sum() for b in blocks))
                                         for f in FEATURES},
                           "features": {}}
    for feature in FEATURES:
        out["features"][feature] = evaluate(blocks, picks, feature)
        print(feature, json.dumps(out["features"][feature]), flush=True)
    target = args.out or RESULTS_DIR / f"name_match-{args.dataset}.json"
    write_result(target, json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
