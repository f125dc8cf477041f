"""PECOS XR-Linear on TF-IDF: the linear extreme classifier a practitioner tries first. Runs in .venv-peers.

    .venv-peers/bin/python benchmarks/peers/pecos_peer.py FOLDER [--topk 100] [--seed 0] [--features tfidf|hybrid]

FOLDER is an XC-repository-style exchange folder written by xc (``xc_core/stages/peer.py``):
``trn_X.txt`` / ``tst_X.txt`` (one document text per line), ``trn_X_Y.npz`` (train document × label CSR)
and ``meta.json`` (``n_labels``). Writes ``tst_scores.npz``: the test documents' top-``topk`` label
scores as a CSR matrix, plus ``peer.json`` (settings and seconds). xc scores it with its own metrics, so
the peer and every xc method are measured by the same code. Nothing here imports xc: libpecos pins
numpy<2 and scipy<1.14, which xc's environment cannot share.

Features: TF-IDF over word 1–2-grams and character 2–4-grams within word boundaries (``char_wb``, seen in
≥ 2 training documents), raw tf (on wikispeedia sublinear tf or every char n-gram scored 1–3 P@1 lower,
within noise: the stronger peer is kept), each block L2-normalised, stacked, rows L2-normalised; labels clustered by
PIFA (label = normalised sum of its training documents' features); XR-Linear with its default solver.

``--features hybrid`` (the peer on xc's own features, issue #40; XR-Transformer's recipe without fine-tuning): the
TF-IDF block above ⊕ the untrained encoder's vectors (``trn_dense.npy`` / ``tst_dense.npy``, written by xc), each
block L2-normalised, equal weight, rows L2-normalised; nothing tuned.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def featurize(train: list[str], test: list[str], seed: int) -> tuple[sp.csr_matrix, sp.csr_matrix, dict]:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    blocks = [TfidfVectorizer(analyzer="word", ngram_range=(1, 2), dtype=np.float32),
              TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, dtype=np.float32)]
    x_train = sp.hstack([b.fit_transform(train) for b in blocks]).tocsr()
    x_test = sp.hstack([b.transform(test) for b in blocks]).tocsr()
    info = {"features": int(x_train.shape[1]), "word_vocabulary": len(blocks[0].vocabulary_),
            "char_vocabulary": len(blocks[1].vocabulary_)}
    return (normalize(x_train).astype(np.float32).tocsr(), normalize(x_test).astype(np.float32).tocsr(), info)


def with_dense(x_train: sp.csr_matrix, x_test: sp.csr_matrix, folder: Path, info: dict
               ) -> tuple[sp.csr_matrix, sp.csr_matrix, dict]:
    """[TF-IDF ⊕ encoder vectors]: both blocks unit rows, equal weight, the whole row unit."""
    from sklearn.preprocessing import normalize

    blocks = []
    for sparse, name in ((x_train, "trn_dense.npy"), (x_test, "tst_dense.npy")):
        dense = np.load(folder / name).astype(np.float32)
        if dense.shape[0] != sparse.shape[0]:
            raise SystemExit(f"{folder / name}: {dense.shape[0]} rows for {sparse.shape[0]} documents")
        blocks.append(normalize(sp.hstack([sparse, sp.csr_matrix(normalize(dense))]).tocsr()).astype(np.float32))
    return blocks[0].tocsr(), blocks[1].tocsr(), {**info, "dense_dim": int(np.load(folder / "trn_dense.npy").shape[1])}


def train_and_predict(x_train: sp.csr_matrix, y_train: sp.csr_matrix, x_test: sp.csr_matrix, topk: int,
                      seed: int) -> sp.csr_matrix:
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    label_features = LabelEmbeddingFactory.create(y_train, x_train, method="pifa")
    clusters = Indexer.gen(label_features, seed=seed)
    model = XLinearModel.train(x_train, y_train, C=clusters)
    return sp.csr_matrix(model.predict(x_test, only_topk=topk))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--topk", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--features", choices=("tfidf", "hybrid"), default="tfidf")
    args = parser.parse_args()
    started = time.perf_counter()
    meta = json.loads((args.folder / "meta.json").read_text())
    train, test = read_lines(args.folder / "trn_X.txt"), read_lines(args.folder / "tst_X.txt")
    y_train = sp.load_npz(args.folder / "trn_X_Y.npz").tocsr().astype(np.float32)
    if y_train.shape != (len(train), meta["n_labels"]):
        raise SystemExit(f"{args.folder}: trn_X_Y.npz is {y_train.shape}, expected ({len(train)}, {meta['n_labels']})")
    x_train, x_test, info = featurize(train, test, args.seed)
    if args.features == "hybrid":
        x_train, x_test, info = with_dense(x_train, x_test, args.folder, info)
    featurized = time.perf_counter()
    scores = train_and_predict(x_train, y_train, x_test, args.topk, args.seed)
    sp.save_npz(args.folder / "tst_scores.npz", scores)
    (args.folder / "peer.json").write_text(json.dumps({
        "peer": "PECOS XR-Linear (libpecos 1.2.8), TF-IDF word 1-2 + char_wb 2-4"
                + (" ⊕ the untrained encoder's vectors" if args.features == "hybrid" else "") + ", PIFA clustering",
        "feature_set": args.features,
        "topk": args.topk, "seed": args.seed, **info, "featurize_seconds": round(featurized - started, 2),
        "seconds": round(time.perf_counter() - started, 2)}, indent=2) + "\n")


if __name__ == "__main__":
    main()
