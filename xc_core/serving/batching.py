"""Concurrent requests answered together: one worker thread runs the model; whatever requests queued while it
was busy become its next batch (up to ``max_queries`` texts). Under light load a request is answered alone and
waits for nothing; under load one encoder pass serves many clients — on a CPU, a batch of 8 short queries costs
little more than one — instead of several passes fighting over the same cores.

Each batch reads the live version once, so every request in it is answered by that version and names it.

The queue is bounded (``max_waiting`` requests): one more is refused at once (:class:`OverloadedError`) rather than
left to wait behind work it cannot overtake. A request whose caller stopped waiting (its future cancelled, e.g.
at the service's deadline) is dropped when the worker reaches it, not computed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from xc_core.serving.live import LiveModel, Loaded


@dataclass(frozen=True)
class Answer:
    version: str
    method: str
    results: list[dict[str, Any]]  # per query: {"query", "labels": [...]}


@dataclass
class _Job:
    texts: list[str]
    k: int
    future: Future[Answer]


class NotReadyError(RuntimeError):
    """No version is loaded yet (no champion, or the first one did not load)."""


class OverloadedError(RuntimeError):
    """The queue holds ``max_waiting`` requests already."""


class Batcher:
    """``submit(texts, k)`` → a future :class:`Answer`; ``close()`` stops the worker after the queue drains."""

    def __init__(self, live: LiveModel, max_queries: int = 64,
                 on_batch: Callable[[int], None] | None = None, max_waiting: int = 128) -> None:
        self.live, self.max_queries, self.on_batch, self.max_waiting = live, max_queries, on_batch, max_waiting
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="xc-serve-batcher", daemon=True)
        self._worker.start()

    def submit(self, texts: list[str], k: int) -> Future[Answer]:
        # one event loop submits, the worker only takes away: the size can only be smaller than read here
        if self._queue.qsize() >= self.max_waiting:
            raise OverloadedError(f"the queue is full ({self.max_waiting} waiting for the model): retry later")
        future: Future[Answer] = Future()
        self._queue.put(_Job(texts, k, future))
        return future

    def waiting(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        self._queue.put(None)
        self._worker.join(timeout=10)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            batch, size, stop = [job], len(job.texts), False
            while size < self.max_queries:  # what queued meanwhile rides along
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
                size += len(more.texts)
            self._answer(batch, self.live.current)
            if stop:
                return

    def _answer(self, batch: list[_Job], loaded: Loaded | None) -> None:
        batch = [job for job in batch if job.future.set_running_or_notify_cancel()]  # drop the abandoned
        if not batch:
            return
        if loaded is None:
            for job in batch:
                job.future.set_exception(NotReadyError(self.live.status().get("reason", "no model loaded")))
            return
        texts = [t for job in batch for t in job.texts]
        try:
            scores, ids = loaded.model.search(texts, max(job.k for job in batch))
        except Exception as exc:  # every request of the batch gets the error; the worker goes on
            for job in batch:
                job.future.set_exception(exc)
            return
        if self.on_batch is not None:
            self.on_batch(len(texts))
        row = 0
        for job in batch:
            results = []
            for text in job.texts:
                labels = loaded.model.named(scores[row][: job.k], ids[row][: job.k])
                results.append({"query": text, "labels": labels})
                row += 1
            job.future.set_result(Answer(loaded.version, loaded.method, results))
