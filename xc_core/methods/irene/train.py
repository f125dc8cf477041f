"""IRENE stage II: the encoder frozen, the seen labels' classifiers W and the combiner C_φ trained jointly (IRENE
eq. 3) on cached embeddings — two triplet losses per (query, positive label) pair with the hardest in-batch
negative: [x·w_n − x·w_p + γ1]_+ for the classifiers and [x·C(n) − x·C(p) + γ2]_+ for the combined
representations, where C(l) = C_φ(E(z_l), {w_j : j ∈ S^l}).

Rows of W and of the association table index the *seen* labels only (``seen_rows`` maps them to the data set).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from xc_core.methods.irene.config import IreneConfig
from xc_core.methods.irene.model import Combiner


@dataclass
class StageTwo:
    weights: np.ndarray  # (n_seen, D) unit rows: the seen labels' classifiers
    combiner: Combiner
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0


def associated_inputs(weights: torch.Tensor, text: torch.Tensor, assoc: torch.Tensor,
                      cfg: IreneConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S, D) what the associated seen labels contribute (classifiers, or their text embeddings) and (B, S)
    which slots are filled."""
    present = assoc >= 0
    source = weights if cfg.inputs == "classifiers" else text
    return source[assoc.clamp(min=0)] * present.unsqueeze(-1), present


def represent(combiner: Combiner, text: np.ndarray, weights: np.ndarray, seen_text: np.ndarray, assoc: np.ndarray,
              cfg: IreneConfig, batch: int = 4096) -> np.ndarray:
    """Unit representations C_φ(E(z_l), S^l) of labels (``text``: their E(z); ``assoc``: seen rows, −1 pads)."""
    w, st = torch.from_numpy(np.ascontiguousarray(weights)), torch.from_numpy(np.ascontiguousarray(seen_text))
    out = np.empty_like(text, dtype=np.float32)
    combiner.eval()
    with torch.inference_mode():
        for lo in range(0, len(text), batch):
            a = torch.from_numpy(assoc[lo:lo + batch])
            inputs, present = associated_inputs(w, st, a, cfg)
            out[lo:lo + batch] = combiner(torch.from_numpy(text[lo:lo + batch]), inputs, present).numpy()
    return out


def _hardest_triplet(scores: torch.Tensor, positive: torch.Tensor, margin: float) -> torch.Tensor:
    """Mean over rows of [max_negative − positive + margin]_+ (``positive``: (B, B) mask of a row's positives)."""
    diagonal = scores.diagonal()
    negatives = scores.masked_fill(positive, float("-inf")).max(dim=1).values
    valid = torch.isfinite(negatives)
    return torch.relu(negatives[valid] - diagonal[valid] + margin).mean() if valid.any() else scores.sum() * 0


def _softmax(scores: torch.Tensor, positive: torch.Tensor, scale: float) -> torch.Tensor:
    """In-batch softmax: each row's own label against the batch's other labels that are not its positives."""
    logits = (scale * scores).masked_fill(positive & ~torch.eye(len(scores), dtype=torch.bool), float("-inf"))
    return nn.functional.cross_entropy(logits, torch.arange(len(scores)))


def train_stage_two(doc_vecs: np.ndarray, label_vecs: np.ndarray, y_train: sp.csr_matrix, seen_rows: np.ndarray,
                    assoc: np.ndarray, cfg: IreneConfig, loss: str = "triplet", progress: bool = False) -> StageTwo:
    """Train W (initialised from the seen labels' text embeddings) and C_φ over every (document, seen label)
    training pair, ``cfg.epochs`` passes in seeded random order; ``loss``: the combiner's ("triplet" or
    "softmax", one of ``cfg.combiner_loss``)."""
    from xc_core.progress import bar

    started = time.perf_counter()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 9]))
    column = np.full(y_train.shape[1], -1, dtype=np.int64)
    column[seen_rows] = np.arange(len(seen_rows))
    y = y_train.tocsr()
    docs = np.repeat(np.arange(y.shape[0]), np.diff(y.indptr))
    labels = column[y.indices]
    keep = labels >= 0
    docs, labels = docs[keep], labels[keep]
    y_seen = sp.csr_matrix((np.ones(len(docs), dtype=bool), (docs, labels)), shape=(y.shape[0], len(seen_rows)))

    text = torch.from_numpy(np.ascontiguousarray(label_vecs[seen_rows], dtype=np.float32))
    queries = torch.from_numpy(np.ascontiguousarray(doc_vecs, dtype=np.float32))
    table = torch.from_numpy(assoc)
    # W as a sparse embedding: a step reads and updates only the batch's labels and their associations (dense
    # Adam over every seen label's row cost ~0.9 s a step on aol-1000's 81k labels, 2 CPU cores)
    weights = nn.Embedding.from_pretrained(text.clone(), freeze=False, sparse=True)
    combiner = Combiner(text.shape[1], cfg.pooling, cfg.heads, max(cfg.associations, 1))
    optimizers = [torch.optim.SparseAdam(list(weights.parameters()), lr=cfg.lr_classifiers),
                  torch.optim.Adam(combiner.parameters(), lr=cfg.lr_combiner)]
    history = []
    for epoch in range(cfg.epochs):
        order = rng.permutation(len(docs))
        totals = np.zeros(2)
        batches = bar(range(0, len(order), cfg.batch_size), unit="batch", enabled=progress,
                       desc=f"IRENE stage II ({loss}), epoch {epoch + 1}/{cfg.epochs}")
        for lo in batches:
            pick = order[lo:lo + cfg.batch_size]
            d, l_ = docs[pick], labels[pick]
            x = queries[d]
            positive = torch.from_numpy(y_seen[d][:, l_].toarray())
            lab = torch.from_numpy(l_)
            related = table[lab]
            # the rows this step touches: the batch's labels and the seen labels they borrow from
            rows, local = torch.unique(torch.cat([lab, related.clamp(min=0).flatten()]), return_inverse=True)
            w = nn.functional.normalize(weights(rows), dim=-1)
            w_batch = w[local[:len(lab)]]
            loss_w = _hardest_triplet(x @ w_batch.T, positive, cfg.margin_classifier)
            slots = torch.where(related >= 0, local[len(lab):].view_as(related), -1)
            inputs, present = associated_inputs(w, text[rows], slots, cfg)
            reps = combiner(text[lab], inputs, present)
            loss_c = (_softmax(x @ reps.T, positive, cfg.softmax_scale) if loss == "softmax" else
                      _hardest_triplet(x @ reps.T, positive, cfg.margin_combiner))
            for optimizer in optimizers:
                optimizer.zero_grad()
            (loss_w + loss_c).backward()
            for optimizer in optimizers:
                optimizer.step()
            totals += [loss_w.detach().item() * len(pick), loss_c.detach().item() * len(pick)]
        history.append({"epoch": epoch + 1, "loss/classifiers": totals[0] / max(len(docs), 1),
                        "loss/combiner": totals[1] / max(len(docs), 1)})
    final = nn.functional.normalize(weights.weight.detach(), dim=-1).numpy().astype(np.float32)
    return StageTwo(final, combiner, history, round(time.perf_counter() - started, 2))
