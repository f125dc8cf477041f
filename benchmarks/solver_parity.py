"""xc's XR-Linear (the classifier stage's hybrid channel) against libpecos on the *same* features and rows (issue #40).

    make peers   # once: libpecos in .venv-peers
    .venv/bin/python benchmarks/solver_parity.py --home /tmp/xc --dataset wikispeedia --features dense,sparse,hybrid

Rows: the classifier stage's own out-of-fold rows (``classifier/folds.py``: blocks of days on event logs, document
folds elsewhere; training documents only, never the test split). For each fold and feature set, xc's
``LinearChannel`` and PECOS XR-Linear (default settings, PIFA clustering, run in ``.venv-peers`` on the feature
matrices xc wrote) are trained on the fold's fit rows and rank its scored rows; a row's own labels are dropped as the
test filter drops them. Prints P@1 per fold and the paired difference xc − PECOS over all rows with its 95% normal
interval; writes ``benchmarks/results/solver_parity-<data set>.json``. The untrained encoder's vectors are the dense
block (cached in ``<home>/peers/<data set>-parity/vectors.npz``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
PECOS_ON_MATRICES = '''
import sys, numpy as np, scipy.sparse as sp
from pathlib import Path
from pecos.xmc import Indexer, LabelEmbeddingFactory
from pecos.xmc.xlinear.model import XLinearModel
f = Path(sys.argv[1])
x, t = (sp.load_npz(f / n).tocsr().astype(np.float32) for n in ("trn.npz", "tst.npz"))
y = sp.load_npz(f / "y.npz").tocsr().astype(np.float32)
model = XLinearModel.train(x, y, C=Indexer.gen(LabelEmbeddingFactory.create(y, x, method="pifa"), seed=0))
sp.save_npz(f / "scores.npz", sp.csr_matrix(model.predict(t, only_topk=100)))
'''


def _vectors(home: Path, dataset) -> np.ndarray:
    from xc_core.encoders.text import default_model_path, encoder_for

    cache = home / "peers" / f"{dataset.name}-parity" / "vectors.npz"
    if cache.exists():
        return np.load(cache)["documents"]
    cache.parent.mkdir(parents=True, exist_ok=True)
    vectors = encoder_for(default_model_path()).encode(dataset.train_texts, progress=True, desc="train documents")
    np.savez(cache, documents=vectors)
    return vectors


def _top1_hits(dataset, fold, scores: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """1 where a row's best label (own labels dropped) is a positive."""
    scores = scores.astype(np.float32).copy()
    for row, label in np.asarray(dataset.own_label_pairs(fold.score_rows), np.int64).reshape(-1, 2):
        scores[row][ids[row] == label] = -np.inf
    scores[ids < 0] = -np.inf
    best = np.argmax(scores, axis=1)
    top = np.where(np.isfinite(scores[np.arange(len(ids)), best]), ids[np.arange(len(ids)), best], -1)
    truth = sp.csr_matrix(fold.truth)
    return np.asarray(truth[np.arange(len(top)), np.maximum(top, 0)]).ravel() * (top >= 0)


def _pecos(folder: Path, x_fit: sp.csr_matrix, x_score: sp.csr_matrix, y_fit: sp.csr_matrix
           ) -> tuple[np.ndarray, np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    sp.save_npz(folder / "trn.npz", x_fit)
    sp.save_npz(folder / "tst.npz", x_score)
    sp.save_npz(folder / "y.npz", sp.csr_matrix(y_fit, dtype=np.float32))
    subprocess.run([str(PEER_PYTHON), "-c", PECOS_ON_MATRICES, str(folder)], check=True)
    found = sp.load_npz(folder / "scores.npz").tocsr()
    ids = np.full((found.shape[0], 100), -1, np.int64)
    scores = np.full((found.shape[0], 100), -np.inf, np.float32)
    for row in range(found.shape[0]):
        lo, hi = found.indptr[row], found.indptr[row + 1]
        ids[row, : hi - lo], scores[row, : hi - lo] = found.indices[lo:hi], found.data[lo:hi]
    return scores, ids


def parity(home: Path, name: str, features: list[str], max_folds: int | None) -> dict:
    from xc_core.classifier.folds import out_of_fold
    from xc_core.classifier.linear import LinearChannel, LinearConfig
    from xc_core.stages.anchor_sets import load_with_anchors

    if not PEER_PYTHON.exists():
        raise SystemExit(f"{PEER_PYTHON} missing: run `make peers` first")
    dataset = load_with_anchors(home, name)
    vectors = _vectors(home, dataset)
    folds = out_of_fold(dataset, 10, 6000, 0)[:max_folds]
    hits: dict[str, list[np.ndarray]] = {}
    seconds: dict[str, float] = {}
    for fold in folds:
        y_fit = sp.csr_matrix(fold.y_fit[fold.fit_rows])
        fit_texts = [dataset.train_texts[i] for i in fold.fit_rows]
        score_texts = [dataset.train_texts[i] for i in fold.score_rows]
        for kind in features:
            started = time.perf_counter()
            cfg = LinearConfig.model_validate({"features": kind})
            channel = LinearChannel.fit(fit_texts, vectors[fold.fit_rows], y_fit, cfg)
            scores, ids = channel.search(score_texts, vectors[fold.score_rows], 100)
            seconds[f"xc-{kind}"] = seconds.get(f"xc-{kind}", 0.0) + time.perf_counter() - started
            hits.setdefault(f"xc-{kind}", []).append(_top1_hits(dataset, fold, scores, ids))
            rows = [channel.features.rows(t, vectors[r]) for t, r in ((fit_texts, fold.fit_rows),
                                                                      (score_texts, fold.score_rows))]
            x_fit, x_score = (sp.hstack([s, sp.csr_matrix(d)]).tocsr() for s, d in rows)
            started = time.perf_counter()
            scores, ids = _pecos(home / "peers" / f"{name}-parity" / kind, x_fit, x_score, y_fit)
            seconds[f"pecos-{kind}"] = seconds.get(f"pecos-{kind}", 0.0) + time.perf_counter() - started
            hits.setdefault(f"pecos-{kind}", []).append(_top1_hits(dataset, fold, scores, ids))
        print(fold.name, {k: round(100 * float(v[-1].mean()), 2) for k, v in hits.items()}, flush=True)
    joined = {k: np.concatenate(v) for k, v in hits.items()}
    gaps: dict[str, list[float]] = {}
    out = {"dataset": name, "rows": int(len(next(iter(joined.values())))), "folds": [f.name for f in folds],
           "P@1": {k: round(100 * float(v.mean()), 2) for k, v in joined.items()},
           "seconds": {k: round(v, 1) for k, v in seconds.items()}, "xc_minus_pecos": gaps}
    for kind in features:
        diff = joined[f"xc-{kind}"] - joined[f"pecos-{kind}"]
        half = 1.96 * diff.std(ddof=1) / np.sqrt(len(diff))
        gaps[kind] = [round(100 * float(diff.mean()), 2), round(100 * float(diff.mean() - half), 2),
                                       round(100 * float(diff.mean() + half), 2)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", default="dense,sparse,hybrid")
    parser.add_argument("--max-folds", type=int, default=None, help="the first N folds only (aol-1000: 1)")
    args = parser.parse_args()
    found = parity(args.home, args.dataset, args.features.split(","), args.max_folds)
    out = ROOT / "benchmarks" / "results" / f"solver_parity-{args.dataset}.json"
    out.write_text(json.dumps(found, indent=2) + "\n")
    json.dump(found, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
