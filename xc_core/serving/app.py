"""``xc serve``: the champion over HTTP (FastAPI on uvicorn, 127.0.0.1).

- ``POST /predict`` ``{"query": "..."}`` or ``{"queries": [...]}``, optional ``"k"`` (default 10) →
  ``{"model", "version", "method", "k", "results": [{"query", "labels": [{"label_id", "label", "score"}]}]}``;
- ``GET /health`` — the process is up (liveness); ``GET /ready`` — 200 once a version is loaded, else 503 with
  the reason (readiness); ``GET /metrics`` — Prometheus text: requests by endpoint and status, errors, latency
  histogram, batch sizes, the live model version, swaps and failed swaps.

Bad input is a 4xx with one line ``{"error": "..."}``: malformed JSON (nesting too deep included) 400; a
missing, empty, non-string or unknown field, or k out of range 422; too many or too long queries, or a body over
the limit 413 — refused by its ``Content-Length`` before it is read, or while it streams in when it has none; a
content type other than JSON 415; a body that does not arrive within ``body_timeout_s`` 408 (the client is slow). A
request that arrives before any version is loaded gets 503.

Overload is refused, not queued without end: at most ``max_queue`` requests wait for the model; one more is
answered 503 at once, and a request not answered within ``deadline_s`` gets 503 (its queued work is dropped,
not computed), also one whose body arrived after the deadline had passed: under load the server's own event loop
reads bodies late, and that is overload, not a slow client. Both 503s carry ``Retry-After`` and are counted in
``xc_serve_refused_total{reason}``.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.requests import ClientDisconnect

from xc_core.serving.batching import Batcher, NotReadyError, OverloadedError
from xc_core.serving.live import LiveModel, Loaded


class Limits(BaseModel):
    """What one request may ask (each over-limit request is refused with the limit in its message)."""

    max_queries: int = Field(default=256, ge=1, description="queries in one request")
    max_chars: int = Field(default=512, ge=1, description="characters in one query")
    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="bytes in one request body")
    default_k: int = Field(default=10, ge=1)
    max_queue: int = Field(default=128, ge=1, description="requests waiting for the model at once; one more is "
                           "refused (503) instead of waiting behind them")
    deadline_s: float = Field(default=2.0, gt=0, description="seconds from a request's arrival to its answer "
                              "(body read included); a later one is refused (503) and its queued work dropped")
    body_timeout_s: float = Field(default=10.0, gt=0, description="seconds a request's body may take to arrive; a "
                                  "slower one is refused with 408 (a slow or stalled client)")

    @property
    def retry_after(self) -> str:
        """``Retry-After`` of a refused request: whole seconds (RFC 9110), the deadline rounded up."""
        return str(max(1, math.ceil(self.deadline_s)))


class BadRequest(ValueError):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Query:
    texts: list[str]
    k: int


FIELDS = ("query", "queries", "k")


def check_content_type(value: str | None) -> None:
    """JSON or nothing said (curl, urllib without a header); any other media type is 415."""
    media = (value or "").split(";", 1)[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        raise BadRequest(415, f"content type {media!r} is not JSON: send 'Content-Type: application/json'")


def declared_length(value: str | None, limits: Limits) -> None:
    """Refuse by ``Content-Length`` before a byte of the body is read."""
    if value is None:
        return
    if not value.strip().isdigit():
        raise BadRequest(400, f"Content-Length {value!r} is not a number of bytes")
    if int(value) > limits.max_body_bytes:
        raise BadRequest(413, f"request body of {int(value)} bytes is over the limit of {limits.max_body_bytes}")


async def read_body(request: Request, limits: Limits) -> bytes:
    """The body, read while it streams in and given up on as soon as it passes the limit (a body without
    ``Content-Length``, chunked, is never buffered past ``max_body_bytes``)."""
    check_content_type(request.headers.get("content-type"))
    declared_length(request.headers.get("content-length"), limits)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise BadRequest(413, f"request body passed the limit of {limits.max_body_bytes} bytes while it was "
                                  "streaming in")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_request(body: bytes, limits: Limits, max_k: int) -> Query:
    """The request body (:func:`read_body` has held it to the size limit) as queries and k, or :class:`BadRequest`
    with its status and a one-line reason."""
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(400, f"malformed JSON: {exc}") from None
    except RecursionError:  # "[" * 100000 fits in 1 MiB and exhausts the parser's stack
        raise BadRequest(400, "malformed JSON: nested deeper than the parser allows") from None
    if not isinstance(payload, dict):
        raise BadRequest(422, f"the body must be a JSON object with 'query' or 'queries', got {_kind(payload)}")
    unknown = sorted(set(payload) - set(FIELDS))
    if unknown:
        raise BadRequest(422, f"unknown field(s) {', '.join(map(repr, unknown))}: use {', '.join(FIELDS)}")
    if ("query" in payload) == ("queries" in payload):
        raise BadRequest(422, "give exactly one of 'query' (a string) or 'queries' (a list of strings)")
    if "query" in payload:
        texts = [_text(payload["query"], "query", limits)]
    else:
        queries = payload["queries"]
        if not isinstance(queries, list) or not queries:
            raise BadRequest(422, f"'queries' must be a non-empty list of strings, got {_kind(queries)}")
        if len(queries) > limits.max_queries:
            raise BadRequest(413, f"{len(queries)} queries in one request, the limit is {limits.max_queries}")
        texts = [_text(q, f"queries[{i}]", limits) for i, q in enumerate(queries)]
    k = payload.get("k", min(limits.default_k, max_k))
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= max_k:
        raise BadRequest(422, f"'k' must be an integer from 1 to {max_k}, got {json.dumps(k)}")
    return Query(texts, k)


def _text(value: Any, where: str, limits: Limits) -> str:
    if not isinstance(value, str):
        raise BadRequest(422, f"{where} must be a string, got {_kind(value)}")
    if not value.strip():
        raise BadRequest(422, f"{where} is empty")
    if len(value) > limits.max_chars:
        raise BadRequest(413, f"{where} has {len(value)} characters, the limit is {limits.max_chars}")
    return value


def _kind(value: Any) -> str:
    return "an empty list" if value == [] else {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
                                                int: "a number", float: "a number", type(None): "null"}.get(
        type(value), type(value).__name__)


class Metrics:
    """The service's Prometheus metrics, in a registry of its own (several services in one test process)."""

    def __init__(self, model: str) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

        disable_created_metrics()  # no *_created series: a scrape holds the counts, not their birth times
        self.model, self.registry = model, CollectorRegistry()
        self.requests = Counter("xc_serve_requests", "HTTP requests by endpoint and status code",
                                ["endpoint", "status"], registry=self.registry)
        self.errors = Counter("xc_serve_errors", "requests answered with a 4xx or 5xx, by endpoint and status",
                              ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("xc_serve_request_seconds", "time from request to response, by endpoint",
                                 ["endpoint"], registry=self.registry,
                                 buckets=(.001, .0025, .005, .0075, .01, .015, .02, .025, .035, .05, .075, .1, .25,
                                          .5, 1.0, 2.5))
        self.queries = Counter("xc_serve_queries", "queries answered", registry=self.registry)
        self.batch = Histogram("xc_serve_batch_queries", "queries per model call (requests share calls under load)",
                               registry=self.registry, buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
        self.version = Gauge("xc_serve_model_version", "registry version being served (0: none yet)",
                             ["model", "method"], registry=self.registry)
        self.swaps = Counter("xc_serve_swaps", "versions (or refreshed indexes) swapped in", registry=self.registry)
        self.swap_failures = Counter("xc_serve_swap_failures", "loads or refreshes that failed (the old version kept "
                                     "serving)",
                                     registry=self.registry)
        self.refused = Counter("xc_serve_refused", "requests refused under overload (503 with Retry-After), by "
                               "reason: queue_full, deadline", ["reason"], registry=self.registry)
        self.waiting = Gauge("xc_serve_queue_requests", "requests waiting for the model", registry=self.registry)

    def swapped(self, new: Loaded, _old: Loaded | None) -> None:
        self.version.clear()  # one series: the version serving now
        self.version.labels(model=self.model, method=new.method).set(float(new.version))
        self.swaps.inc()

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


def create_app(live: LiveModel, limits: Limits | None = None, max_batch: int = 64,
               follow_s: float | None = None) -> FastAPI:
    """The FastAPI application over ``live``. Its lifespan owns the rest: the batcher, the thread that follows
    the alias every ``follow_s`` seconds (None: none), and on shutdown the process's copy of the model (uvicorn
    re-raises SIGTERM after its shutdown, so nothing after ``server.run()`` would run)."""
    from contextlib import asynccontextmanager

    from prometheus_client import CONTENT_TYPE_LATEST

    limits = limits or Limits()
    metrics = Metrics(live.model_name)
    live.on_swap, live.on_failure = metrics.swapped, lambda _reason: metrics.swap_failures.inc()
    if live.current is not None:
        metrics.swapped(live.current, None)
    batcher = Batcher(live, max_batch, on_batch=metrics.batch.observe, max_waiting=limits.max_queue)
    metrics.waiting.set_function(batcher.waiting)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        stop = threading.Event()
        if follow_s is not None:
            live.follow(follow_s, stop)
        yield
        stop.set()
        batcher.close()
        shutil.rmtree(live.cache, ignore_errors=True)

    app = FastAPI(title="xc serve", description=__doc__, lifespan=lifespan, docs_url="/docs", redoc_url=None)
    app.state.live, app.state.metrics, app.state.limits = live, metrics, limits

    def reply(endpoint: str, started: float, status: int, body: dict[str, Any],
              headers: dict[str, str] | None = None) -> JSONResponse:
        metrics.requests.labels(endpoint, str(status)).inc()
        if status >= 400:
            metrics.errors.labels(endpoint, str(status)).inc()
        metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
        return JSONResponse(body, status_code=status, headers=headers)

    def refuse(started: float, reason: str, message: str) -> JSONResponse:
        metrics.refused.labels(reason).inc()
        return reply("predict", started, 503, {"error": message}, {"Retry-After": limits.retry_after})

    @app.post("/predict")
    async def predict(request: Request) -> JSONResponse:
        started = time.perf_counter()
        loaded = live.current
        if loaded is None:
            return reply("predict", started, 503, {"error": live.status()["reason"]})
        try:
            body = await asyncio.wait_for(read_body(request, limits), limits.body_timeout_s)
            query = parse_request(body, limits, loaded.model.max_k)
        except BadRequest as bad:
            return reply("predict", started, bad.status, {"error": str(bad)})
        except TimeoutError:
            return reply("predict", started, 408, {"error": f"the request body did not arrive within "
                                                            f"{limits.body_timeout_s:g} s"})
        except ClientDisconnect:  # nobody reads the answer; counted so that a flood of them shows
            return reply("predict", started, 400, {"error": "the client disconnected before its body arrived"})
        try:
            left = limits.deadline_s - (time.perf_counter() - started)
            if left <= 0:  # the deadline passed while the body was read: nothing is queued for it
                raise TimeoutError
            answer = await asyncio.wait_for(asyncio.wrap_future(batcher.submit(query.texts, query.k)), left)
        except OverloadedError as exc:
            return refuse(started, "queue_full", str(exc))
        except TimeoutError:  # cancelling the wait cancels the queued job: the worker skips it
            return refuse(started, "deadline", f"not answered within the {limits.deadline_s:g} s deadline "
                                               "(the service is overloaded): retry later")
        except NotReadyError as exc:
            return reply("predict", started, 503, {"error": str(exc)})
        except Exception as exc:  # a model failure is the server's fault: 500, one line, counted
            return reply("predict", started, 500, {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        metrics.queries.inc(len(query.texts))
        return reply("predict", started, 200, {"model": live.model_name, "version": answer.version,
                                               "method": answer.method, "k": query.k, "results": answer.results})

    @app.get("/health")
    async def health() -> JSONResponse:
        started = time.perf_counter()
        current = live.current
        return reply("health", started, 200, {"status": "ok", "model": live.model_name,
                                              "version": current.version if current else None})

    @app.get("/ready")
    async def ready() -> JSONResponse:
        started = time.perf_counter()
        status = live.status()
        return reply("ready", started, 200 if status["ready"] else 503, status)

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return app
