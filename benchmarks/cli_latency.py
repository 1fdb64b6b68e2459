"""Latency of ``trishield search`` and ``trishield ask``: cold (local) vs warm (``--server``).

Each local call loads what it needs (the embedder, the KB's indexes, the panel) before it
retrieves anything; with ``--server URL`` the same command asks a running ``trishield serve``
that loaded them once. This script measures both, end to end, as a user sees them: the
wall-clock time of the real ``trishield`` command in a fresh process.

It builds a small KB from the Northwind demo corpus (or uses ``--kb``), creates a reader key,
then for each of ``search`` and ``ask`` (extractive reader by default: ``--panel`` names
another, e.g. ``gemma3-270m``, the smallest local model):

1. **cold**: ``--runs`` calls with ``--kb`` (the questions rotate through the demo's);
2. **warm**: starts ``trishield serve`` on a free loopback port (its start-up time is
   printed: paid once), then ``--runs`` calls with ``--server``;
3. **HTTP only**: the same requests straight from this process (no CLI start-up), to show
   how much of a warm call is the server and how much is starting Python and the CLI;

plus ``trishield --help`` (the floor: Python and the CLI's imports). It prints one table
(median, min and max seconds; figures only, never pass/fail) and writes the same figures to
``benchmarks/results/cli_latency-PANEL.json``. The LLM response cache is off on both paths
(``--no-cache``), so no answer comes from an earlier call. Requests only go to the loopback
server it started.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/cli_latency.py [--runs 3] [--panel extractive]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from trishield.demo import DEMO_WRITER, corpus_dir, questions
from trishield.kb import KnowledgeBase, load_path
from trishield.provenance.keys import KeyStore

RESULTS = Path(__file__).parent / "results"
CLI = [sys.executable, "-m", "trishield.cli"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False,
                          timeout=1800)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[2:])} failed ({done.returncode}): "
                         f"{done.stderr.strip()[-500:]}")
    return elapsed


def _summary(values: list[float]) -> dict[str, float | int]:
    return {"runs": len(values), "median_s": round(statistics.median(values), 3),
            "min_s": round(min(values), 3), "max_s": round(max(values), 3)}


def _start_server(kb_dir: Path, panel: str,
                  env: dict[str, str]) -> tuple[subprocess.Popen, str, float]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen([*CLI, "serve", "--kb", str(kb_dir), "--port", str(port),
                                "--log-level", "warning", "--no-cache", "--panel", panel],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url, time.perf_counter() - started
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the server did not start within 600 s")


def measure(kb_dir: Path, runs: int, panel: str) -> dict[str, object]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("TRISHIELD_OTEL", None)  # telemetry off, as by default
    token = KeyStore(kb_dir).create_key(f"latency-{time.time_ns()}", "reader", "neutral")[1]
    asked = [q.question for q in questions()]
    queries = [asked[n % len(asked)] for n in range(runs)]
    search = [["search", q, "-k", "5"] for q in queries]
    ask = [["ask", q, "--panel", panel] for q in queries]
    uncached = ["--no-cache"]  # the server too: no answer comes from an earlier run's cache
    figures: dict[str, object] = {}
    figures["cli_help"] = _summary([_timed([*CLI, "--help"], env) for _ in range(runs)])
    for name, calls, extra in (("search", search, []), ("ask", ask, uncached)):
        figures[f"{name}_cold"] = _summary([
            _timed([*CLI, *call, *extra, "--kb", str(kb_dir)], env) for call in calls])
    process, url, startup = _start_server(kb_dir, panel, env)
    try:
        figures["serve_startup_s"] = round(startup, 3)
        for name, calls in (("search", search), ("ask", ask)):
            figures[f"{name}_warm"] = _summary([
                _timed([*CLI, *call, "--server", url, "--token", token], env)
                for call in calls])
        with httpx.Client(base_url=url, timeout=1800,
                          headers={"Authorization": f"Bearer {token}"}) as client:
            for name, path, bodies in (
                    ("search", "/v1/search", [{"query": q, "k": 5} for q in queries]),
                    ("ask", "/v1/ask", [{"question": q, "panel": [panel]} for q in queries])):
                times = []
                for body in bodies:
                    started = time.perf_counter()
                    response = client.post(path, json=body)
                    times.append(time.perf_counter() - started)
                    if response.status_code != 200:
                        raise SystemExit(f"{path}: HTTP {response.status_code} "
                                         f"{response.text[:300]}")
                figures[f"{name}_http"] = _summary(times)
    finally:
        process.terminate()
        process.wait(timeout=60)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="calls per cell (default 3)")
    parser.add_argument("--panel", default="extractive",
                        help="the one panel member `ask` uses (default extractive: no LLM)")
    parser.add_argument("--kb", type=Path, help="an existing KB (default: the demo corpus in "
                                                "a temporary directory)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    print(f"# {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="trishield-cli-latency-") as scratch:
        kb_dir = args.kb
        if kb_dir is None:
            kb_dir = Path(scratch) / "kb"
            with KnowledgeBase.open(kb_dir, create=True) as kb:
                kb.ingest(load_path(corpus_dir()).documents, tier="trusted",
                          writer=DEMO_WRITER)
        figures = measure(kb_dir, args.runs, args.panel)
    figures |= {"panel": args.panel, "load_average_end": round(os.getloadavg()[0], 2),
                "cpus": os.cpu_count()}
    print(f"\n{'cell':<14} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7}")
    for cell in ("cli_help", "search_cold", "search_warm", "search_http", "ask_cold",
                 "ask_warm", "ask_http"):
        row = figures[cell]
        print(f"{cell:<14} {row['runs']:>4} {row['median_s']:>9.3f} {row['min_s']:>7.3f} "
              f"{row['max_s']:>7.3f}")
    print(f"serve start-up (once): {figures['serve_startup_s']:.2f} s; ask panel: "
          f"{args.panel}; load average at the end {figures['load_average_end']}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"cli_latency-{Path(args.panel).name}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"# figures written to {out}")


if __name__ == "__main__":
    main()
