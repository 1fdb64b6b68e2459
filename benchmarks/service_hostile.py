"""Hostile load on the HTTP service (issue 49, items 7 and 8): slow connections and one key's
flood of asks, against what the other clients see.

Starts a real ``trishield serve`` on 127.0.0.1 over a fresh KB of the Northwind demo corpus,
then, for ``--seconds``:

* **slowloris**: ``--slow-connections`` connections (default 20,000) from
  ``--slow-processes`` client processes (each process's open-files limit is raised to its hard
  limit; 20,000 sockets do not fit one process here), run at ``--nice`` 10 so that on a small
  machine they do not take the server's CPU, as a remote attacker could not. Each sends a
  request head a byte every ``--trickle-s`` seconds and never finishes it; when the server
  closes one, it is opened again after ``--reopen-s`` seconds, so the pressure stays on;
* **one key's asks**: ``--flood-asks`` clients (default 80) asking with one reader key and the
  extractive reader (all three rings, no LLM), each coming back after a 429's
  ``Retry-After``;
* **the other key**: one client with a second reader key alternating ``GET /v1/whoami`` and
  ``POST /v1/ask``, a fresh connection per request (so each also has to be accepted through
  the flood);
* **/healthz** every quarter second, a fresh connection each time.

It prints p50/p99/max of the other key's requests and of ``/healthz``, status counts, the
load average, the slow connections the clients held and reopened, and the server's own
counts from ``/metrics`` (connections closed by reason, asks refused); figures only, to
``benchmarks/results/service_hostile.json``. Requests only ever go to the loopback server
this script started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import platform
import resource
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

from service_load import percentiles, start_serve
from trishield.demo import DEMO_WRITER, corpus_dir, questions
from trishield.kb import KnowledgeBase, load_path
from trishield.provenance.keys import KeyStore

RESULTS = Path(__file__).parent / "results" / "service_hostile.json"
HEALTH_PERIOD_S = 0.25
REQUEST_TIMEOUT_S = 30.0


def _raise_open_files() -> int:
    """This process's open-files limit raised to its hard limit (the client side of 20,000
    connections needs as many descriptors as the server)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# -- the slowloris client processes ---------------------------------------------------------

async def _slow_connection(port: int, trickle_s: float, reopen_s: float, stop: float,
                           counts: Counter) -> None:
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["connect_failed"] += 1
            await asyncio.sleep(reopen_s)
            continue
        counts["opened"] += 1
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            while time.monotonic() < stop:
                try:
                    if await asyncio.wait_for(reader.read(4096), trickle_s) == b"":
                        break  # closed by the server
                except TimeoutError:
                    writer.write(b"a")  # one byte more; the head never ends
                    await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()
        counts["closed_by_server"] += time.monotonic() < stop
        await asyncio.sleep(reopen_s)


async def _slowloris(port: int, connections: int, trickle_s: float, reopen_s: float,
                     seconds: float, report: multiprocessing.Queue) -> None:
    counts: Counter = Counter()
    stop = time.monotonic() + seconds
    tasks = []
    for _ in range(connections):  # ramp up: about a thousand a second per process
        tasks.append(asyncio.create_task(_slow_connection(port, trickle_s, reopen_s, stop,
                                                          counts)))
        if len(tasks) % 100 == 0:
            await asyncio.sleep(0.1)
    while time.monotonic() < stop:
        await asyncio.sleep(0.5)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    report.put({"opened": counts["opened"],
                "closed_by_server": counts["closed_by_server"],
                "connect_failed": counts["connect_failed"]})


def _slowloris_process(port: int, connections: int, trickle_s: float, reopen_s: float,
                       seconds: float, nice: int, report: multiprocessing.Queue) -> None:
    _raise_open_files()
    os.nice(nice)
    asyncio.run(_slowloris(port, connections, trickle_s, reopen_s, seconds, report))


# -- the measured clients -------------------------------------------------------------------

def _counted(values: list[float]) -> dict[str, float]:
    return {"n": len(values)} | percentiles(values)


