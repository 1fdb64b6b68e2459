"""Load benchmark of the HTTP service: throughput and p50/p95/p99 latency on loopback.

Starts a real ``trishield serve`` on 127.0.0.1 (a free port) over a fresh KB of the Northwind
demo corpus, then, at 1, 4 and 16 concurrent clients, sends bounded numbers of requests to

* ``POST /v1/search`` (dense, k=5),
* ``POST /v1/ask`` with the extractive reader (all three rings, no LLM),
* ``POST /v1/ask`` with the default local panel (Qwen2.5-0.5B, Gemma 3 270M, extractive;
  gated, the LLM response cache off so every answer is computed),

and prints one table (figures only, never pass/fail); the same figures go to
``benchmarks/results/service_load.json``. Every cell also stops at ``--cell-seconds``.
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
import time
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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_server(kb_dir: Path, max_asks: int) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "trishield.cli", "serve", "--kb", str(kb_dir), "--port",
         str(port), "--no-cache", "--max-concurrent-asks", str(max_asks), "--workers", "16",
         "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=dict(os.environ, HF_HUB_OFFLINE="1"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("the server did not start within 300 s")


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
    options = parser.parse_args()

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
