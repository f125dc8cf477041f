"""``textgnn``: TextGNN (Zhu et al., KDD 2021) — twin towers sharing one text encoder, each encoding its centre
text and up to 3 behaviour-graph neighbours, aggregated by a GAT and joined to the centre by a skip layer.

* Towers, GAT, skip (``add``/``concat``) and crossing layer: ``model.py``; neighbours (graph edges ranked by
  strength, ANN proxies, padding, no leak of a train query's own labels): ``neighbours.py``.
* Retrieval head (``train.py``): tower outputs compared by cosine and trained with the encoder methods' in-batch
  softmax, encoder and towers together, the epoch kept chosen on the trainer's validation documents (epoch 0, the
  untrained start, included: ``selection.py``); labels indexed with faiss, test queries searched (``serve.py``), which
  also serves ``xc predict`` through the logged pyfunc (``pyfunc.py``).
* Relevance head (``relevance.py``): the crossing layer fitted on world relevance labels, ROC-AUC overall and by
  ad frequency (Table 4, Fig. 4), only where the data set has ground truth (the simulator); elsewhere
  :meth:`TextGNNMethod.analyse` says it does not apply.
* Not done: knowledge distillation (TextGNN §4.3 trains on a RoBERTa teacher's scores; here the towers train on
  clicks, as the other methods do, and the relevance head on the world's grades).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
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
    stage_one_encoder,
    stage_one_of,
    stage_one_record,
)
from xc_core.methods.textgnn.config import TextGNNConfig
from xc_core.training.record import TrainedModel

NAME = "textgnn"


@dataclass(frozen=True)
class TextGNNMethod:
    name: str = NAME
    description: str = ("TextGNN: twin towers over one shared encoder, each centre text with up to 3 behaviour-graph "
                        "(or ANN proxy) neighbours aggregated by a GAT plus a skip connection; cosine retrieval")
    docs: str = "docs/gnn.md"  # the page that explains it
    needs_anchor_sets: bool = True
    baselines: tuple[str, ...] = ("dual_encoder", "pretrained")
    ablation_of: str | None = None
    roles: Roles = Roles(results=True)
    cfg: TextGNNConfig = field(default_factory=TextGNNConfig)

    @property
    def requires(self) -> Requires:
        """A query's behaviour-graph neighbours at inference; the configured stage I, trained first, when set."""
        return Requires(methods=(self.cfg.stage_one,) if self.cfg.stage_one else (), graph_at_inference=True)

    def settings(self, job: TrainJob) -> tuple[Any, TextGNNConfig, TrainedModel | None]:
        """(TrainConfig, TextGNNConfig, stage I's model or None): the profile's recipe — its fine-tune schedule, or
        its encoder recipe on a stage I — then the caller's overrides for either."""
        from xc_core.profiles import finetune_settings, train_settings
        from xc_core.training.config import TrainConfig

        own = {k: v for k, v in job.overrides.items() if k in TextGNNConfig.model_fields}
        tg = TextGNNConfig(**{**self.cfg.model_dump(), **own})
        theirs = {k: v for k, v in job.overrides.items() if k in TrainConfig.model_fields}
        if not tg.stage_one:
            return finetune_settings(job.profile).model_copy(update=theirs), tg, None
        cfg = train_settings(job.profile).model_copy(update=theirs)
        return cfg, tg, stage_one_of(job, tg.stage_one, cfg, "TextGNN")

    def preflight(self, job: TrainJob) -> None:
        """Refuse a missing stage I, or one whose validation rows differ, before the model folder is emptied."""
        self.settings(job)

    def train(self, job: TrainJob) -> Fitted:
        import mlflow
        import torch

        from xc_core.encoders.text import TextEncoder
        from xc_core.methods.textgnn.model import TextGNNHeads
        from xc_core.methods.textgnn.neighbours import (
            MemoEmbed,
            answer_neighbours,
            label_neighbours,
            train_doc_neighbours,
        )
        from xc_core.methods.textgnn.pyfunc import log_textgnn
        from xc_core.methods.textgnn.scorer import FOLDER, TextGNNModel
        from xc_core.methods.textgnn.train import train_textgnn
        from xc_core.profiles import encoder_config

        cfg, tg, base = self.settings(job)
        enc_cfg = encoder_config(job.profile, job.home)
        enc_cfg = stage_one_encoder(enc_cfg, base)  # stage I's folder, its light tower included
        torch.manual_seed(cfg.seed)
        encoder = TextEncoder(enc_cfg)
        if cfg.tower:  # the CPU recipe: the transformer frozen (its vector of each text computed once), a light tower
            encoder.freeze_under_tower(cfg.tower_hidden, cfg.tower_bigrams, job.dataset.train_texts,
                                       job.dataset.label_texts)
        if not tg.encoder_trains:
            for param in encoder.all_parameters():
                param.requires_grad_(False)
        started, embed = time.perf_counter(), MemoEmbed(encoder.encode)
        docs, pool, _ = train_doc_neighbours(job.dataset, embed, tg.neighbours, tg.candidates,
                                             tg.min_impressions, tg.proxy_candidates)
        labels = label_neighbours(job.dataset, embed, tg.neighbours, tg.candidates, tg.min_impressions,
                                  tg.proxy_candidates)
        if tg.oracle_neighbours:  # the positive control: each training document's neighbours are its own answers
            docs = answer_neighbours(job.dataset.y_train, job.dataset.label_texts, tg.neighbours)
        neighbour_seconds = round(time.perf_counter() - started, 3)
        torch.manual_seed(cfg.seed)
        heads = TextGNNHeads(encoder.dim, tg.skip)
        mlflow.log_params({k: str(v)[:500] for k, v in {
            **{f"train.{k}": v for k, v in cfg.model_dump().items()},
            **{f"textgnn.{k}": v for k, v in tg.model_dump().items()},
            **{f"encoder.{k}": v for k, v in enc_cfg.model_dump().items()}, "method": NAME,
            **({"stage_one": base.method, "stage_one_run_id": base.mlflow_run_id} if base else {})}.items()})
        fit = train_textgnn(job.dataset, encoder, heads, docs, labels, cfg, tg, job.progress,
                            log_metrics=lambda m, step: mlflow.log_metrics(m, step=step))
        encoder_dir = job.out / "encoder"
        encoder.save(encoder_dir)  # the light tower beside the transformer's files when it has one
        model = TextGNNModel(encoder, heads.eval(), tg,
                             {t: docs.texts[i][:tg.neighbours] for i, t in enumerate(job.dataset.train_texts)},
                             labels, pool, encoder.encode(pool) if pool else np.zeros((0, encoder.dim), np.float32))
        folder = model.save(job.out / FOLDER)
        encoder_parameters = encoder.parameter_count()
        coverage = {f"train_docs_{k}": v for k, v in docs.counts().items()}
        coverage |= {f"labels_{k}": v for k, v in labels.counts().items()}
        summary = {"encoder_dir": str(encoder_dir), "max_length": enc_cfg.max_length, "seed": cfg.seed,
                   "train_seconds": fit.seconds, "epochs": cfg.epochs,
                   "seconds_per_epoch": round(fit.seconds / max(cfg.epochs, 1), 3), "steps": fit.steps,
                   "train_documents": fit.train_documents, "parameters": model.parameters,
                   "encoder_parameters": encoder_parameters, "tower_parameters": model.parameters - encoder_parameters,
                   "loss_before": fit.loss_before, "loss_after": fit.loss_after,
                   "final_task_loss": fit.history[-1]["loss"] if fit.history else float("nan"),
                   "neighbour_seconds": neighbour_seconds, "neighbours": coverage, "skip": tg.skip,
                   "light_tower": bool(cfg.tower), **stage_one_record(base),
                   **fit.selection, "history": fit.history}
        mlflow.log_metrics({k: float(summary[k]) for k in (
            "train_seconds", "seconds_per_epoch", "parameters", "encoder_parameters", "loss_before", "loss_after",
            "final_task_loss", "neighbour_seconds")})
        mlflow.log_dict({"history": fit.history, "selected_epoch": fit.selection["selected_epoch"]},
                        "validation_history.json")
        mlflow.log_metrics({f"neighbours/{k}": float(v) for k, v in coverage.items()})
        info = log_textgnn(encoder_dir, folder, enc_cfg.max_length, job.out)
        return Fitted(info.model_uri, summary)

    def predict(self, dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, reuse: bool = False,
                progress: bool = False) -> Predictions:
        from xc_core.methods.textgnn.scorer import predict

        return predict(dataset, trained, index_dir, reuse=reuse, progress=progress)

    def analyse(self, dataset: XCDataset, trained: TrainedModel, predictions: Predictions,
                out: Path) -> dict[str, Any]:
        """How test queries were served (graph vs proxy neighbours, ms per step) and, where the data set has ground
        truth, the relevance head's ROC-AUC against the encoder alone (TextGNN Table 4, Fig. 4)."""
        from xc_core.methods.textgnn.scorer import index_report

        report = index_report(predictions.index_dir)
        found: dict[str, Any] = {"test_neighbours": report.get("test_neighbours"),
                                 "ms_per_query_steps": report.get("ms_per_query_steps"),
                                 "ms_per_query_total": report.get("ms_per_query_total")}
        world = ground_truth(dataset.name, trained.folder.parents[2])  # paths.model_dir: <home>/models/<ds>/<m-p>
        if world is None:
            found["relevance"] = {"applicable": False, "reason": f"data set '{dataset.name}' has no ground-truth "
                                  "relevance (only the simulator's world has): the relevance head is not evaluated"}
        else:
            found["relevance"] = relevance_head(dataset, trained, predictions, world)
        out.mkdir(parents=True, exist_ok=True)
        (out / "textgnn_analysis.json").write_text(json.dumps(found, indent=2, default=str))
        result: dict[str, Any] = {"textgnn": found}
        if found["relevance"].get("applicable", True):
            rows = [{"model": name, **found["relevance"][name]} for name in ("textgnn", "encoder only")]
            result["tables"] = {"TextGNN relevance head (TextGNN Table 4, Fig. 4): ROC-AUC by ad training "
                                "frequency": rows}
        return result

    def scorer(self, served: Served) -> Scorer:
        from xc_core.methods.textgnn.scorer import textgnn_scorer

        return textgnn_scorer(served)


def ground_truth(dataset: str, home: Path) -> Any | None:
    """The simulated world behind the data set (None: it has no ground truth)."""
    from xc_core.datasets.registry import get_dataset_spec

    try:
        spec = get_dataset_spec(dataset, home)  # built-in or defined in the home
    except (LookupError, ValueError):  # an XC folder evaluated by path: no definition, no world
        return None
    return spec.world(home) if spec.world is not None else None


def relevance_head(dataset: XCDataset, trained: TrainedModel, predictions: Predictions, world: Any) -> dict[str, Any]:
    """The relevance head's ROC-AUC table (``relevance.py``). Not named ``relevance``: importing the submodule of
    that name rebinds the package attribute, and a second evaluation in one process called the module."""
    from xc_core.methods.textgnn.relevance import relevance_table
    from xc_core.methods.textgnn.scorer import load_model

    top = np.load(predictions.index_dir / "test_top_ids.npy")
    return relevance_table(dataset, world, load_model(trained), top, int(trained.summary.get("seed", 0)))


TEXTGNN = register(TextGNNMethod())
