"""IRENE end to end on one data set: the frozen encoder's embeddings → the settings chosen on validation (τ0, how
seen labels associate, the combiner's loss, or the encoder alone) → stage II on every seen label → a
representation for every label (seen: their associations; novel: refined text shortlist) → the artefacts serving
and streaming need (``IreneModel``)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xc_core.classifier.folds import Fold
from xc_core.datasets.container import XCDataset
from xc_core.evaluation.metrics import recall_per_row
from xc_core.methods.irene.associations import novel_associations, seen_associations, text_neighbours
from xc_core.methods.irene.config import IreneConfig
from xc_core.methods.irene.model import Combiner
from xc_core.methods.irene.train import represent, train_stage_two

EMBEDDINGS = "embeddings.npz"  # the frozen encoder's vectors of the data set (train docs, test docs, labels)
MODEL = "irene"  # sub-folder of the model folder: W, combiner, associations, settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Choice:
    """What validation chose: how seen labels associate in training, the combiner's loss, τ0 (None: novel labels get
    no associations, the combiner works on E(z) alone) and what serves — the combiner ("irene") or, when it ranked
    worse than doing nothing, the encoder's text embeddings ("encoder")."""

    seen_mode: str = "co-clicked"
    combiner_loss: str = "triplet"
    tau0: float | None = None
    serves: str = "irene"


@dataclass
class IreneModel:
    """Everything IRENE serves with besides the encoder: the seen labels' classifiers and text vectors, the
    combiner, the validation's choice, and every label's representation (the index is built over ``label_reps``)."""

    cfg: IreneConfig
    seen_rows: np.ndarray  # data-set label index of each seen label (rows of weights / seen_text)
    weights: np.ndarray  # (n_seen, D) unit classifiers
    seen_text: np.ndarray  # (n_seen, D) the seen labels' E(z)
    combiner: Combiner
    choice: Choice
    label_reps: np.ndarray  # (n_labels, D) unit representations of every data-set label
    assoc: np.ndarray  # (n_labels, k) seen rows each label borrows from (−1 pads)

    @property
    def parameters(self) -> int:
        """IRENE's own parameters: the seen labels' classifiers and the combiner (the encoder's are not here)."""
        return int(self.weights.size) + sum(int(p.numel()) for p in self.combiner.parameters())

    @property
    def tau0(self) -> float | None:
        return self.choice.tau0

    @property
    def associates(self) -> bool:
        """Whether novel labels borrow from seen ones (τ0 chosen and the combiner serving)."""
        return self.choice.serves == "irene" and self.choice.tau0 is not None and self.cfg.associations > 0

    def represent_novel(self, text_vecs: np.ndarray, query_vecs: np.ndarray | None = None) -> np.ndarray:
        """Representations of novel labels from their text embeddings (zero-shot) or with a revealed query each."""
        return self.combine(text_vecs, self.associate(text_vecs, query_vecs))

    def combine(self, text_vecs: np.ndarray, assoc: np.ndarray) -> np.ndarray:
        """C_φ(E(z), S) — or E(z) itself where validation chose the encoder alone."""
        if self.choice.serves == "encoder":
            return _unit(text_vecs)
        return represent(self.combiner, text_vecs, self.weights, self.seen_text, assoc, self.cfg)

    def associate(self, text_vecs: np.ndarray, query_vecs: np.ndarray | None = None) -> np.ndarray:
        """Novel labels' associated seen rows (none unless :attr:`associates`)."""
        if not self.associates:
            return np.full((len(text_vecs), self.cfg.associations), -1, dtype=np.int64)
        assert self.tau0 is not None
        return novel_associations(text_vecs, self.seen_text, self.weights, self.cfg.shortlist, self.tau0,
                                  self.cfg.associations, query_vecs, self.cfg.tau1)

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        np.savez(folder / "arrays.npz", seen_rows=self.seen_rows, weights=self.weights, seen_text=self.seen_text,
                 label_reps=self.label_reps, assoc=self.assoc)
        torch.save(self.combiner.state_dict(), folder / "combiner.pt")
        (folder / "irene.json").write_text(json.dumps({"config": self.cfg.model_dump(), "choice": asdict(self.choice),
                                                       "dim": int(self.weights.shape[1])}, indent=2))
        return folder

    @classmethod
    def load(cls, folder: Path) -> IreneModel:
        meta = json.loads((folder / "irene.json").read_text())
        cfg = IreneConfig(**meta["config"])
        combiner = Combiner(meta["dim"], cfg.pooling, cfg.heads, max(cfg.associations, 1))
        combiner.load_state_dict(torch.load(folder / "combiner.pt", weights_only=True))
        combiner.eval()
        # models saved before the loss was chosen on validation kept τ0 and the seen rule at the top level
        choice = (Choice(**meta["choice"]) if "choice" in meta else
                  Choice(meta.get("seen_mode", "co-clicked"), "triplet", meta.get("tau0")))
        with np.load(folder / "arrays.npz") as a:
            return cls(cfg, a["seen_rows"], a["weights"], a["seen_text"], combiner, choice, a["label_reps"],
                       a["assoc"])


