"""Serving from the registry: ``models:/xc-encoder-<dataset>@champion``, scored by the method that trained it.

The version's ``method`` tag names the method; the method turns the registered model into a scorer
(``Method.scorer``), so serving knows no method and no model kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def predict_from_champion(dataset: str, query: str, home: Path, k: int = 10) -> dict[str, Any]:
    """Top-k labels for ``query`` from the champion, as its method scores them (for an encoder method: its
    manifest-checked label index, fused with the classifier index when it has a classifier stage)."""
    from xc_core.datasets.container import XCDataset
    from xc_core.methods import Served, get_method
    from xc_core.paths import dataset_dir
    from xc_core.tracking.registry import CHAMPION, champion_version, model_name
    from xc_core.tracking.store import activate, tracking_uri

    uri = tracking_uri(home)
    version = champion_version(dataset, uri)
    if version is None:
        raise LookupError(f"{model_name(dataset)} has no {CHAMPION} yet — run the promotion (xc run) first")
    activate(uri)
    method, profile = version.tags["method"], version.tags["profile"]
    served = Served(f"models:/{model_name(dataset)}@{CHAMPION}", home, dataset, profile)
    scores, ids = get_method(method).scorer(served)([query], k)
    data = XCDataset.load(dataset_dir(home, dataset))
    labels, label_ids = data.label_texts, data.label_ids or []
    return {"dataset": dataset, "query": query, "model": f"{model_name(dataset)}@{CHAMPION}",
            "version": str(version.version), "method": method,
            "labels": [{"label": labels[i], "label_id": label_ids[i], "score": round(float(s), 4)}
                       for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]}
