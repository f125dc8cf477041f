"""IRENE end to end on one data set: the frozen encoder's embeddings → τ0 chosen on held-out seen labels →
stage II on every seen label → a representation for every label (seen: co-clicked associations; novel:
refined text shortlist) → the artefacts serving and streaming need (``IreneModel``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
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


@dataclass
class IreneModel:
    """Everything IRENE serves with besides the encoder: the seen labels' classifiers and text vectors, the
    combiner, the chosen τ0, and every label's representation (the index is built over ``label_reps``)."""

    cfg: IreneConfig
    seen_rows: np.ndarray  # data-set label index of each seen label (rows of weights / seen_text)
    weights: np.ndarray  # (n_seen, D) unit classifiers
    seen_text: np.ndarray  # (n_seen, D) the seen labels' E(z)
    combiner: Combiner
    tau0: float | None  # None: novel labels get no associations (the combiner on E(z) alone; validation chose it)
    label_reps: np.ndarray  # (n_labels, D) unit representations of every data-set label
    assoc: np.ndarray  # (n_labels, k) seen rows each label borrows from (−1 pads)
    seen_mode: str = "co-clicked"  # how the seen labels' associations were found in training (validation chose it)

    def represent_novel(self, text_vecs: np.ndarray, query_vecs: np.ndarray | None = None) -> np.ndarray:
        """Representations of novel labels from their text embeddings (zero-shot) or with a revealed query each."""
        return represent(self.combiner, text_vecs, self.weights, self.seen_text, self.associate(text_vecs, query_vecs),
                         self.cfg)

    def associate(self, text_vecs: np.ndarray, query_vecs: np.ndarray | None = None) -> np.ndarray:
        """Novel labels' associated seen rows (none when τ0 is None)."""
        if self.tau0 is None:
            return np.full((len(text_vecs), self.cfg.associations), -1, dtype=np.int64)
        return novel_associations(text_vecs, self.seen_text, self.weights, self.cfg.shortlist, self.tau0,
                                  self.cfg.associations, query_vecs, self.cfg.tau1)

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        np.savez(folder / "arrays.npz", seen_rows=self.seen_rows, weights=self.weights, seen_text=self.seen_text,
                 label_reps=self.label_reps, assoc=self.assoc)
        torch.save(self.combiner.state_dict(), folder / "combiner.pt")
        (folder / "irene.json").write_text(json.dumps({"config": self.cfg.model_dump(), "tau0": self.tau0,
                                                       "seen_mode": self.seen_mode,
                                                       "dim": int(self.weights.shape[1])}, indent=2))
        return folder

    @classmethod
    def load(cls, folder: Path) -> IreneModel:
        meta = json.loads((folder / "irene.json").read_text())
        cfg = IreneConfig(**meta["config"])
        combiner = Combiner(meta["dim"], cfg.pooling, cfg.heads, max(cfg.associations, 1))
        combiner.load_state_dict(torch.load(folder / "combiner.pt", weights_only=True))
        combiner.eval()
        with np.load(folder / "arrays.npz") as a:
            return cls(cfg, a["seen_rows"], a["weights"], a["seen_text"], combiner, meta["tau0"], a["label_reps"],
                       a["assoc"], meta.get("seen_mode", "co-clicked"))


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


def recall_at(queries: np.ndarray, truth: sp.csr_matrix, reps: np.ndarray, k: int = 10) -> float:
    """Mean R@k of ``queries`` against label representations ``reps`` (rows without positives skipped)."""
    from xc_core.methods.irene.settings import ranked

    rows, _, found = ranked(queries, truth, reps, k)
    return float(found[f"R@{k}"]) if len(rows) else float("nan")


