"""``irene``: IRENE (novel keywords represented from the classifiers of similar seen keywords) on a frozen trained
encoder. Stage I is the trained encoder of the method ``IreneConfig.stage_one`` names (``ramen`` unless configured;
the method's ``requires``), recorded on the model (summary, MLflow params) whatever the registry's champion is;
stage II trains the seen labels' classifiers and the combiner (``train.py``); every label, novel ones included,
gets a representation the label index is built over, and novel keywords streamed in later get one the same way
(``stream.py``) without retraining. ``settings.py`` evaluates IRENE's four settings against the encoder alone.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.datasets.container import XCDataset
from xc_core.methods.base import (
    Fitted,
    Predictions,
    Requires,
    Roles,
    Scorer,
    Served,
    TrainJob,
    register,
    stage_one,
)
from xc_core.methods.irene.config import IreneConfig
from xc_core.training.record import TrainedModel

NAME = "irene"
ABLATIONS: dict[str, dict[str, str]] = {"irene (sum)": {"pooling": "sum"}, "irene (max)": {"pooling": "max"},
                                        "irene (weighted sum)": {"pooling": "weighted_sum"},
                                        "irene (embeddings, not classifiers)": {"inputs": "embeddings"}}


@dataclass(frozen=True)
class IreneMethod:
    name: str = NAME
    description: str = ("IRENE: every label represented by a combiner over its text embedding and the classifiers "
                        "of up to 3 similar seen labels, on a trained method's frozen encoder (stage I)")
    docs: str = "docs/irene.md"  # the page that explains it
    needs_anchor_sets: bool = False
    baselines: tuple[str, ...] = ("dual_encoder", "pretrained")
    ablation_of: str | None = None
    cfg: IreneConfig = field(default_factory=IreneConfig)
    roles: Roles = Roles(results=True, keywords=True)

    @property
    def requires(self) -> Requires:
        """Stage I: the configured method, trained first wherever both run."""
        return Requires(methods=(self.cfg.stage_one,))

    def config(self, job: TrainJob) -> IreneConfig:
        """IRENE's settings: the registered ones, the profile's seed, then the caller's overrides of IRENE's fields
        (the launchpad's TrainConfig fields are not IRENE's)."""
        own = {k: v for k, v in job.overrides.items() if k in IreneConfig.model_fields}
        return IreneConfig(**{**self.cfg.model_dump(), "seed": job.profile.seed, **own})

    def preflight(self, job: TrainJob) -> None:
        """Refuse a missing stage I before the model folder is emptied."""
        stage_one(job.home, job.dataset.name, job.profile.name, self.config(job).stage_one, "IRENE")

    def train(self, job: TrainJob) -> Fitted:
        import mlflow

        from xc_core.encoders.text import encoder_for
        from xc_core.methods.encoder.pyfunc import log_encoder
        from xc_core.methods.irene.fit import MODEL, embed, fit_irene

        cfg = self.config(job)
        base = stage_one(job.home, job.dataset.name, job.profile.name, cfg.stage_one, "IRENE")
        encoder_dir, max_length = Path(base.summary["encoder_dir"]), int(base.summary.get("max_length", 32))
        encoder = encoder_for(encoder_dir, max_length)
        vecs = embed(job.dataset, encoder, job.out, job.progress)
        val_rows, encoder_rows = stage_one_rows(job, base)
        model, summary = fit_irene(job.dataset, vecs, cfg, val_rows=val_rows, encoder_rows=encoder_rows,
                                   progress=job.progress)
        model.save(job.out / MODEL)
        mlflow.log_params({"stage_one": base.method, "stage_one_run_id": base.mlflow_run_id,
                           **{f"chosen.{k}": str(v) for k, v in asdict(model.choice).items()},
                           **{f"irene.{k}": str(v)[:250] for k, v in cfg.model_dump().items()}})
        for row in summary["history"]:
            mlflow.log_metrics({k.replace("/", "_"): float(v) for k, v in row.items() if k != "epoch"},
                               step=int(row["epoch"]))
        info = log_encoder(encoder_dir, max_length, job.out, extra_artifacts={"irene": str(job.out / MODEL)})
        return Fitted(info.model_uri, {"encoder_dir": str(encoder_dir), "max_length": max_length,
                                       "stage_one": base.method, "stage_one_model_uri": base.model_uri,
                                       # the registry tags the version with the encoder's run (register_evaluated)
                                       "depends_on_run_id": base.mlflow_run_id,
                                       # what serving runs: the encoder, the seen classifiers and the combiner
                                       "parameters": encoder.parameter_count() + model.parameters,
                                       **summary})

    def predict(self, dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, reuse: bool = False,
                progress: bool = False) -> Predictions:
        from xc_core.methods.irene.scorer import predict

        return predict(dataset, trained, index_dir, reuse=reuse, progress=progress)

    def analyse(self, dataset: XCDataset, trained: TrainedModel, predictions: Predictions,
                out: Path) -> dict[str, Any]:
        """IRENE's four settings for IRENE and its combiner ablations (IRENE Table 8) against the encoder alone."""
        from xc_core.methods.irene.fit import MODEL, IreneModel, embed, fit_irene
        from xc_core.methods.irene.settings import evaluate_settings

        vecs = embed(dataset, _encoder(trained), trained.folder)  # cached at training
        model = IreneModel.load(trained.folder / MODEL)
        seen = model.seen_rows
        from xc_core.methods.irene.settings import Representations

        variants: dict[str, tuple[np.ndarray, Representations]] = {
            NAME: (model.label_reps[seen], model.represent_novel)}
        combiner = replace(model.choice, serves="irene")  # the ablations compare combiners
        changes = dict(ABLATIONS)
        if model.choice.serves == "encoder":  # IRENE's row is the encoder's: show what the combiner would do
            changes = {"irene (combiner, not served)": {}, **changes}
        for name, change in changes.items():
            variant, _ = fit_irene(dataset, vecs, model.cfg.model_copy(update=change), choice=combiner)
            variants[name] = (variant.label_reps[seen], variant.represent_novel)
        started = time.perf_counter()
        rows = evaluate_settings(dataset, vecs, variants, seed=model.cfg.seed)
        out.mkdir(parents=True, exist_ok=True)
        (out / "irene_settings.json").write_text(json.dumps(rows, indent=2))
        return {"tables": {"IRENE settings (IRENE Fig. 3, Table 8 ablations; %, paired 95% CI vs the encoder)":
                           rows}, "irene_settings_seconds": round(time.perf_counter() - started, 2)}

    def add_keywords(self, home: Path, dataset: str, profile: str, path: Path, batch: int = 4096) -> dict[str, Any]:
        """Novel keywords from a file into the serving index, represented as IRENE represents novel labels."""
        from xc_core.methods.irene.stream import add_keywords, read_keywords

        texts, ids = read_keywords(Path(path))
        return add_keywords(home, dataset, profile, texts, ids, batch=batch)

    def scorer(self, served: Served) -> Scorer:
        from xc_core.methods.irene.scorer import irene_scorer

        return irene_scorer(served)


def stage_one_rows(job: TrainJob, base: TrainedModel) -> tuple[np.ndarray, np.ndarray | None]:
    """Stage I's validation queries and the training queries it was fine-tuned on (None: its untrained start
    serves), rebuilt from the settings stage I *recorded* (not the profile's): IRENE's out-of-fold choice never
    scores a query the frozen encoder trained on, and its served stage II never trains on the validation ones."""
    from xc_core.training.selection import fine_tuned_rows
    from xc_core.training.validation import recorded_split_config, validation_split

    cfg = recorded_split_config(base.summary, f"IRENE's stage I ({base.method} on {job.dataset.name})")
    return validation_split(job.dataset, cfg).val_rows, fine_tuned_rows(job.dataset, cfg, base.summary)


def _encoder(trained: TrainedModel) -> Any:
    from xc_core.encoders.text import encoder_for

    return encoder_for(Path(trained.summary["encoder_dir"]), int(trained.summary.get("max_length", 32)))


IRENE = register(IreneMethod())
