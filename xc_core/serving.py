"""Serving from the registry: ``models:/xc-encoder-<dataset>@champion``, scored by the method that trained it.

The version's ``method`` tag names the method; the method turns the registered model into a scorer
(``Method.scorer``), so serving knows no method and no model kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def predict_from_champion(dataset: str, query: str, home: Path, k: int = 10) -> dict[str, Any]:
    """Top-k labels for ``query`` from the champion, as its method scores them (for an encoder method: its
    manifest-checked label index, fused with the classifier index when it has a classifier stage). Keywords
    streamed into the index after training (IRENE) answer at once, marked ``streamed``."""
    from xc_core.datasets.container import XCDataset
    from xc_core.methods import Served, get_method
    from xc_core.paths import dataset_dir, index_dir
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
    names = _label_names(ids[0], data.label_texts, data.label_ids or [], index_dir(home, dataset, method, profile))
    answers = []
    for s, i in zip(scores[0], ids[0], strict=True):
        if i >= 0:
            label, label_id = names.get(int(i), (None, None))
            streamed = {"streamed": True} if i >= data.n_labels else {}
            answers.append({"label": label, "label_id": label_id, "score": round(float(s), 4), **streamed})
    return {"dataset": dataset, "query": query, "model": f"{model_name(dataset)}@{CHAMPION}",
            "version": str(version.version), "method": method, "labels": answers}


def _label_names(ids: np.ndarray, texts: list[str], label_ids: list[str],
                 index_folder: Path) -> dict[int, tuple[str | None, str | None]]:
    """Text and id of each index id: a data-set label, or beyond the data set's labels a keyword streamed into
    the method's index after training (IRENE's ``xc add-keywords``; its keyword id may be empty)."""
    import polars as pl

    from xc_core.methods.irene.serve import streamed_labels

    names: dict[int, tuple[str | None, str | None]] = {
        int(i): (texts[i], label_ids[i] if i < len(label_ids) else None) for i in ids if 0 <= i < len(texts)}
    beyond = [int(i) for i in ids if i >= len(texts)]
    if beyond:
        rows = streamed_labels(index_folder).filter(pl.col("id").is_in(beyond))
        names.update({int(r["id"]): (r["text"], r["keyword_id"]) for r in rows.iter_rows(named=True)})
    return names
