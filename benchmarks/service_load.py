"""Load benchmark of the HTTP service: throughput and p50/p95/p99 latency on loopback.

Starts a real ``trishield serve`` on 127.0.0.1 (a free port) over a fresh KB of the Northwind
demo corpus, then, at 1, 4 and 16 concurrent clients, sends bounded numbers of requests to

* ``POST /v1/search`` (dense, k=5),
* ``POST /v1/ask`` with the extractive reader (all three rings, no LLM),
* ``POST /v1/ask`` with the default local panel (Qwen2.5-0.5B, Gemma 3 270M, extractive;
  gated, the LLM response cache off so every answer is computed),

and prints one table (figures only, never pass/fail); the same figures go to
``benchmarks/results/service_load.json``. Every cell also stops at ``--cell-seconds``.

``--mixed SECONDS`` runs the mixed load instead (issue 17): for that long, clients asking with
the extractive reader, clients searching, a writer posting maximum-size documents (as large as
``--max-body-bytes`` allows, several at once) and a poller timing ``GET /healthz`` every
quarter second; it prints ``/healthz`` p50/p99/max and every endpoint's status counts (5xx
and 500 apart), to ``benchmarks/results/service_load_mixed.json``.
Requests only ever go to the loopback server this script started.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

from trishield.demo import DEMO_WRITER, corpus_dir, questions
from trishield.kb import KnowledgeBase, load_path
from trishield.provenance.keys import KeyStore

CONCURRENCY = (1, 4, 16)
REQUEST_TIMEOUT = 1800.0
"""Sixteen local-panel asks queued behind two ask slots wait minutes on 2 cores."""
RESULTS = Path(__file__).parent / "results" / "service_load.json"
MIXED_RESULTS = Path(__file__).parent / "results" / "service_load_mixed.json"
HEALTH_PERIOD_S = 0.25
HEALTH_TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_serve(kb_dir: Path, args: list[str]) -> tuple[subprocess.Popen, str, list[str]]:
    """``trishield serve --kb KB_DIR ARGS`` on a free port, once ``/healthz`` answers: the
    process, its URL and its log lines as they come (shared with service_hostile.py)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "trishield.cli", "serve", "--kb", str(kb_dir), "--port",
         str(port), "--no-cache", "--log-level", "warning", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"))
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(process.stderr), daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}: {''.join(log)}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url, log
        except httpx.TransportError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("the server did not start within 300 s")


def _start_server(kb_dir: Path, max_asks: int,
                  extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    process, url, _ = start_serve(kb_dir, [
        "--max-concurrent-asks", str(max_asks), "--workers", "16",
        # one key plays every client here: this measures capacity, not the share of a key
        # among others (benchmarks/service_hostile.py does), so the key may queue them all
        "--asks-per-key", "1000", "--searches-per-key", "1000", "--ask-queue", "1000",
        *extra])
    return process, url


def _run_cell(url: str, token: str, path: str, bodies: list[dict], clients: int,
              total: int, seconds: float) -> dict[str, object]:
    """``total`` requests from ``clients`` threads (each its own connection), bounded in time."""
    deadline = time.monotonic() + seconds
    latencies: list[float] = []
    errors: list[str] = []
    counter = iter(range(total))

    def client_loop() -> None:
        with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT,
                          headers={"Authorization": f"Bearer {token}"}) as client:
            for number in counter:
                if time.monotonic() > deadline:
                    return
                started = time.perf_counter()
                try:
                    response = client.post(path, json=bodies[number % len(bodies)])
                except httpx.TransportError as error:  # counted, never fatal
                    errors.append(f"{type(error).__name__}: {error}")
                    continue
                elapsed = time.perf_counter() - started
                if response.status_code == 200:
                    latencies.append(elapsed)
                else:
                    errors.append(f"{response.status_code}: {response.text[:120]}")

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for future in [pool.submit(client_loop) for _ in range(clients)]:
            future.result()
    wall = time.perf_counter() - started
    values = np.array(latencies) * 1000 if latencies else np.array([np.nan])
    return {"clients": clients, "ok": len(latencies), "errors": len(errors),
            "error_samples": errors[:3], "seconds": round(wall, 2),
            "throughput_rps": round(len(latencies) / wall, 2) if wall else 0.0,
            "p50_ms": round(float(np.percentile(values, 50)), 1),
            "p95_ms": round(float(np.percentile(values, 95)), 1),
            "p99_ms": round(float(np.percentile(values, 99)), 1)}


