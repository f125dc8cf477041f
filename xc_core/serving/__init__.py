"""Serving the registry's champion: ``models:/xc-encoder-<dataset>@champion`` is a served model
(``xc_core.tracking.served``) that answers top-k ads by itself.

- :func:`predict_from_champion` — one query, cold (``xc predict``);
- ``live.py`` — the champion kept loaded, followed across promotions (load + warm beside, then one atomic swap);
- ``batching.py`` — concurrent requests answered in shared batches;
- ``app.py`` — the HTTP service (``xc serve``, FastAPI on uvicorn): ``/predict``, ``/health``, ``/ready``,
  ``/metrics``.

Keywords streamed into a method's index after its registration (IRENE's ``xc add-keywords``) are in the home,
not in the registered model: :func:`with_home_index` puts them in front of the served model, so both the CLI and
the service answer with them without a re-registration or a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xc_core.tracking.served import ServedModel


def champion_uri(dataset: str) -> str:
    from xc_core.tracking.registry import CHAMPION, model_name

    return f"models:/{model_name(dataset)}@{CHAMPION}"


def with_home_index(model: ServedModel, home: Path) -> ServedModel:
    """``model`` over the home's copy of its index when that copy holds more (keywords streamed in after the
    registration) and was built for the same trained model; else ``model`` unchanged. A copy caught between its
    index and its keyword table (a stream being written) is left for the next look."""
    import json

    from xc_core.paths import index_dir

    info = model.info
    folder = index_dir(home, info["dataset"], info["method"], info["profile"])
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return model
    if manifest.get("model_uri") != model.index.model_uri or manifest.get("sha256") == model.index_sha256:
        return model
    refreshed = model.with_index(folder)
    if refreshed.index.count != len(refreshed.labels.texts) + len(refreshed.labels.streamed):
        return model  # the index is newer than its streamed-keyword table: a stream is being written
    return refreshed


def predict_from_champion(dataset: str, query: str, home: Path, k: int = 10) -> dict[str, Any]:
    """Top-k labels for ``query`` from the champion's served model, with the keywords streamed into the home's
    index since it was registered (marked ``streamed``)."""
    from xc_core.tracking.registry import CHAMPION, champion_version, model_name
    from xc_core.tracking.served import check_k, load_registered
    from xc_core.tracking.store import activate, tracking_uri

    uri = tracking_uri(home)
    version = champion_version(dataset, uri)
    if version is None:
        raise LookupError(f"{model_name(dataset)} has no {CHAMPION} yet — run the promotion (xc run) first")
    activate(uri)
    model = load_registered(f"models:/{model_name(dataset)}/{version.version}")
    if model is None:
        raise LookupError(f"{model_name(dataset)} v{version.version} was registered before served models existed: "
                          f"register the method again (`xc promote --dataset {dataset} --methods "
                          f"{version.tags.get('method', '...')}`)")
    model = with_home_index(model, home)
    check_k(k, model.max_k)
    answer = model.answer([query], k)[0]
    return {"dataset": dataset, "query": query, "model": f"{model_name(dataset)}@{CHAMPION}",
            "version": str(version.version), "method": model.info["method"], "labels": answer["labels"]}
