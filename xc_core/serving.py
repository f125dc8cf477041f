"""Serving from the registry: ``models:/xc-encoder-<dataset>@champion`` and the label index built for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def predict_from_champion(dataset: str, query: str, home: Path, k: int = 10) -> dict[str, Any]:
    """Top-k labels for ``query`` from the champion encoder and its (manifest-checked) label index; a champion
    with a classifier stage searches its classifier index too and fuses both (the evaluation's search path)."""
    import mlflow
    import numpy as np

    from xc_core.datasets.container import XCDataset
    from xc_core.index import LabelIndex
    from xc_core.paths import dataset_dir, index_dir
    from xc_core.tracking.registry import CHAMPION, champion_version, model_name
    from xc_core.tracking.store import activate, tracking_uri

    uri = tracking_uri(home)
    version = champion_version(dataset, uri)
    if version is None:
        raise LookupError(f"{model_name(dataset)} has no {CHAMPION} yet — run the promotion (xc run) first")
    activate(uri)
    model = mlflow.pyfunc.load_model(f"models:/{model_name(dataset)}@{CHAMPION}")
    method, profile = version.tags["method"], version.tags["profile"]
    folder = index_dir(home, dataset, method, profile)
    index = LabelIndex.load(folder, expect_dataset=dataset)
    data = XCDataset.load(dataset_dir(home, dataset))
    labels, label_ids = data.label_texts, data.label_ids or []
    vector = np.asarray(model.predict([query]), dtype=np.float32)
    fused = getattr(model.unwrap_python_model(), "classifier", None)
    if fused is None:
        scores, ids = index.search(vector, k)
    else:
        from xc_core.classifier.fusion import LABEL_VECTORS, fused_search
        from xc_core.stages.predict import CLASSIFIER_INDEX

        classifier_index = LabelIndex.load(folder / CLASSIFIER_INDEX, expect_dataset=dataset)
        scores, ids = fused_search(vector, index, classifier_index, np.load(folder / LABEL_VECTORS), fused, k,
                                   texts=[query])
    return {"dataset": dataset, "query": query, "model": f"{model_name(dataset)}@{CHAMPION}",
            "version": str(version.version), "method": method,
            "labels": [{"label": labels[i], "label_id": label_ids[i], "score": round(float(s), 4)}
                       for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]}
