"""How the trainer ranks its validation rows: the validation label space, an
encoder's exact top-k over it (ties ranked as the test ranks them), the selection metrics, the brand / place
mismatch of the ranking, and the epoch choice those rows decide (``selection.EpochChoice``)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.encoders.text import TextEncoder
from xc_core.training.config import TrainConfig
from xc_core.training.validation import recall_at_k, top_k_exact, validation_label_space

if TYPE_CHECKING:
    from xc_core.training.attributes import AttributeIndex
    from xc_core.training.selection import EpochChoice

#: cut-offs of the validation brand / place mismatch (the A/B shows 5 of an arm's top-100)
VAL_MISMATCH_KS = (5, 100)


class ValidationRanker:
    """The validation rows ``val_idx`` of ``data`` (the training view), scored against ``val_truth``."""

    def __init__(self, data: XCDataset, val_idx: np.ndarray, val_truth: Any, cfg: TrainConfig,
                 attributes: AttributeIndex | None) -> None:
        self.data, self.val_idx, self.val_truth, self.cfg, self.attributes = data, val_idx, val_truth, cfg, attributes

    @cached_property
    def label_space(self) -> np.ndarray:
        return validation_label_space(len(self.data.label_texts), self.val_truth, self.val_idx, self.cfg)

    @cached_property
    def truth(self) -> sp.csr_matrix:
        """The validation rows' positives over :attr:`label_space` (one row each)."""
        return sp.csr_matrix(sp.csr_matrix(self.val_truth)[self.val_idx][:, self.label_space])

    def vectors(self, encoder: TextEncoder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(validation documents' vectors, the label space's vectors, own-label pairs never ranked)."""
        space = self.label_space
        docs = encoder.encode([self.data.train_texts[i] for i in self.val_idx], progress=False)
        labels = encoder.encode([self.data.label_texts[i] for i in space], progress=False)
        return docs, labels, self.data.own_label_pairs(self.val_idx, space)

    def top(self, encoder: TextEncoder, k: int) -> np.ndarray:
        """``encoder``'s top ``k`` columns of the label space per validation row (−1 pads)."""
        docs, labels, exclude = self.vectors(encoder)
        return top_k_exact(docs, labels, k, exclude=exclude)

    def metrics(self, encoder: TextEncoder) -> tuple[dict[str, float], np.ndarray]:
        """(recall@val_k, P@1, P@5 and the mismatch rates of ``encoder``; its top ``max(val_k, 5)`` columns)."""
        from xc_core.evaluation.metrics import precision_per_row

        docs, labels, exclude = self.vectors(encoder)
        k = self.cfg.val_k
        depth = max(k, 5)
        # one ranking: ties go to the lower id at every depth, so the selection metrics' top is a prefix of the
        # mismatch's deeper one
        ranked = top_k_exact(docs, labels, max(depth, *VAL_MISMATCH_KS) if self.attributes is not None else depth,
                             exclude=exclude)
        top = ranked[:, :depth]
        mismatch = self.mismatch(self.label_space[ranked] if ranked.size else ranked) if self.attributes else {}
        truth = self.truth
        return {f"recall@{k}": recall_at_k(top[:, :k], truth),
                "P@1": float(precision_per_row(truth, top, 1).mean()),
                "P@5": float(precision_per_row(truth, top, 5).mean()) if top.shape[1] >= 5 else float("nan"),
                **mismatch}, top

    def mismatch(self, top: np.ndarray) -> dict[str, float]:
        """Brand / place mismatch@k of the validation documents naming one (evaluation/mismatch.py: ranks models
        as the A/B's bad-match rates do), from item metadata and query text; {} without metadata."""
        if self.attributes is None:
            return {}
        from xc_core.evaluation.mismatch import mismatch_counts

        texts = [self.data.train_texts[i] for i in self.val_idx]
        out = {}
        for attribute in self.attributes.attributes:
            counts = mismatch_counts(texts, top, self.data.label_attributes[attribute], attribute, VAL_MISMATCH_KS)
            for k in VAL_MISMATCH_KS:
                rate = counts.rate(k)
                if rate is not None:
                    out[f"{attribute}_mismatch@{k}"] = rate
        return out

    @cached_property
    def choice(self) -> EpochChoice:
        """Which epoch is served (``select_best``): the best on validation rows if it beats epoch 0 out of sample
        (training/selection.py)."""
        from xc_core.evaluation.metrics import propensity
        from xc_core.training.selection import EpochChoice

        return EpochChoice(self.truth, propensity(self.data)[self.label_space], self.cfg.val_k, self.cfg.fallback,
                           self.cfg.seed, self.cfg.select_within_guards)