def _maximum_document(number: int, max_body_bytes: int) -> dict[str, object]:
    """One document as large as the body limit allows (plausible policy prose, distinct per
    ``number``), wrapped as an ingest body."""
    sentences, size, line = [], 0, 0
    budget = max_body_bytes - 512  # the JSON around the text
    while True:
        sentence = (f"Clause {number}.{line}: items bought in store {line % 97} may be "
                    f"exchanged within {10 + line % 50} days when unused and with a receipt. ")
        if size + len(sentence) > min(budget, 1_000_000):
            break
        sentences.append(sentence)
        size += len(sentence)
        line += 1
    return {"documents": [{"id": f"load-max-{number}", "text": "".join(sentences)}]}


def percentiles(values: list[float]) -> dict[str, float]:
    data = np.array(values) * 1000 if values else np.array([np.nan])
    return {"p50_ms": round(float(np.percentile(data, 50)), 1),
            "p99_ms": round(float(np.percentile(data, 99)), 1),
            "max_ms": round(float(np.max(data)), 1)}


def run_mixed(seconds: float, *, askers: int, searchers: int, writers: int,
              max_body_bytes: int, max_asks: int) -> dict[str, object]:
    """The mixed load of issue 17 against a fresh server; returns the figures."""
    asked = [q.question for q in questions()]
    statuses: dict[str, Counter] = {name: Counter() for name in
                                    ("healthz", "search", "ask", "ingest")}
    latencies: dict[str, list[float]] = {name: [] for name in statuses}
    sent: Counter = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def record(name: str, status: str, elapsed: float) -> None:
        with lock:
            statuses[name][status] += 1
            latencies[name].append(elapsed)

    with tempfile.TemporaryDirectory(prefix="trishield-mixed-") as scratch:
        kb_dir = Path(scratch) / "kb"
        with KnowledgeBase.open(kb_dir, create=True) as kb:
            kb.ingest(load_path(corpus_dir()).documents, tier="trusted", writer=DEMO_WRITER)
        store = KeyStore(kb_dir)
        reader = store.create_key("load-reader", "reader", "neutral")[1]
        writer = store.create_key("load-writer", "writer", "neutral")[1]
        process, url = _start_server(kb_dir, max_asks,
                                     ("--max-body-bytes", str(max_body_bytes)))

        def loop(name: str, token: str | None, method: str, path: str, bodies: list,
                 timeout: float, pause: float = 0.0) -> None:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            with httpx.Client(base_url=url, timeout=timeout, headers=headers) as client:
                number = 0
                while not stop.is_set():
                    body = bodies[number % len(bodies)] if bodies else None
                    if callable(body):
                        body = body(number)
                    number += 1
                    with lock:
                        sent[name] += 1
                    started = time.perf_counter()
                    try:
                        response = client.request(method, path, json=body)
                        status = str(response.status_code)
                    except httpx.TimeoutException:
                        status = "timeout"
                    except httpx.TransportError as error:
                        status = type(error).__name__
                    if stop.is_set() and not status.isdigit():
                        return  # cut off by the end of the run, not an answer
                    record(name, status, time.perf_counter() - started)
                    stop.wait(pause)

        written = iter(range(10**9))
        jobs = [("healthz", None, "GET", "/healthz", [], HEALTH_TIMEOUT_S, HEALTH_PERIOD_S)]
        jobs += [("ask", reader, "POST", "/v1/ask",
                  [{"question": q, "panel": ["extractive"]} for q in asked], 300.0)] * askers
        jobs += [("search", reader, "POST", "/v1/search",
                  [{"query": q, "k": 5} for q in asked], 300.0)] * searchers
        jobs += [("ingest", writer, "POST", "/v1/documents",
                  [lambda _: _maximum_document(next(written), max_body_bytes)],
                  seconds + 600.0)] * writers
        threads = [threading.Thread(target=loop, args=job, daemon=True) for job in jobs]
        started = time.perf_counter()
        try:
            for thread in threads:
                thread.start()
            stop.wait(seconds)
        finally:
            stop.set()
            wall = time.perf_counter() - started
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:  # a write still embedding
                process.kill()
                process.wait(timeout=30)
    figures: dict[str, object] = {"seconds": round(wall, 1), "askers": askers,
                                  "searchers": searchers, "writers": writers,
                                  "max_body_bytes": max_body_bytes}
    for name in statuses:
        counts = statuses[name]
        figures[name] = {"requests": sum(counts.values()), "statuses": dict(counts),
                         "unanswered_at_end": sent[name] - sum(counts.values()),
                         "5xx": sum(n for s, n in counts.items() if s.startswith("5")),
                         "500": counts.get("500", 0)} | percentiles(latencies[name])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search-requests", type=int, default=300)
    parser.add_argument("--extractive-requests", type=int, default=120)
    parser.add_argument("--local-requests", type=int, default=12,
                        help="per concurrency level (each answer takes seconds on 2 cores)")
    parser.add_argument("--cell-seconds", type=float, default=120.0)
    parser.add_argument("--max-concurrent-asks", type=int, default=2)
    parser.add_argument("--clients", type=int, action="append",
                        help="Concurrency levels (repeatable); default 1, 4 and 16.")
    parser.add_argument("--only", choices=["search", "extractive", "local"], action="append",
                        help="Run only these rows (repeatable); default all three.")
    parser.add_argument("--mixed", type=float, metavar="SECONDS",
                        help="Run the mixed load (asks, searches, a writer of maximum-size "
                             "documents, /healthz timed) for SECONDS instead of the table.")
    parser.add_argument("--askers", type=int, default=4)
    parser.add_argument("--searchers", type=int, default=4)
    parser.add_argument("--writers", type=int, default=3,
                        help="Concurrent posts of maximum-size documents (mixed load).")
    parser.add_argument("--max-body-bytes", type=int, default=512 * 1024,
                        help="The server's body limit, and so the size of each write "
                             "(mixed load; default: the service's default).")
    options = parser.parse_args()

    if options.mixed:
        figures = run_mixed(options.mixed, askers=options.askers,
                            searchers=options.searchers, writers=options.writers,
                            max_body_bytes=options.max_body_bytes,
                            max_asks=options.max_concurrent_asks)
        health = figures["healthz"]
        print(f"mixed load, {figures['seconds']} s: /healthz p50 {health['p50_ms']} ms, "
              f"p99 {health['p99_ms']} ms, max {health['max_ms']} ms")
        for name in ("healthz", "search", "ask", "ingest"):
            row = figures[name]
            print(f"{name:<8} answered {row['requests']:>5}  5xx {row['5xx']:>4}  "
                  f"500 {row['500']:>3}  p50 {row['p50_ms']:>9.1f} ms  "
                  f"p99 {row['p99_ms']:>9.1f} ms  statuses {row['statuses']}  "
                  f"in flight at the end {row['unanswered_at_end']}")
        MIXED_RESULTS.parent.mkdir(exist_ok=True)
        MIXED_RESULTS.write_text(json.dumps({"machine": {"cpus": os.cpu_count(),
                                                         "python": platform.python_version()},
                                             **figures}, indent=2) + "\n")
        return

    asked = [q.question for q in questions()]
    every = {
        "search": ("/v1/search", "search (dense, k=5)", options.search_requests,
                   [{"query": q, "k": 5} for q in asked]),
        "extractive": ("/v1/ask", "ask, extractive reader (full)", options.extractive_requests,
                       [{"question": q, "panel": ["extractive"]} for q in asked]),
        "local": ("/v1/ask", "ask, local panel (full, gated)", options.local_requests,
                  [{"question": q} for q in asked]),
    }
    scenarios = [every[name] for name in (options.only or every)]
    with tempfile.TemporaryDirectory(prefix="trishield-load-") as scratch:
        kb_dir = Path(scratch) / "kb"
        with KnowledgeBase.open(kb_dir, create=True) as kb:
            kb.ingest(load_path(corpus_dir()).documents, tier="trusted", writer=DEMO_WRITER)
        _, token = KeyStore(kb_dir).create_key("load", "reader", "neutral")
        process, url = _start_server(kb_dir, options.max_concurrent_asks)
        rows = []
        try:
            for path, label, total, bodies in scenarios:
                # one untimed request first: loads the panel's models
                httpx.post(f"{url}{path}", json=bodies[0], timeout=REQUEST_TIMEOUT,
                           headers={"Authorization": f"Bearer {token}"})
                for clients in options.clients or CONCURRENCY:
                    row = {"endpoint": label} | _run_cell(url, token, path, bodies, clients,
                                                          total, options.cell_seconds)
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:  # an ask still inside a model
                process.kill()
                process.wait(timeout=30)
    header = (f"{'endpoint':<34} {'clients':>7} {'ok':>5} {'err':>4} {'req/s':>8} "
              f"{'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['endpoint']:<34} {row['clients']:>7} {row['ok']:>5} {row['errors']:>4} "
              f"{row['throughput_rps']:>8.2f} {row['p50_ms']:>9.1f} {row['p95_ms']:>9.1f} "
              f"{row['p99_ms']:>9.1f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": {"cpus": os.cpu_count(),
                                               "python": platform.python_version()},
                                   "max_concurrent_asks": options.max_concurrent_asks,
                                   "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
