"""What a dual-encoder method with a classifier stage adds to its evaluation: the head/tail trade-off of
encoder-only, classifier-only (and lexical-only) against fused, on the same test queries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from xc_core.datasets.container import XCDataset
from xc_core.evaluation.metrics import filter_predictions, propensity, to_csr, top_k
from xc_core.methods.base import Predictions
from xc_core.training.record import TrainedModel


def classifier_tradeoff(dataset: XCDataset, preds: Predictions, classifier_dir: Path, out: Path,
                        trained: TrainedModel) -> dict[str, Any]:
    """Per-decile P@5/PSP@5 of encoder-only, classifier-only and fused on the test split (filter applied),
    the plot beside metrics.json and in the MLflow run; returns the totals and the chosen alpha."""
    import mlflow

    from xc_core.classifier import FusedClassifier
    from xc_core.classifier.channels import registered
    from xc_core.classifier.tradeoff import VARIANTS_FILE, decile_table, plot, summarize

    variants = np.load(preds.index_dir / VARIANTS_FILE)
    runs = {f"{name} only": to_csr(variants[f"{name}_scores"], variants[f"{name}_ids"], dataset.n_labels)
            for name in ("encoder", "classifier", *(s.name for s in registered())) if f"{name}_ids" in variants}
    tops = {name: top_k(filter_predictions(scores, dataset.filter_pairs), 5)
            for name, scores in {**runs, "fused": preds.scores}.items()}
    fused = FusedClassifier.load(classifier_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = decile_table(dataset.y_test, dataset.y_train, tops, propensity(dataset))
    table.write_parquet(out / "deciles.parquet")
    weights = fused.fusion
    figure = plot(table, fused.info.get("alpha_curve", []), fused.alpha, out / "tradeoff.png",
                  weights["lexical_weight"], linear_weight=weights["linear_weight"])
    mlflow.MlflowClient(trained.tracking_uri).log_artifact(trained.mlflow_run_id, str(figure))
    return {"alpha": fused.alpha, "lexical_weight": weights["lexical_weight"],
            "linear_weight": weights["linear_weight"],
            "weights_mb": round(fused.megabytes, 2),
            "variants": summarize(table)}
