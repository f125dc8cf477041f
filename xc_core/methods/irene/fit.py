"""IRENE end to end on one data set: the frozen encoder's embeddings → the settings chosen on validation (τ0, how
seen labels associate, the combiner's loss, or the encoder alone) → stage II on every seen label → a
representation for every label (seen: their associations; novel: refined text shortlist) → the artefacts serving
and streaming need (``IreneModel``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xc_core.datasets.container import XCDataset
from xc_core.methods.irene.associations import novel_associations, seen_associations, text_neighbours
from xc_core.methods.irene.config import IreneConfig
from xc_core.methods.irene.model import Combiner
from xc_core.methods.irene.train import represent, train_stage_two

EMBEDDINGS = "embeddings.npz"  # the frozen encoder's vectors of the data set (train docs, test docs, labels)
MODEL = "irene"  # sub-folder of the model folder: W, combiner, associations, settings


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


def choose(vecs: dict[str, np.ndarray], y_train: sp.csr_matrix, seen_rows: np.ndarray, val_rows: np.ndarray,
           cfg: IreneConfig, progress: bool = False,
           own_label_pairs: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
           inv_propensity: np.ndarray | None = None) -> tuple[Choice, list[dict[str, Any]], dict[str, Any]]:
    """IRENE's settings on validation: hold out a share of the seen labels (pseudo-novel) and the validation
    queries (``val_rows``: training queries stage I never trained on), train stage II on the rest once per (loss,
    way of associating seen labels), represent the held-out labels as novel labels for each τ0 of the grid, and rank
    every seen label for the validation queries as serving does (``own_label_pairs``: ``XCDataset.own_label_pairs``,
    whose pairs are never ranked, as the test filter removes a test query's own label). The criterion is R@10 over
    all their positives (the ranking users get), the held-out labels' positives breaking ties. The choice serves only
    when, cross-fitted over seeded folds of the validation queries (each fold ranked by the setting the other folds
    pick), it beats the encoder alone (every label by its text embedding, the do-nothing fallback) on all of them
    (:func:`~xc_core.evaluation.fallback.cross_fitted`). Returns the choice (picked on every validation query), the
    curve (on all of them) and the fallback test."""
    from xc_core.evaluation.fallback import cross_fitted, row_folds
    from xc_core.evaluation.metrics import recall_per_row
    from xc_core.training.validation import top_k_exact

    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 10]))
    held = np.zeros(len(seen_rows), dtype=bool)
    held[rng.choice(len(seen_rows), max(1, int(cfg.validation_labels * len(seen_rows))), replace=False)] = True
    fit_labels, held_labels = seen_rows[~held], seen_rows[held]
    y = y_train.tocsr()
    fit_docs = np.setdiff1d(np.arange(y.shape[0]), val_rows)
    y_fit = y[fit_docs]
    # validation columns: the fitted labels, then the held-out ones
    columns = np.concatenate([fit_labels, held_labels])
    truth = y[val_rows].tocsc()[:, columns].tocsr()
    held_truth = sp.hstack([sp.csr_matrix((len(val_rows), len(fit_labels))),
                            truth[:, len(fit_labels):]]).tocsr()
    queries, fit_text, held_text = vecs["train"][val_rows], vecs["labels"][fit_labels], vecs["labels"][held_labels]
    exclude = own_label_pairs(val_rows, columns) if own_label_pairs is not None else None
    tops: list[np.ndarray] = []
    recalls: list[tuple[np.ndarray, np.ndarray]] = []  # per query: (R@10, held-out R@10) of each scored setting

    def scored(reps: np.ndarray) -> dict[str, float]:
        top = top_k_exact(queries, reps, 10, exclude=exclude)
        tops.append(top)
        recalls.append((recall_per_row(truth, top, 10), recall_per_row(held_truth, top, 10)))
        return {"R@10": _recall(top, truth), "held-out R@10": _recall(top, held_truth)}

    k = cfg.associations
    curve: list[dict[str, Any]] = []
    encoder = scored(np.vstack([fit_text, held_text]))
    for loss in cfg.combiner_loss:
        for mode in cfg.seen_associations:
            fit_assoc = _seen_assoc(mode, y_fit, vecs["labels"], fit_labels, k)
            stage = train_stage_two(vecs["train"][fit_docs], vecs["labels"], y_fit, fit_labels, fit_assoc, cfg,
                                    loss, progress)
            fit_reps = represent(stage.combiner, fit_text, stage.weights, fit_text, fit_assoc, cfg)
            for tau0 in (None, *cfg.tau0_grid):
                assoc = (np.full((len(held_text), k), -1, dtype=np.int64) if tau0 is None else
                         novel_associations(held_text, fit_text, stage.weights, cfg.shortlist, tau0, k))
                reps = represent(stage.combiner, held_text, stage.weights, fit_text, assoc, cfg)
                curve.append({"serves": "irene", "combiner_loss": loss, "seen_associations": mode, "tau0": tau0,
                              **scored(np.vstack([fit_reps, reps])),
                              "associated": float((assoc >= 0).sum(axis=1).mean())})
    has_positive = np.diff(truth.indptr) > 0

    def select(rows: np.ndarray) -> int:
        """The curve position best on ``rows`` (their queries with a positive): R@10, then held-out R@10."""
        rows = rows[has_positive[rows]]
        return max(range(len(curve)), key=lambda i: (float(recalls[i + 1][0][rows].mean()) if len(rows) else 0.0,
                                                     float(recalls[i + 1][1][rows].mean()) if len(rows) else 0.0))

    def settings(position: int) -> dict[str, Any]:
        return {key: curve[position][key] for key in ("combiner_loss", "seen_associations", "tau0")}

    position = select(np.arange(len(val_rows)))
    trained = curve[position]  # what the combiner would serve
    test, _ = cross_fitted("irene vs its encoder", select, lambda i: tops[i + 1], tops[0], truth,
                           None if inv_propensity is None else inv_propensity[columns], "R@10", cfg.fallback,
                           row_folds(len(val_rows), cfg.fallback.folds, cfg.seed), describe=settings)
    serves = "irene" if test.kept or not cfg.encoder_competes else "encoder"
    curve.insert(0, {"serves": "encoder", **encoder})
    return (Choice(trained["seen_associations"], trained["combiner_loss"], trained["tau0"], serves), curve,
            test.as_dict())


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
              val_rows: np.ndarray | None = None, progress: bool = False) -> tuple[IreneModel, dict[str, Any]]:
    """Stage II on the seen labels and a representation for every label. ``choice`` None: chosen on validation
    (:func:`choose`) over ``val_rows`` (the stage-I encoder's validation queries; None: a seeded share of the
    training queries, which the encoder may have trained on); else used as given (the ablations reuse the chosen
    one). Stage II is trained even when the encoder alone serves: the report shows what the combiner would do."""
    started = time.perf_counter()
    y = dataset.y_train.tocsr()
    seen_rows = np.flatnonzero(~dataset.label_novel)
    curve: list[dict[str, Any]] = []
    fallback_test: dict[str, Any] = {}
    if choice is None:
        if val_rows is None:
            val_rows = np.random.default_rng(np.random.SeedSequence([cfg.seed, 12])).choice(
                y.shape[0], max(10, y.shape[0] // 20), replace=False)
        from xc_core.evaluation.metrics import propensity

        val_rows = np.sort(val_rows)
        choice, curve, fallback_test = choose(vecs, y, seen_rows, val_rows, cfg, progress,
                                              dataset.own_label_pairs, propensity(dataset))
    k = cfg.associations
    # the served stage II is the tested one's: fit on the queries the choice was not tested on (the validation
    # queries stay out of every part of the model, so `xc eval --split validation` stays clean), every seen label
    fit_docs = np.arange(y.shape[0]) if val_rows is None else np.setdiff1d(np.arange(y.shape[0]), val_rows)
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
               "validation_queries": 0 if val_rows is None else int(len(val_rows)), "history": stage.history,
               "seen_labels": int(len(seen_rows)), "novel_labels": int(len(novel_rows)),
               "novel_associated_mean": float((assoc[novel_rows] >= 0).sum(axis=1).mean()) if len(novel_rows) else 0.0,
               "stage_two_seconds": stage.seconds, "seconds": round(time.perf_counter() - started, 2)}
    return model, summary