def _metrics(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=REQUEST_TIMEOUT_S).text
    wanted = ("trishield_connections_closed_total", "trishield_asks_refused_total",
              "trishield_accept_errors_total", "trishield_connections_limit",
              "trishield_connections_open")
    found = {}
    for line in text.splitlines():
        if line.startswith(wanted):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def run(options: argparse.Namespace) -> dict[str, object]:
    asked = [q.question for q in questions()]
    latencies: dict[str, list[float]] = {"whoami": [], "ask": [], "healthz": []}
    statuses: dict[str, Counter] = {name: Counter() for name in
                                    ("whoami", "ask", "healthz", "flood")}
    lock = threading.Lock()
    stop = threading.Event()
    loads: list[tuple[float, float, float]] = []
    held: list[float] = []

    def record(name: str, status: str, elapsed: float | None) -> None:
        with lock:
            statuses[name][status] += 1
            if elapsed is not None and name in latencies:
                latencies[name].append(elapsed)

    def once(client: httpx.Client, name: str, method: str, path: str, token: str | None,
             body: dict | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        started = time.perf_counter()
        try:
            response = client.request(method, path, headers=headers, json=body)
            status = str(response.status_code)
        except httpx.TimeoutException:
            status = "timeout"
        except httpx.TransportError as error:
            status = type(error).__name__
        # a timeout counts at the timeout: the p99 never looks better for losing requests
        record(name, status, time.perf_counter() - started)

    with tempfile.TemporaryDirectory(prefix="trishield-hostile-") as scratch:
        kb_dir = Path(scratch) / "kb"
        with KnowledgeBase.open(kb_dir, create=True) as kb:
            kb.ingest(load_path(corpus_dir()).documents, tier="trusted", writer=DEMO_WRITER)
        store = KeyStore(kb_dir)
        flooder = store.create_key("flooder", "reader", "neutral")[1]
        other = store.create_key("other", "reader", "neutral")[1]
        process, url, log = start_serve(kb_dir, list(options.serve_args))
        port = int(url.rsplit(":", 1)[1])

        def flood(number: int) -> None:
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S * 10,
                              headers={"Authorization": f"Bearer {flooder}"}) as client:
                while not stop.is_set():
                    try:
                        response = client.post("/v1/ask", json={
                            "question": asked[number % len(asked)], "panel": ["extractive"]})
                    except httpx.TransportError as error:
                        record("flood", type(error).__name__, None)
                        stop.wait(1.0)
                        continue
                    record("flood", str(response.status_code), None)
                    if response.status_code in (429, 503):
                        stop.wait(float(response.headers.get("retry-after", "1")))

        def fresh_connections() -> httpx.Client:
            """A client that opens a new connection for every request: each must be
            accepted through the flood, as a new client's would."""
            return httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S,
                                limits=httpx.Limits(max_keepalive_connections=0))

        def other_key() -> None:
            number = 0
            with fresh_connections() as client:
                while not stop.is_set():
                    once(client, "whoami", "GET", "/v1/whoami", other, None)
                    once(client, "ask", "POST", "/v1/ask", other,
                         {"question": asked[number % len(asked)], "panel": ["extractive"]})
                    number += 1
                    stop.wait(0.25)

        def health() -> None:
            with fresh_connections() as client:
                while not stop.is_set():
                    once(client, "healthz", "GET", "/healthz", None, None)
                    stop.wait(HEALTH_PERIOD_S)

        def load_average() -> None:
            """The load average, and the connections the server holds (its own gauge)."""
            while not stop.is_set():
                loads.append(os.getloadavg())
                with contextlib.suppress(httpx.HTTPError):  # the measured clients count it
                    held.append(_metrics(url).get("trishield_connections_open", 0.0))
                stop.wait(5.0)

        report: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
        per_process = -(-options.slow_connections // options.slow_processes)
        total = options.seconds + options.ramp_seconds
        slow = [multiprocessing.get_context("fork").Process(
            target=_slowloris_process, args=(port, per_process, options.trickle_s,
                                             options.reopen_s, total, options.nice, report))
            for _ in range(options.slow_processes if options.slow_connections else 0)]
        threads = [threading.Thread(target=load_average, daemon=True)]
        try:
            for worker in slow:
                worker.start()
            time.sleep(options.ramp_seconds)  # the slow connections open first
            threads += [threading.Thread(target=flood, args=(n,), daemon=True)
                        for n in range(options.flood_asks)]
            threads += [threading.Thread(target=other_key, daemon=True),
                        threading.Thread(target=health, daemon=True)]
            for thread in threads:
                thread.start()
            stop.wait(options.seconds)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=REQUEST_TIMEOUT_S * 2)
            clients = [report.get(timeout=120) for _ in slow]
            for worker in slow:
                worker.join(timeout=60)
            server_counts = _metrics(url) if process.poll() is None else {}
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
    server_log = "".join(log)
    return {
        "seconds": options.seconds, "slow_connections": options.slow_connections,
        "slow_processes": options.slow_processes, "slow_nice": options.nice,
        "reopen_s": options.reopen_s, "trickle_s": options.trickle_s,
        "flood_asks": options.flood_asks,
        "serve_args": options.serve_args,
        "other_key": {"whoami": _counted(latencies["whoami"]) | {
                          "statuses": dict(statuses["whoami"])},
                      "ask": _counted(latencies["ask"]) | {
                          "statuses": dict(statuses["ask"])}},
        "healthz": _counted(latencies["healthz"]) | {"statuses": dict(statuses["healthz"])},
        "flood_statuses": dict(statuses["flood"]),
        "server_connections_open": {"max": max(held, default=None),
                                    "median": float(np.median(held)) if held else None},
        "slow_clients": {"opened": sum(c["opened"] for c in clients),
                         "closed_by_server": sum(c["closed_by_server"] for c in clients),
                         "connect_failed": sum(c["connect_failed"] for c in clients)},
        "server": server_counts,
        "server_log": {"lines": len(log), "tracebacks": server_log.count("Traceback"),
                       "tail": [line.rstrip() for line in log[-5:]]},
        "load_average_1min": {"min": round(min(one for one, _, _ in loads), 2),
                              "max": round(max(one for one, _, _ in loads), 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--ramp-seconds", type=float, default=15.0,
                        help="Time the slow connections get to open before the measurement.")
    parser.add_argument("--slow-connections", type=int, default=20_000)
    parser.add_argument("--slow-processes", type=int, default=2)
    parser.add_argument("--trickle-s", type=float, default=5.0,
                        help="Seconds between the bytes of each slow request head.")
    parser.add_argument("--reopen-s", type=float, default=1.0,
                        help="Seconds before a slow connection the server closed is reopened.")
    parser.add_argument("--nice", type=int, default=10,
                        help="Niceness of the slow clients' processes: on a machine of two "
                             "cores they would otherwise take the server's CPU, where a real "
                             "attacker's connections cost it only what the server does with "
                             "them (0: compete as equals).")
    parser.add_argument("--flood-asks", type=int, default=80)
    parser.add_argument("--serve-arg", dest="serve_args", action="append", default=[],
                        help="An argument for `trishield serve` (repeatable), e.g. "
                             "--serve-arg=--max-connections --serve-arg=16000.")
    options = parser.parse_args()
    _raise_open_files()
    figures = run(options)
    other, health = figures["other_key"], figures["healthz"]
    held = figures["server_connections_open"]
    print(f"{figures['slow_connections']:,} slow connections "
          f"({figures['slow_clients']['opened']:,} opened, "
          f"{figures['slow_clients']['closed_by_server']:,} closed by the server; the server "
          f"held {held['median']} open, at most {held['max']}), "
          f"{figures['flood_asks']} asking clients on one key, {figures['seconds']:g} s; "
          f"load average {figures['load_average_1min']['min']}-"
          f"{figures['load_average_1min']['max']}")
    for name, row in (("other key whoami", other["whoami"]), ("other key ask", other["ask"]),
                      ("/healthz", health)):
        print(f"{name:<17} n {row['n']:>5}  p50 {row['p50_ms']:>9.1f} ms  p99 "
              f"{row['p99_ms']:>9.1f} ms  max {row['max_ms']:>9.1f} ms  {row['statuses']}")
    print(f"flooding key: {figures['flood_statuses']}")
    print(f"server: {figures['server']}")
    print(f"server log: {figures['server_log']['lines']} lines, "
          f"{figures['server_log']['tracebacks']} tracebacks")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": {"cpus": os.cpu_count(),
                                               "python": platform.python_version()},
                                   **figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
