"""Whether two searches rank the labels alike, up to ties: what "the served model answers as the evaluated one"
means (the ONNX check at registration in ``tracking/served.py``, and every served-vs-scorer test).

Why not equal ids: two float paths to one ranking (torch vs ONNX Runtime for the query tower, another CPU's SIMD
kernels) differ in the last bits, and the order of labels whose scores differ by no more than that is noise, not
the model. On the tiny synthetic data set such ties are frequent and exact: 38 label texts occur more than once,
their copies have one vector and so one score for every query (58 of 193 test queries have a tie at rank 1), and
which copy faiss's HNSW returns first is its visiting order's choice — two copies of one
label text can swap places between the served model and the scorer on another machine.

Why not a float tolerance alone: a real divergence must still show. OAK's query fed another query's graph
neighbours moves its label scores by about 1e-3, with no neighbours by about 1e-2; ONNX vs torch moved them by
2e-7 (tiny BERT, 2-core EPYC). :data:`TIE` sits between the two.
"""

from __future__ import annotations

import numpy as np

#: scores (cosines) closer than this are a tie: the labels' order between them may differ from path to path
TIE = 1e-4


def _near(a: np.ndarray, b: np.ndarray, tie: float) -> np.ndarray:
    """|a − b| ≤ tie, with −inf (a missing result) near only −inf."""
    with np.errstate(invalid="ignore"):
        return (a == b) | (np.abs(a - b) <= tie)


def rankings_agree(reference: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray],
                   tie: float = TIE) -> np.ndarray:
    """Per query, whether ``other`` ranks as ``reference`` (each ``(scores, ids)`` of shape (n, k), best first): at
    every rank the score agrees within ``tie``, no label comes twice, and the label is the reference's at that rank
    or one the reference scores within ``tie`` of it. Ties with the reference's last label may go on past its list,
    so there a label it did not return passes too."""
    ref_scores, ref_ids = (np.asarray(a) for a in reference)
    scores, ids = (np.asarray(a) for a in other)
    if ref_ids.shape != ids.shape or ref_scores.shape != scores.shape or ids.ndim != 2:
        raise ValueError(f"rankings of different shapes: {ref_ids.shape} and {ids.shape}")
    tied = _near(ref_scores[:, :, None], ref_scores[:, None, :], tie)  # (n, k, k): reference ranks r and j tie
    same = ids[:, :, None] == ref_ids[:, None, :]  # other's label at rank r is the reference's at rank j
    open_end = _near(ref_scores, ref_scores[:, -1:], tie) & ~same.any(axis=2)
    label_ok = (tied & same).any(axis=2) | open_end
    ordered = np.sort(ids, axis=1)
    repeated = ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(axis=1)
    return (_near(scores, ref_scores, tie) & label_ok).all(axis=1) & ~repeated
