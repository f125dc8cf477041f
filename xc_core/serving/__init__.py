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


#: where ``xc serve`` listens unless told otherwise (``make serve`` sets it from SERVE_PORT)
PORT_ENV, DEFAULT_PORT = "XC_SERVE_PORT", 8900


def serve_port() -> int:
    import os

    return int(os.environ.get(PORT_ENV, DEFAULT_PORT))


def live_status(dataset: str, home: Path, port: int | None = None, timeout: float = 1.0) -> dict[str, Any]:
    """What the promotion reports about serving: the command that serves ``dataset``'s champion, its URL, and —
    when a service answers on that port for this data set — the version it is serving now (it moves to a newly
    promoted one at its next look at the alias)."""
    import json
    import urllib.error
    import urllib.request

    from xc_core.tracking.registry import model_name

    port = port or serve_port()
    url = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"serve_command": f"xc serve --dataset {dataset} --home {home} --port {port}",
                           "serve_url": f"{url}/ready", "live_version": "not running"}
    try:
        with urllib.request.urlopen(f"{url}/ready", timeout=timeout) as response:
            status = json.loads(response.read())
    except urllib.error.HTTPError as error:  # 503: up, nothing loaded yet
        status = json.loads(error.read() or b"{}")
    except (OSError, ValueError):
        return out
    if status.get("model") != model_name(dataset):
        return {**out, "live_version": f"port {port} serves {status.get('model', 'something else')}"}
    return {**out, "live_version": str(status.get("version") or "none loaded")}


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
    if model.index is None:
        return model
    folder = index_dir(home, info["dataset"], info["method"], info["profile"])
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return model
    if manifest.get("model_uri") != model.index.model_uri or manifest.get("sha256") == model.index_sha256:
        return model
    refreshed = model.with_index(folder)
    if refreshed.n_served != len(refreshed.labels.texts) + len(refreshed.labels.streamed):
        return model  # the index is newer than its streamed-keyword table: a stream is being written
    return refreshed


def predict_from_champion(dataset: str, query: str, home: Path, k: int = 10) -> dict[str, Any]:
    """Top-k labels for ``query`` from the champion's served model, with the keywords streamed into the home's
    index since it was registered (marked ``streamed``).

    Args:
        dataset: the data set whose registered model's ``champion`` answers.
        query: the query text.
        home: the data root whose MLflow store holds the registry (and the streamed keywords' index).
        k: how many labels, from 1 to the served model's ``max_k``.

    Returns:
        The data set, the query, the model alias, the version, its method and the labels (id, text, score).

    Raises:
        LookupError: no champion yet, or a champion registered before served models existed (the message names
            the command that fixes it).
        ServedModelError: ``k`` outside 1 … ``max_k``.
    """
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
