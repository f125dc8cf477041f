"""``xc serve`` against hostile input and overload (issue #41, item 1).

    .venv/bin/python benchmarks/bench_hostile.py --home ~/.xc --dataset synthetic [--target champion]

One served version (``xc serve --version N`` in a subprocess, stopped by PID), two parts:

- **Hostile input**: 1,000 requests that must each be refused in one line — a body declared far over the limit
  (refused before it is sent), a chunked body over the limit with no ``Content-Length`` (refused while it
  streams), JSON nested 100,000 deep, a non-JSON content type, malformed JSON — in turns, on fresh connections.
  The server's resident memory (``VmRSS``) is read before and after; the goal is after ≤ before × 1.10, and every
  answer the status its kind must get.
- **Overload**: ``--clients`` threads send ``--batch``-query requests as fast as they are answered for
  ``--seconds`` (backing off for ``Retry-After`` when refused, as a client should), against a queue of
  ``--max-queue`` requests and a ``--deadline-ms`` deadline. Every request is
  timed, refused ones included; the goal is no unbounded wait: the slowest answer ≤ deadline + 100 ms, and every
  answer a 200 or a 503 with ``Retry-After``. ``/metrics``' refusal counts are read back beside the client's.

JSON: benchmarks/results/serve_hostile_<dataset>.json (overwritten); a summary line on stdout.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from xc_core.measure import machine, rss_mb
from xc_core.provenance import checkout_stamp, write_result
from xc_core.serving.load import ServeProcess, http_get, raw_post, registry_targets

CHUNK = b" " * 65536


def _json(body: bytes) -> dict[str, Any]:
    return {"Content-Type": "application/json", "Content-Length": str(len(body))}


def _chunked(connection: http.client.HTTPConnection, chunks: int) -> None:
    for _ in range(chunks):
        connection.send(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
    connection.send(b"0\r\n\r\n")


#: kind → (headers, what to send, the status it must get)
HOSTILE: dict[str, tuple[dict[str, str], Any, int]] = {
    "declared_1GiB": ({"Content-Type": "application/json", "Content-Length": str(1 << 30)}, lambda c: None, 413),
    "chunked_1.25MiB_no_length": ({"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
                                  lambda c: _chunked(c, 20), 413),
    "nested_100k": (_json(b"[" * 100_000), lambda c: c.send(b"[" * 100_000), 400),
    "form_content_type": ({"Content-Type": "application/x-www-form-urlencoded", "Content-Length": "11"},
                          lambda c: c.send(b"query=shoes"), 415),
    "malformed": (_json(b'{"query": "shoes"'), lambda c: c.send(b'{"query": "shoes"'), 400),
}


def resident_mb(pid: int) -> float:
    """The server's resident memory now; it must be alive (a bench that lost its server stops here)."""
    found = rss_mb(pid)
    if found is None:
        raise RuntimeError(f"no VmRSS for pid {pid}: the server is gone")
    return found


def hostile(server: ServeProcess, n: int) -> dict[str, Any]:
    pid = server.proc.pid  # type: ignore[union-attr]
    before = resident_mb(pid)
    kinds = list(HOSTILE)
    wrong: Counter[str] = Counter()
    one_line = True
    started = time.perf_counter()
    for i in range(n):
        kind = kinds[i % len(kinds)]
        headers, send, want = HOSTILE[kind]
        status, _, body = raw_post(server.port, headers, send)
        if status != want:
            wrong[f"{kind}: {status}"] += 1
        one_line &= "\n" not in json.loads(body).get("error", "\n")
    seconds = time.perf_counter() - started
    after = resident_mb(pid)
    return {"requests": n, "kinds": kinds, "seconds": round(seconds, 1), "rss_before_mb": before,
            "rss_after_mb": after, "rss_ratio": round(after / before, 3), "wrong_status": dict(wrong),
            "every_error_one_line": one_line, "goal_rss_within_10pct": after <= before * 1.10}


def overload(server: ServeProcess, texts: list[str], clients: int, batch: int, seconds: float,
             deadline_ms: float) -> dict[str, Any]:
    answers: list[tuple[int, float, bool]] = []  # status, seconds, Retry-After present
    stop = time.perf_counter() + seconds

    def client(offset: int) -> None:
        body = json.dumps({"queries": [texts[(offset + j) % len(texts)] for j in range(batch)], "k": 10}).encode()
        while time.perf_counter() < stop:
            sent = time.perf_counter()
            status, headers, _ = raw_post(server.port, _json(body), lambda c: c.send(body))
            answers.append((status, time.perf_counter() - sent, headers.get("Retry-After") is not None))
            if status == 503 and headers.get("Retry-After"):  # a well-behaved client backs off as told
                time.sleep(min(float(headers["Retry-After"]), max(stop - time.perf_counter(), 0)))

    threads = [threading.Thread(target=client, args=(i * batch,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    metrics = http_get(server.port, "/metrics")[1].decode()
    refused = {line.split('reason="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
               for line in metrics.splitlines() if line.startswith("xc_serve_refused_total{")}
    statuses = Counter(str(s) for s, _, _ in answers)
    slowest_ms = max(t for _, t, _ in answers) * 1000
    return {"clients": clients, "batch": batch, "seconds": seconds, "requests": len(answers),
            "statuses": dict(statuses), "refused_by_reason": refused,
            "answered_queries_per_s": round(statuses["200"] * batch / seconds, 1),
            "every_503_has_retry_after": all(r for s, _, r in answers if s == 503),
            "max_latency_ms": round(slowest_ms, 1),
            "p50_ms_200": _percentile([t for s, t, _ in answers if s == 200], 50),
            "p99_ms_200": _percentile([t for s, t, _ in answers if s == 200], 99),
            "goal_max_latency_ms": deadline_ms + 100, "goal_met": slowest_ms <= deadline_ms + 100
            and set(statuses) <= {"200", "503"}}


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--target", default="champion", help="a registered method's newest version, or champion")
    parser.add_argument("--hostile", type=int, default=1000, help="hostile requests")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--max-queue", type=int, default=4)
    parser.add_argument("--deadline-ms", type=float, default=250.0)
    args = parser.parse_args()

    from xc_core.datasets.container import XCDataset
    from xc_core.paths import dataset_slug

    target = registry_targets(args.home, args.dataset, [args.target])[0]
    test_texts = XCDataset.load(args.home / "datasets" / dataset_slug(args.dataset)).test_texts
    texts = [t for t in test_texts if len(t) <= 512][:512]
    options = ("--max-queue", str(args.max_queue), "--deadline-ms", str(args.deadline_ms))
    with ServeProcess(args.home, args.dataset, target["version"], 300.0, options) as server:
        result = {"machine": machine(), "code": checkout_stamp(), "target": target, "server": {"options": options},
                  "hostile": hostile(server, args.hostile),
                  "overload": overload(server, texts, args.clients, args.batch, args.seconds, args.deadline_ms)}
    result["server"].update(server.facts)
    out = Path(__file__).resolve().parent / "results" / f"serve_hostile_{args.dataset}.json"
    write_result(out, json.dumps(result, indent=1) + "\n")
    h, o = result["hostile"], result["overload"]
    print(f"hostile: {h['requests']} requests, wrong {h['wrong_status'] or 'none'}, RSS {h['rss_before_mb']} → "
          f"{h['rss_after_mb']} MiB (×{h['rss_ratio']}); overload: {o['requests']} requests {o['statuses']}, "
          f"slowest {o['max_latency_ms']} ms (goal ≤ {o['goal_max_latency_ms']:g}), refused {o['refused_by_reason']}"
          f" → {out}")


if __name__ == "__main__":
    main()