def choose_associations(vecs: dict[str, np.ndarray], y_train: sp.csr_matrix, seen_rows: np.ndarray, cfg: IreneConfig,
                        progress: bool = False) -> tuple[str, float | None, list[dict[str, Any]]]:
    """How seen labels associate in training and τ0, on pseudo-novel labels: hold out a share of the seen labels,
    train stage II without them (once per way of associating seen labels), represent them as novel labels for each
    τ0 of the grid, rank them among every seen label (as serving does) and measure R@10 of the held-out labels for
    the training queries that clicked them. No association at all (τ0 = None: the combiner on E(z) alone) competes
    too. Every candidate goes through the combiner: the encoder saw these queries with these labels in stage I, so
    a plain text embedding would win here by memory, not by merit (the test split decides IRENE against the
    encoder alone)."""
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 10]))
    held = np.zeros(len(seen_rows), dtype=bool)
    held[rng.choice(len(seen_rows), max(1, int(cfg.validation_labels * len(seen_rows))), replace=False)] = True
    train_rows, val_rows = seen_rows[~held], seen_rows[held]
    y = y_train.tocsr()
    # columns: the training labels, then the held-out ones; only the held-out positives count
    held_truth = y.tocsc()[:, val_rows].tocsr()
    truth = sp.hstack([sp.csr_matrix((y.shape[0], len(train_rows))), held_truth]).tocsr()
    text, seen_text = vecs["labels"][val_rows], vecs["labels"][train_rows]
    curve: list[dict[str, Any]] = []
    for mode in cfg.seen_associations:
        train_assoc = _seen_assoc(mode, y, vecs["labels"], train_rows, cfg.associations)
        stage = train_stage_two(vecs["train"], vecs["labels"], y, train_rows, train_assoc, cfg, progress)
        train_reps = represent(stage.combiner, seen_text, stage.weights, seen_text, train_assoc, cfg)
        for tau0 in (None, *cfg.tau0_grid):
            assoc = (np.full((len(text), cfg.associations), -1, dtype=np.int64) if tau0 is None else
                     novel_associations(text, seen_text, stage.weights, cfg.shortlist, tau0, cfg.associations))
            reps = represent(stage.combiner, text, stage.weights, seen_text, assoc, cfg)
            curve.append({"seen_associations": mode, "tau0": tau0,
                          "R@10": recall_at(vecs["train"], truth, np.vstack([train_reps, reps])),
                          "associated": float((assoc >= 0).sum(axis=1).mean())})
    best = max(curve, key=lambda row: (row["R@10"], row["tau0"] is not None))
    return best["seen_associations"], best["tau0"], curve


def _seen_assoc(mode: str, y: sp.csr_matrix, label_vecs: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    if mode == "text":
        return text_neighbours(label_vecs[rows], k)
    return seen_associations(y, label_vecs, rows, k)


def fit_irene(dataset: XCDataset, vecs: dict[str, np.ndarray], cfg: IreneConfig, tau0: float | None | str = "choose",
              seen_mode: str | None = None, progress: bool = False) -> tuple[IreneModel, dict[str, Any]]:
    """Stage II on the seen labels and a representation for every label; ``tau0`` "choose" picks τ0 and how seen
    labels associate on held-out seen labels (:func:`choose_associations`), else both are used as given (the
    ablations reuse the chosen ones; ``seen_mode`` None: the first of ``cfg.seen_associations``)."""
    started = time.perf_counter()
    y = dataset.y_train.tocsr()
    seen_rows = np.flatnonzero(~dataset.label_novel)
    curve: list[dict[str, Any]] = []
    mode = seen_mode or cfg.seen_associations[0]
    if tau0 == "choose":
        mode, tau0, curve = choose_associations(vecs, y, seen_rows, cfg, progress)
    chosen = None if tau0 is None else float(tau0)
    k = cfg.associations
    assoc = np.full((dataset.n_labels, k), -1, dtype=np.int64)
    assoc[seen_rows] = _seen_assoc(mode, y, vecs["labels"], seen_rows, k)
    stage = train_stage_two(vecs["train"], vecs["labels"], y, seen_rows, assoc[seen_rows], cfg, progress)
    seen_text = vecs["labels"][seen_rows]
    model = IreneModel(cfg, seen_rows, stage.weights, seen_text, stage.combiner, chosen,
                       np.empty_like(vecs["labels"]), assoc, mode)
    model.label_reps[seen_rows] = represent(stage.combiner, seen_text, stage.weights, seen_text, assoc[seen_rows],
                                            cfg)
    novel_rows = np.flatnonzero(dataset.label_novel)
    if len(novel_rows):
        text = vecs["labels"][novel_rows]
        assoc[novel_rows] = model.associate(text)
        model.label_reps[novel_rows] = represent(stage.combiner, text, stage.weights, seen_text, assoc[novel_rows],
                                                 cfg)
    summary = {"seen_associations": mode, "tau0": chosen, "tau0_curve": curve, "history": stage.history,
               "seen_labels": int(len(seen_rows)), "novel_labels": int(len(novel_rows)),
               "novel_associated_mean": float((assoc[novel_rows] >= 0).sum(axis=1).mean()) if len(novel_rows) else 0.0,
               "stage_two_seconds": stage.seconds, "seconds": round(time.perf_counter() - started, 2)}
    return model, summary
