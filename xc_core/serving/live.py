"""The champion kept loaded and followed: :class:`LiveModel` holds one :class:`Loaded` version at a time.

A promotion moves the ``champion`` alias; :meth:`LiveModel.refresh` sees the new version, downloads it, loads and
warms it *beside* the one serving, then swaps one reference — a request reads that reference once, so it is
answered wholly by the old version or wholly by the new one, never a mix, and none fails during the swap. A
version that does not load (a corrupt or missing part) is not swapped in: the old one keeps serving and the
reason is kept in one line (``last_error``, ``/ready``, the log). Keywords streamed into the home's index
(IRENE) are picked up the same way, as a new index under the same version.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xc_core.tracking.served import ServedModel

log = logging.getLogger("xc.serve")
#: what a freshly loaded version answers before it takes traffic (the first calls pay for lazy setup)
WARM_ROUNDS = 3


@dataclass(frozen=True)
class Loaded:
    """One served version: what every response names (``version``) and what answers it (``model``)."""

    version: str
    model: ServedModel
    loaded_at: float = field(default_factory=time.time)

    @property
    def method(self) -> str:
        return str(self.model.info.get("method", ""))


@dataclass
class LiveModel:
    """The served version of ``dataset``'s champion in ``home``'s registry (downloads go through ``cache``,
    removed once loaded: a loaded version lives in memory)."""

    dataset: str
    home: Path
    cache: Path
    pinned: str | None = None  # serve this version and follow no alias (a canary, a benchmark of one version)
    on_swap: Callable[[Loaded, Loaded | None], None] | None = None  # metrics hook: (new, old)
    on_failure: Callable[[str], None] | None = None
    current: Loaded | None = None
    last_error: str = ""
    retry_s: float = 30.0  # a version that failed to load is tried again after this, doubling up to 10 minutes
    _refreshing: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _failed: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)  # version → (tries, next try)

    @property
    def model_name(self) -> str:
        from xc_core.tracking.registry import model_name

        return model_name(self.dataset)

    def champion(self) -> str | None:
        """The version the ``champion`` alias names now (None: no champion yet), or the pinned version."""
        from xc_core.tracking.registry import champion_version
        from xc_core.tracking.store import tracking_uri

        if self.pinned is not None:
            return self.pinned
        version = champion_version(self.dataset, tracking_uri(self.home))
        return None if version is None else str(version.version)

    def refresh(self) -> bool:
        """Follow the alias (and the home's streamed keywords) once; True when a new model was swapped in.
        Never raises: a failure leaves the serving version in place and is recorded in ``last_error``."""
        with self._refreshing:  # one load at a time: a slow download is not started twice
            version = None
            try:
                version = self.champion()
                if version is not None and (self.current is None or version != self.current.version):
                    if not self._due(version):
                        return False
                    self._swap(self.load(version))
                    self._failed.pop(version, None)
                    return True
                return self._restream()
            except Exception as exc:  # the old version keeps serving whatever went wrong
                self._fail(exc, version)
                return False

    def _due(self, version: str) -> bool:
        """False while a version that failed to load waits for its next try (a corrupt model is not downloaded
        again at every look)."""
        return time.monotonic() >= self._failed.get(version, (0, 0.0))[1]

    def load(self, version: str) -> Loaded:
        """Download, load and warm ``version`` (nothing else is touched: the serving version stays in place)."""
        from xc_core.serving import with_home_index
        from xc_core.tracking.served import ServedModelError, load_registered
        from xc_core.tracking.store import activate, tracking_uri

        activate(tracking_uri(self.home))
        started = time.perf_counter()
        model = load_registered(f"models:/{self.model_name}/{version}", scratch=self.cache)
        if model is None:
            raise ServedModelError(f"{self.model_name} v{version} is not a served model (registered by an older xc): "
                                   "register the method again with `xc promote`")
        model = with_home_index(model, self.home)
        warm(model)
        log.info("loaded %s v%s (%s) in %.1f s", self.model_name, version, model.info.get("method"),
                 time.perf_counter() - started)
        return Loaded(version, model)

    def _restream(self) -> bool:
        from xc_core.serving import with_home_index

        current = self.current
        if current is None:
            return False
        model = with_home_index(current.model, self.home)
        if model is current.model:
            return False
        warm(model)
        self._swap(Loaded(current.version, model))
        return True

    def _swap(self, new: Loaded) -> None:
        old, self.current = self.current, new  # the one step requests see: a reference assignment
        self.last_error = ""
        if self.on_swap is not None:
            self.on_swap(new, old)
        log.info("serving %s v%s (%s)%s", self.model_name, new.version, new.method,
                 f", replacing v{old.version}" if old is not None else "")

    def _fail(self, exc: BaseException, version: str | None = None) -> None:
        if version is not None and (self.current is None or version != self.current.version):
            tries = self._failed.get(version, (0, 0.0))[0] + 1
            self._failed[version] = (tries, time.monotonic() + min(self.retry_s * 2 ** (tries - 1), 600.0))
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        serving = f"v{self.current.version} keeps serving" if self.current else "nothing is served yet"
        self.last_error = f"{type(exc).__name__}: {text} ({serving})"
        log.error("%s: %s", self.model_name, self.last_error)
        if self.on_failure is not None:
            self.on_failure(self.last_error)

    def follow(self, every_s: float, stop: threading.Event) -> threading.Thread:
        """Refresh every ``every_s`` seconds in a daemon thread until ``stop`` is set."""

        def loop() -> None:
            while not stop.wait(every_s):
                self.refresh()

        thread = threading.Thread(target=loop, name="xc-serve-follow", daemon=True)
        thread.start()
        return thread

    def status(self) -> dict[str, Any]:
        current = self.current
        if current is None:
            return {"ready": False, "model": self.model_name,
                    "reason": self.last_error or f"{self.model_name} has no champion yet"}
        return {"ready": True, "model": self.model_name, "version": current.version, "method": current.method,
                "labels": current.model.n_served, "loaded_at": time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime(current.loaded_at)),
                **({"last_error": self.last_error} if self.last_error else {})}


def warm(model: ServedModel) -> None:
    """Answer a few label texts (a single query and a small batch), so the first client does not pay for lazy
    initialisation (tokenizer, thread pools, faiss)."""
    texts = model.labels.texts[:8] or ["warm up"]
    for _ in range(WARM_ROUNDS):
        model.search(texts[:1], min(10, model.max_k))
        model.search(texts, min(10, model.max_k))
