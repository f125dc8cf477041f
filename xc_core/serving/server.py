"""Run the service: load the champion, follow the alias in a thread, answer on 127.0.0.1 until SIGINT/SIGTERM."""

from __future__ import annotations

import ipaddress
import logging
import shutil
from pathlib import Path
from typing import Any

from xc_core.serving import DEFAULT_PORT
from xc_core.serving.app import Limits, create_app
from xc_core.serving.live import LiveModel

log = logging.getLogger("xc.serve")


def serving_cache(home: Path, dataset: str) -> Path:
    """Where this process downloads a version before loading it (removed once loaded), one folder per process;
    folders of processes that are gone (killed mid-download) are removed first."""
    import os

    from xc_core.logs.store import pid_alive
    from xc_core.paths import dataset_slug

    root = home / "serving" / dataset_slug(dataset)
    for folder in root.glob("pid-*"):
        if not pid_alive(int(folder.name.removeprefix("pid-"))):
            shutil.rmtree(folder, ignore_errors=True)
    return root / f"pid-{os.getpid()}"


def check_loopback(host: str) -> str:
    """Services bind to a loopback address only (a public address is a deployment decision, not a default)."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"--host {host}: xc serve binds to a loopback address only (127.0.0.1, ::1, localhost); "
                         "put a reverse proxy in front of it to expose it")
    return host


def start_live(dataset: str, home: Path, version: str | None = None) -> LiveModel:
    """The live model with the champion (or the pinned ``version``) loaded, or a clear reason why not yet in
    ``last_error``; a pinned version that does not load is an error."""
    import mlflow
    from mlflow.exceptions import MlflowException

    from xc_core.tracking.registry import model_name
    from xc_core.tracking.store import tracking_uri

    try:
        mlflow.MlflowClient(tracking_uri(home)).get_registered_model(model_name(dataset))
    except MlflowException:
        raise LookupError(f"{model_name(dataset)} is not in the registry of {home}: train, evaluate and promote "
                          f"a method first (`make run`, or `xc run --dataset {dataset}`)") from None
    live = LiveModel(dataset, home, serving_cache(home, dataset), pinned=version)
    live.refresh()
    if live.current is None and version is not None:
        raise LookupError(f"{model_name(dataset)} v{version}: {live.last_error}")
    if live.current is None:
        log.warning("%s: not ready yet — %s", live.model_name, live.status()["reason"])
    return live


def serve(dataset: str, home: Path, host: str = "127.0.0.1", port: int = DEFAULT_PORT, poll_s: float = 5.0,
          limits: Limits | None = None, max_batch: int = 64, version: str | None = None) -> dict[str, Any]:
    """Serve the data set's registered model over HTTP until stopped.

    Args:
        dataset: the data set whose registered model is served.
        home: the data root whose MLflow store holds the registry.
        host: a loopback address (anything else is refused).
        port: the port to listen on.
        poll_s: how often the ``champion`` alias (and the home's streamed keywords) is looked at.
        limits: request size and rate limits (None: the defaults).
        max_batch: the most queries the batcher scores at once.
        version: serve that version only, following no alias (its streamed keywords still are).

    Returns:
        What was served, for the CLI's last line: the data set, the model, the version served at the end, the URL.

    Raises:
        ValueError: ``host`` is not a loopback address.
    """
    import uvicorn

    check_loopback(host)
    live = start_live(dataset, home, version)
    app = create_app(live, limits, max_batch, follow_s=poll_s)
    current = live.current
    follows = "pinned, follows no alias" if version else "follows @champion"
    log.warning("xc serve: %s %s on http://%s:%d (%s, looks every %.1f s)", live.model_name,
                f"v{current.version} ({current.method})" if current else "(not ready)", host, port, follows, poll_s)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
    server.run()  # on SIGINT/SIGTERM the app's lifespan stops the follower and removes the copy
    final = live.current
    return {"dataset": dataset, "model": live.model_name, "served_version": final.version if final else None,
            "url": f"http://{host}:{port}"}
