"""TextGNN's relevance head (§4.1.4, Table 4, Fig. 4) where the data set has ground truth (the simulator's world).

The crossing layer (``model.CrossingLayer``) is fitted on frozen tower outputs of train queries paired with their
clicked ads and random ads, labelled by the world's relevance grade (grade ≥ ``relevant_grade`` → 1, TextGNN
§5.1's mapping of excellent…fair vs bad), and evaluated by ROC-AUC on test queries paired with their retrieved
top-10, their clicked ads and random ads — overall and by the ad's training frequency (TextGNN Fig. 4's bins: rare
ads are where the graph should help). The comparator is the same crossing layer on the *centre* embeddings of the
same trained encoder (the graph switched off: TwinBERT's place in Table 4).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from scipy.stats import rankdata

from xc_core import seeds
from xc_core.datasets.container import XCDataset
from xc_core.methods.textgnn.model import CrossingLayer

RELEVANCE_STREAM = 61  # seeds stream of the relevance head's pairs and initialisation
BINS = ((0, 0, "0 (novel)"), (1, 1, "1"), (2, 2, "2"), (3, 9, "3-9"), (10, None, "10+"))
MAX_QUERIES = 2000


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mann–Whitney ROC-AUC (ties count half); NaN when one class is absent."""
    labels = np.asarray(labels, bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _rows(world: Any, texts: list[str]) -> np.ndarray:
    out = np.full(len(texts), -1, np.int64)
    for i, t in enumerate(texts):
        try:
            out[i] = world.query_index(t)
        except KeyError:
            pass
    return out


def pairs(y: sp.csr_matrix, extra: np.ndarray | None, n_labels: int, negatives: int,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(query row, label) pairs: each row's positives, its ``extra`` labels (-1 pads) and random labels."""
    rows, cols = [], []
    for i in range(y.shape[0]):
        mine = set(y.indices[y.indptr[i]:y.indptr[i + 1]].tolist())
        if extra is not None:
            mine |= {int(j) for j in extra[i] if j >= 0}
        mine |= set(rng.choice(n_labels, size=min(negatives, n_labels), replace=False).tolist())
        rows += [i] * len(mine)
        cols += sorted(mine)
    return np.asarray(rows, np.int64), np.asarray(cols, np.int64)


def fit_head(q: np.ndarray, k: np.ndarray, labels: np.ndarray, epochs: int, seed: int) -> CrossingLayer:
    torch.manual_seed(seed)
    head = CrossingLayer(q.shape[1])
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-3)
    qt, kt, yt = torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(labels.astype(np.float32))
    positive = float(labels.mean()) if len(labels) else 0.5
    weight = torch.tensor((1 - positive) / max(positive, 1e-6))  # balanced classes
    rng = seeds.rng(seed, RELEVANCE_STREAM, 1)
    for _ in range(epochs):
        for lo in range(0, len(labels), 256):
            pick = torch.from_numpy(rng.permutation(len(labels))[lo:lo + 256])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(head(qt[pick], kt[pick]), yt[pick],
                                                                        pos_weight=weight)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return head.eval()


def _scores(head: CrossingLayer, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return head(torch.from_numpy(q), torch.from_numpy(k)).numpy()


def relevance_table(dataset: XCDataset, world: Any, model: Any, top_ids: np.ndarray, seed: int) -> dict[str, Any]:
    """ROC-AUC of the crossing layer on TextGNN's tower outputs vs on the encoder alone (overall and by ad
    training-frequency bin), with the pair counts."""
    cfg = model.cfg
    rng = seeds.rng(seed, RELEVANCE_STREAM)
    kw_rows = np.full(dataset.n_labels, -1, np.int64)
    for j, label_id in enumerate(dataset.label_ids):
        try:
            kw_rows[j] = world.keyword_index(label_id)
        except KeyError:
            pass
    train = np.sort(rng.permutation(len(dataset.train_texts))[:MAX_QUERIES])
    train_texts, test_texts = [dataset.train_texts[i] for i in train], list(dataset.test_texts)
    y_train = sp.csr_matrix(dataset.y_train)[train]
    sides = {"train": (train_texts, y_train, None),
             "test": (test_texts, sp.csr_matrix(dataset.y_test), top_ids[:, :10])}
    label_tower = model.label_vectors(dataset)
    label_centre = model.encoder.encode(list(dataset.label_texts))
    data = {}
    for name, (texts, y, extra) in sides.items():
        r, c = pairs(y, extra, dataset.n_labels, cfg.relevance_negatives, rng)
        q_rows = _rows(world, texts)
        keep = (q_rows[r] >= 0) & (kw_rows[c] >= 0)
        r, c = r[keep], c[keep]
        grade = world.grades(q_rows[r], kw_rows[c]) if len(r) else np.zeros(0, np.int8)
        tower, _ = model.query_vectors(texts, dataset if name == "test" else None)
        centre = model.encoder.encode(texts)
        data[name] = (r, c, grade >= cfg.relevant_grade, tower, centre)
    frequency = np.asarray(sp.csr_matrix(dataset.y_train).sum(axis=0)).ravel()
    out: dict[str, Any] = {"relevant_grade": cfg.relevant_grade}
    r_tr, c_tr, l_tr, tower_tr, centre_tr = data["train"]
    r_te, c_te, l_te, tower_te, centre_te = data["test"]
    out["pairs"] = {"train": int(len(r_tr)), "test": int(len(r_te)), "test_positive_share": round(float(l_te.mean()), 4)
                    if len(l_te) else None}
    variants = {"textgnn": (tower_tr, label_tower, tower_te), "encoder only": (centre_tr, label_centre, centre_te)}
    for variant, (q_tr, k_all, q_te) in variants.items():
        head = fit_head(q_tr[r_tr], k_all[c_tr], l_tr, cfg.relevance_epochs, seed)
        scores = _scores(head, q_te[r_te], k_all[c_te])
        row = {"auc": roc_auc(l_te, scores)}
        for lo, hi, label in BINS:
            inside = (frequency[c_te] >= lo) & ((frequency[c_te] <= hi) if hi is not None else True)
            row[f"auc ads {label}"] = roc_auc(l_te[inside], scores[inside])
            row[f"pairs ads {label}"] = int(inside.sum())
        out[variant] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
    return out
