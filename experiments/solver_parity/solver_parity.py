"""xc's XR-Linear (the classifier stage's hybrid channel) against libpecos on the *same* features and rows (issue #40).

    make peers   # once: libpecos in .venv-peers
    .venv/bin/python experiments/solver_parity/solver_parity.py --home /tmp/xc --dataset wikispeedia \
        --features dense,sparse,hybrid
    .venv/bin/python experiments/solver_parity/solver_parity.py --home /tmp/xc --dataset aol-1000 --features hybrid \
        --no-peer --variant 'beam50={"beam": 50}' --variant 'c2={"cost": 2.0}'

Rows: the classifier stage's own out-of-fold rows (``classifier/folds.py``: blocks of days on event logs, document
folds elsewhere; training documents only, never the test split). For each fold and feature set, xc's
``LinearChannel`` and PECOS XR-Linear (default settings, PIFA clustering, run in ``.venv-peers`` on the feature
matrices xc wrote) are trained on the fold's fit rows and rank its scored rows; a row's own labels are dropped as
the test filter drops them. Prints P@1 per fold and the paired difference xc − PECOS over all rows with its 95%
normal interval; writes ``results/solver_parity-<data set>.json`` (beside this script). The untrained encoder's
vectors are the dense block (cached in ``<home>/peers/<data set>-parity/vectors.npz``). ``--variant NAME=JSON``:
xc's hybrid channel with those ``LinearConfig`` settings as well, paired against xc's default hybrid on the same
rows (``--no-peer``: without libpecos). The rows are the classifier stage's own (the demo profile's fold settings).
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

from xc_core.provenance import write_result

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
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
    from xc_core.paths import vectors_dir

    cache = home / "peers" / f"{dataset.name}-parity" / "vectors.npz"
    if cache.exists():
        return np.load(cache)["documents"]
    cache.parent.mkdir(parents=True, exist_ok=True)
    # through the home's vector cache: the classifier stage of `pretrained-clf` makes the same call and reads it back
    vectors = encoder_for(default_model_path(), vector_cache=vectors_dir(home)).encode(
        dataset.train_texts, progress=True, desc="train documents")
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


def _paired(a: np.ndarray, b: np.ndarray) -> list[float]:
    """Mean of a − b in points with its 95% normal interval."""
    diff = a - b
    half = 1.96 * diff.std(ddof=1) / np.sqrt(len(diff))
    return [round(100 * float(x), 2) for x in (diff.mean(), diff.mean() - half, diff.mean() + half)]


def parity(home: Path, name: str, features: list[str], max_folds: int | None,
           variants: dict[str, dict] | None = None, peer: bool = True) -> dict:
    from xc_core.classifier.folds import out_of_fold
    from xc_core.classifier.xrlinear import LinearChannel, LinearConfig
    from xc_core.profiles import get_profile
    from xc_core.provenance import git_commit
    from xc_core.stages.anchor_sets import load_with_anchors

    if peer and not PEER_PYTHON.exists():
        raise SystemExit(f"{PEER_PYTHON} missing: run `make peers` first")
    dataset = load_with_anchors(home, name)
    vectors = _vectors(home, dataset)
    cfg = get_profile("demo").classifier
    folds = out_of_fold(dataset, cfg.folds, cfg.oof_max_rows, cfg.seed, cfg.fold_kind, cfg.temporal_span, None,
                        cfg.time_blocks, cfg.oof_min_rows, cfg.max_time_blocks)[:max_folds]
    runs = {f"xc-{kind}": {"features": kind} for kind in features}
    runs.update({f"xc-hybrid-{v}": {"features": "hybrid", **update} for v, update in (variants or {}).items()})
    hits: dict[str, list[np.ndarray]] = {}
    seconds: dict[str, float] = {}
    for fold in folds:
        y_fit = sp.csr_matrix(fold.y_fit[fold.fit_rows])
        fit_texts = [dataset.train_texts[i] for i in fold.fit_rows]
        score_texts = [dataset.train_texts[i] for i in fold.score_rows]
        channels = {}
        for run, settings in runs.items():
            started = time.perf_counter()
            channel = LinearChannel.fit(fit_texts, vectors[fold.fit_rows], y_fit, LinearConfig.model_validate(settings))
            scores, ids = channel.search(score_texts, vectors[fold.score_rows], 100)
            seconds[run] = seconds.get(run, 0.0) + time.perf_counter() - started
            hits.setdefault(run, []).append(_top1_hits(dataset, fold, scores, ids))
            channels[run] = channel
        for kind in features if peer else []:
            channel = channels[f"xc-{kind}"]
            rows = [channel.features.rows(t, vectors[r]) for t, r in ((fit_texts, fold.fit_rows),
                                                                      (score_texts, fold.score_rows))]
            x_fit, x_score = (sp.hstack([s, sp.csr_matrix(d)]).tocsr() for s, d in rows)
            started = time.perf_counter()
            scores, ids = _pecos(home / "peers" / f"{name}-parity" / kind, x_fit, x_score, y_fit)
            seconds[f"pecos-{kind}"] = seconds.get(f"pecos-{kind}", 0.0) + time.perf_counter() - started
            hits.setdefault(f"pecos-{kind}", []).append(_top1_hits(dataset, fold, scores, ids))
        print(fold.name, {k: round(100 * float(v[-1].mean()), 2) for k, v in hits.items()}, flush=True)
    joined = {k: np.concatenate(v) for k, v in hits.items()}
    out = {"dataset": name, "commit": git_commit(ROOT), "rows": int(len(next(iter(joined.values())))),
           "folds": [f.name for f in folds],
           "P@1": {k: round(100 * float(v.mean()), 2) for k, v in joined.items()},
           "seconds": {k: round(v, 1) for k, v in seconds.items()},
           "xc_minus_pecos": {kind: _paired(joined[f"xc-{kind}"], joined[f"pecos-{kind}"])
                              for kind in (features if peer else [])},
           "variant_minus_hybrid": {v: _paired(joined[f"xc-hybrid-{v}"], joined["xc-hybrid"]) for v in variants or {}},
           "variants": variants or {}}
    return out


def _variant(parser: argparse.ArgumentParser, text: str) -> tuple[str, dict]:
    """``NAME=JSON`` → (name, settings); a malformed value or a setting LinearConfig does not have is an error here,
    not a run of the default channel against itself (LinearConfig ignores unknown keys)."""
    from xc_core.classifier.xrlinear import LinearConfig

    name, _, raw = text.partition("=")
    try:
        settings = json.loads(raw)
    except json.JSONDecodeError as err:
        parser.error(f"--variant {text!r}: the value after '=' is not JSON ({err}); e.g. 'beam50={{\"beam\": 50}}'")
    if not name or not isinstance(settings, dict):
        parser.error(f"--variant {text!r}: expected NAME={{JSON object of LinearConfig settings}}")
    if unknown := sorted(set(settings) - set(LinearConfig.model_fields)):
        parser.error(f"--variant {name}: {', '.join(unknown)} not a LinearConfig setting; "
                     f"choose from {', '.join(LinearConfig.model_fields)}")
    return name, settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", default="dense,sparse,hybrid")
    parser.add_argument("--max-folds", type=int, default=None, help="the first N folds only (aol-1000: 1)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=JSON",
                        help="xc's hybrid channel with these LinearConfig settings too (repeatable)")
    parser.add_argument("--no-peer", action="store_true", help="xc's channels only (no libpecos)")
    args = parser.parse_args()
    variants = dict(_variant(parser, v) for v in args.variant)
    if variants and "hybrid" not in args.features.split(","):
        raise SystemExit("--variant is paired against xc's default hybrid: keep hybrid in --features")
    found = parity(args.home, args.dataset, args.features.split(","), args.max_folds, variants, not args.no_peer)
    suffix = "-variants" if variants else ""
    out = RESULTS_DIR / f"solver_parity-{args.dataset}{suffix}.json"
    write_result(out, json.dumps(found, indent=2) + "\n")
    json.dump(found, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