def _unit(vecs: np.ndarray) -> np.ndarray:
    return (vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def embed(dataset: XCDataset, encoder: Any, out: Path, progress: bool = False) -> dict[str, np.ndarray]:
    """The frozen encoder's vectors of the data set, cached in the model folder."""
    path = out / EMBEDDINGS
    if path.exists():
        with np.load(path) as cached:
            if cached["labels"].shape[0] == dataset.n_labels and cached["test"].shape[0] == len(dataset.test_texts):
                return {k: cached[k] for k in ("train", "test", "labels")}
    vecs = {"train": encoder.encode(dataset.train_texts, progress=progress, desc="train queries"),
            "test": encoder.encode(dataset.test_texts, progress=progress, desc="test queries"),
            "labels": encoder.encode(dataset.label_texts, progress=progress, desc="labels")}
    np.savez(path, **vecs)
    return vecs


def choose(vecs: dict[str, np.ndarray], folds: list[Fold], seen_rows: np.ndarray, cfg: IreneConfig,
           progress: bool = False,
           own_label_pairs: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
           inv_propensity: np.ndarray | None = None,
           novel_rows: np.ndarray | None = None) -> tuple[Choice, list[dict[str, Any]], dict[str, Any]]:
    """IRENE's settings out of fold: a share of the seen labels is held out as pseudo-novel; for each
    fold (``classifier/folds.py``: blocks of days for event logs, document folds elsewhere) stage II is refit on the
    fold's fit rows once per (loss, way of associating seen labels), without the held-out labels, and every candidate
    — each τ0 of the grid, and no association — ranks every seen label for the fold's scored rows as serving does
    (``own_label_pairs``: ``XCDataset.own_label_pairs``, never ranked, as the test filter removes a test query's own
    label). A seen label the fold's fit rows never clicked is novel to that refit, represented as novel labels are;
    the data set's novel labels (``novel_rows``) are ranked too, represented as serving represents them, so the
    scored rows meet every label the test ranks (without them the choice missed what novel labels take from the
    top ranks).
    The criterion is R@10 over all the scored rows' positives (the ranking users get), the held-out labels' positives
    breaking ties. The choice serves only when, cross-fitted over the folds (each fold ranked by the setting the
    other folds pick: a test of the whole selection procedure, one for the family of candidates), it beats the
    encoder alone (every label by its text embedding, the do-nothing fallback) on every scored row
    (:func:`~xc_core.evaluation.fallback.cross_fitted`); a single fold is cut into the policy's seeded row folds.
    Returns the choice (picked on every scored row), the curve (on all of them) and the fallback test."""
    from xc_core.evaluation.fallback import cross_fitted, row_folds

    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 10]))
    held = np.zeros(len(seen_rows), dtype=bool)
    held[rng.choice(len(seen_rows), max(1, int(cfg.validation_labels * len(seen_rows))), replace=False)] = True
    # validation columns: every label in id order (ties rank the lower id first, as in the test); a refit may train
    # the fitted ones, never the held-out ones or the data set's novel labels; the held-out labels' positives break
    # ties between candidates
    novel = np.empty(0, np.int64) if novel_rows is None else np.asarray(novel_rows, np.int64)
    columns = np.sort(np.concatenate([seen_rows, novel]))
    fittable = np.isin(columns, seen_rows[~held])
    candidates = [(loss, mode, tau0) for loss in cfg.combiner_loss for mode in cfg.seen_associations
                  for tau0 in (None, *cfg.tau0_grid)]
    parts = [_fold_tops(vecs, fold, columns, fittable, cfg, progress, own_label_pairs) for fold in folds]
    truth = sp.csr_matrix(sp.vstack([p.truth for p in parts]))
    held_truth = sp.csr_matrix(truth.multiply(np.isin(columns, seen_rows[held])[None, :].astype(np.float32)))
    tops = [np.vstack([p.tops[i] for p in parts]) for i in range(len(candidates) + 1)]  # 0: the encoder alone
    recalls = [(recall_per_row(truth, top, 10), recall_per_row(held_truth, top, 10)) for top in tops]
    has_positive = np.diff(truth.indptr) > 0

    def scored(i: int) -> dict[str, float]:
        rows = has_positive
        return {"R@10": float(recalls[i][0][rows].mean()) if rows.any() else float("nan"),
                "held-out R@10": _recall(tops[i], held_truth)}

    def select(rows: np.ndarray) -> int:
        """The candidate best on ``rows`` (their queries with a positive): R@10, then held-out R@10."""
        rows = rows[has_positive[rows]]
        return max(range(len(candidates)), key=lambda i: (float(recalls[i + 1][0][rows].mean()) if len(rows) else 0.0,
                                                          float(recalls[i + 1][1][rows].mean()) if len(rows) else 0.0))

    def settings(position: int) -> dict[str, Any]:
        return dict(zip(("combiner_loss", "seen_associations", "tau0"), candidates[position], strict=True))

    sizes = np.cumsum([0, *(p.truth.shape[0] for p in parts)])
    blocks = [np.arange(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    if len(blocks) < 2:
        blocks = row_folds(truth.shape[0], cfg.fallback.folds, cfg.seed)
    test, _ = cross_fitted("irene vs its encoder", select, lambda i: tops[i + 1], tops[0], truth,
                           None if inv_propensity is None else inv_propensity[columns], "R@10", cfg.fallback,
                           blocks, describe=settings)
    curve = [{"serves": "encoder", **scored(0)}]
    curve += [{"serves": "irene", **settings(i), **scored(i + 1),
               "associated": float(np.mean([p.associated[i] for p in parts]))} for i in range(len(candidates))]
    loss, mode, tau0 = candidates[select(np.arange(truth.shape[0]))]  # what the combiner would serve
    serves = "irene" if test.kept or not cfg.encoder_competes else "encoder"
    record = {**test.as_dict(), "folds_refit": [{"name": f.name, "fit_documents": int(len(f.fit_rows)),
                                                 "scored_rows": int(len(f.score_rows))} for f in folds]}
    return Choice(mode, loss, tau0, serves), curve, record


@dataclass
class _FoldTops:
    """One refit's scored rows: their truth over the validation columns, each candidate's top 10 (0: the encoder
    alone) and how many seen labels each candidate associated per novel label."""

    truth: sp.csr_matrix
    tops: list[np.ndarray]
    associated: list[float]


def _fold_tops(vecs: dict[str, np.ndarray], fold: Fold, columns: np.ndarray, fittable: np.ndarray,
               cfg: IreneConfig, progress: bool,
               own_label_pairs: Callable[[np.ndarray, np.ndarray], np.ndarray] | None) -> _FoldTops:
    """Stage II refit on ``fold``'s fit rows per (loss, seen association) and every candidate's ranking (in
    :func:`choose`'s order: loss, association rule, then τ0) of the fold's scored rows over ``columns``
    (``fittable`` ones may be trained on; the rest are novel to the refit)."""
    from xc_core.training.validation import top_k_exact

    y_fit = sp.csr_matrix(fold.y_fit[fold.fit_rows])
    clicked = np.diff(y_fit.tocsc().indptr) > 0
    trainable = fittable & clicked[columns]
    seen_pos, novel_pos = np.flatnonzero(trainable), np.flatnonzero(~trainable)
    seen_labels = columns[seen_pos]
    label_vecs, queries = vecs["labels"], vecs["train"][fold.score_rows]
    seen_text, novel_text = label_vecs[seen_labels], label_vecs[columns[novel_pos]]
    exclude = own_label_pairs(fold.score_rows, columns) if own_label_pairs is not None else None
    tops = [top_k_exact(queries, label_vecs[columns], 10, exclude=exclude)]
    associated: list[float] = []
    k = cfg.associations
    for loss, mode in ((loss, mode) for loss in cfg.combiner_loss for mode in cfg.seen_associations):
        fit_assoc = _seen_assoc(mode, y_fit, label_vecs, seen_labels, k)
        stage = train_stage_two(vecs["train"][fold.fit_rows], label_vecs, y_fit, seen_labels, fit_assoc, cfg, loss,
                                progress)
        seen_reps = represent(stage.combiner, seen_text, stage.weights, seen_text, fit_assoc, cfg)
        for tau0 in (None, *cfg.tau0_grid):  # in the order of choose's candidates
            assoc = (np.full((len(novel_text), k), -1, dtype=np.int64) if tau0 is None else
                     novel_associations(novel_text, seen_text, stage.weights, cfg.shortlist, tau0, k))
            reps = np.empty((len(columns), seen_reps.shape[1]), dtype=np.float32)
            reps[seen_pos] = seen_reps
            reps[novel_pos] = represent(stage.combiner, novel_text, stage.weights, seen_text, assoc, cfg)
            tops.append(top_k_exact(queries, reps, 10, exclude=exclude))
            associated.append(float((assoc >= 0).sum(axis=1).mean()) if len(assoc) else 0.0)
    log.info("IRENE: %s — stage II refit on %d documents, %d rows scored out of fold", fold.name,
             len(fold.fit_rows), len(fold.score_rows))
    return _FoldTops(sp.csr_matrix(fold.truth[:, columns]), tops, associated)


def irene_folds(dataset: XCDataset, cfg: IreneConfig, val_rows: np.ndarray,
                encoder_rows: np.ndarray | None) -> list[Fold]:
    """The out-of-fold refits :func:`choose` scores: the classifier stage's folds (``classifier/folds.py``, IRENE's
    own counts), never scoring a query stage I trained on. Where that leaves no row to score (stage I trained on
    every training query but its validation ones), one refit without stage I's validation queries scores them."""
    from xc_core.classifier.folds import out_of_fold

    folds = out_of_fold(dataset, cfg.folds, cfg.oof_max_rows, cfg.seed, cfg.fold_kind, cfg.temporal_span,
                        encoder_rows, cfg.time_blocks)
    # distinct rows: a temporal block scores a query again in each block it clicks in, which is no more evidence
    scored = np.unique(np.concatenate([f.score_rows for f in folds])) if folds else np.empty(0, np.int64)
    if len(scored) >= len(val_rows):
        return folds
    y = sp.csr_matrix(dataset.y_train)
    return [Fold("stage I's validation queries", np.setdiff1d(np.arange(y.shape[0]), val_rows), y, val_rows,
                 y[val_rows])]


def _recall(top: np.ndarray, truth: sp.csr_matrix) -> float:
    """Mean R@k (k = the ranking's width) over the rows with a positive."""
    from xc_core.evaluation.metrics import recall_per_row

    rows = np.diff(truth.indptr) > 0
    return float(recall_per_row(truth[rows], top[rows], top.shape[1]).mean()) if rows.any() else float("nan")


def _seen_assoc(mode: str, y: sp.csr_matrix, label_vecs: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    if mode == "text":
        return text_neighbours(label_vecs[rows], k)
    return seen_associations(y, label_vecs, rows, k)


def fit_irene(dataset: XCDataset, vecs: dict[str, np.ndarray], cfg: IreneConfig, choice: Choice | None = None,
              val_rows: np.ndarray | None = None, encoder_rows: np.ndarray | None = None,
              progress: bool = False) -> tuple[IreneModel, dict[str, Any]]:
    """Stage II on the seen labels and a representation for every label. ``choice`` None: chosen out of fold
    (:func:`choose` over :func:`irene_folds`; ``encoder_rows``: the training queries stage I was fine-tuned on, never
    scored); else used as given (the ablations reuse the chosen one). ``val_rows``: stage I's validation queries,
    kept out of the served stage II so that ``xc eval --split validation`` stays clean (None: a seeded share of the
    training queries when choosing, none with a ``choice`` given). Stage II is trained even when the encoder alone
    serves: the report shows what the combiner would do."""
    started = time.perf_counter()
    y = dataset.y_train.tocsr()
    seen_rows = np.flatnonzero(~dataset.label_novel)
    curve: list[dict[str, Any]] = []
    fallback_test: dict[str, Any] = {}
    if val_rows is None and choice is None:
        val_rows = np.random.default_rng(np.random.SeedSequence([cfg.seed, 12])).choice(
            y.shape[0], max(10, y.shape[0] // 20), replace=False)
    val_rows = np.sort(val_rows) if val_rows is not None else np.empty(0, np.int64)
    if choice is None:
        from xc_core.evaluation.metrics import propensity

        choice, curve, fallback_test = choose(vecs, irene_folds(dataset, cfg, val_rows, encoder_rows), seen_rows,
                                              cfg, progress, dataset.own_label_pairs, propensity(dataset),
                                              np.flatnonzero(dataset.label_novel))
    chosen = time.perf_counter()
    k = cfg.associations
    # the served stage II: the settings chosen out of fold, fit on every training query but stage I's validation
    # ones (they stay out of every part of the model, so `xc eval --split validation` stays clean), every seen label
    fit_docs = np.setdiff1d(np.arange(y.shape[0]), val_rows)
    y_fit = sp.csr_matrix(y[fit_docs])
    assoc = np.full((dataset.n_labels, k), -1, dtype=np.int64)
    assoc[seen_rows] = _seen_assoc(choice.seen_mode, y_fit, vecs["labels"], seen_rows, k)
    stage = train_stage_two(vecs["train"][fit_docs], vecs["labels"], y_fit, seen_rows, assoc[seen_rows], cfg,
                            choice.combiner_loss, progress)
    seen_text = vecs["labels"][seen_rows]
    model = IreneModel(cfg, seen_rows, stage.weights, seen_text, stage.combiner, choice,
                       np.empty_like(vecs["labels"]), assoc)
    model.label_reps[seen_rows] = model.combine(seen_text, assoc[seen_rows])
    novel_rows = np.flatnonzero(dataset.label_novel)
    if len(novel_rows):
        text = vecs["labels"][novel_rows]
        assoc[novel_rows] = model.associate(text)
        model.label_reps[novel_rows] = model.combine(text, assoc[novel_rows])
    summary = {**{f"chosen_{key}": v for key, v in asdict(choice).items()}, "validation_curve": curve,
               "fallback_test": fallback_test,
               "validation_queries": int(len(val_rows)), "history": stage.history,
               "seen_labels": int(len(seen_rows)), "novel_labels": int(len(novel_rows)),
               "novel_associated_mean": float((assoc[novel_rows] >= 0).sum(axis=1).mean()) if len(novel_rows) else 0.0,
               "stage_two_seconds": stage.seconds,
               "stage_seconds": {"out_of_fold": round(chosen - started, 2),
                                 "final_fit": round(time.perf_counter() - chosen, 2)},
               "seconds": round(time.perf_counter() - started, 2)}
    return model, summary
