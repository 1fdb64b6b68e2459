"""Speed a person feels, in one run: encoders, ingest, start-up, cold vs warm, screen().

Prints, each as a ratio to its limit (or to the baseline measured in the same run), with the
1-minute load average before and after:

1. encoder alone, chunks/s: all-MiniLM-L6-v2 (fp32, torch; the default) and
   all-MiniLM-L6-v2-int8 (ONNX Runtime), on the same seeded wiki5k passages, their slices
   interleaved (load from other processes hits both alike); ratio int8 / fp32;
2. ``KnowledgeBase.ingest`` of the same passages into a fresh KB per encoder, with Ring 1's
   guard and the CLI's 30 s commits (and, for fp32, the former 200-document batches):
   chunks/s, ratio to its encoder alone on the same chunks (limit >= 0.85), the longest
   stretch between two commits (limit 30 s) and when the first ETA came;
3. start-up: ``trishield --help`` and ``trishield documents list`` (median of 3 runs, wall
   seconds, limit 1 s idle);
4. cold vs warm: ``search`` and ``ask`` (``--defense none --panel extractive``: the models
   of Rings 1-3 would dominate) run locally (``--local``, cold), through ``--server`` (with
   an API key), and with ``--kb`` alone and no key while the server runs (found through the
   KB directory, answered with the run's local key); the warm ``--kb`` limit is 1.10x
   ``--server``;
5. ``trishield.screen()`` of 20 passages with their embeddings given (warm, limit 0.5 s),
   and without them for comparison;
6. a cold local ``ask`` as a user types it (``full``, the default panel and second reader,
   an empty response cache): seconds, and which models the process loaded (the gate needs
   the first member only; the others load when asked). ``--no-llm`` skips it (a minute or
   more on two cores).

    PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/speed.py      # ~3-5 min
    PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/speed.py --full
                                     # the 2,000-passage folder (ingest: tens of minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from trishield.kb import Document, IngestProgress, KnowledgeBase
from trishield.kb.datasets import wiki5k_documents
from trishield.models.embedders import load_embedder

FP32, INT8 = "all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8"
SLICE = 64
SOURCE = Path(__file__).resolve().parents[1] / "src"


def load() -> float:
    return os.getloadavg()[0]


def say(text: str) -> None:
    print(text, flush=True)


def ratio(value: float, limit: float, *, at_most: bool = True) -> str:
    verdict = (value <= limit) if at_most else (value >= limit)
    return f"{value / limit:.2f}x of the limit ({'within' if verdict else 'OVER'})"


def passages(count: int, seed: int) -> list[Document]:
    return random.Random(seed).sample(wiki5k_documents(), count)


def chunk_texts(documents: list[Document]) -> list[str]:
    """What an ingest embeds: each chunk's embedding text, cut as a new KB cuts."""
    from trishield.kb.chunking import ChunkingConfig, chunk_document, embedding_text

    config = ChunkingConfig()
    return [embedding_text(c) for d in documents for c in chunk_document(d, config)]


# -- 1. encoders ---------------------------------------------------------------------------
def encoders(texts: list[str]) -> dict[str, float]:
    loaded = {}
    for name in (FP32, INT8):
        started = time.perf_counter()
        loaded[name] = load_embedder(name)
        loaded[name].encode(texts[:4])
        say(f"  {name}: loaded in {time.perf_counter() - started:.1f} s")
    spent = dict.fromkeys(loaded, 0.0)
    for number, start in enumerate(range(0, len(texts), SLICE)):
        for name in (loaded if number % 2 == 0 else list(reversed(loaded))):
            began = time.perf_counter()
            loaded[name].encode(texts[start:start + SLICE])
            spent[name] += time.perf_counter() - began
    rates = {name: len(texts) / seconds for name, seconds in spent.items()}
    for name, rate in rates.items():
        say(f"  {name}: {rate:.1f} chunks/s alone")
    say(f"  int8 / fp32: {rates[INT8] / rates[FP32]:.2f}x")
    return rates


# -- 2. ingest -----------------------------------------------------------------------------
def ingest(documents: list[Document], model: str, alone: float, work: Path, *,
           old_batches: bool = False) -> Path:
    from trishield.rings.analysis import DEFAULT_ANALYSER
    from trishield.rings.ingest_guard import IngestGuard
    from trishield.settings import Settings

    commits: list[float] = []
    first_eta: list[float] = []
    started = time.perf_counter()

    def watch(state: IngestProgress) -> None:
        now = time.perf_counter() - started
        if state.eta_seconds is not None and not first_eta:
            first_eta.append(now)
        if len(commits) < state.batches_done:
            commits.append(now)

    kb_dir = work / f"kb-{model}{'-200' if old_batches else ''}"
    with KnowledgeBase.open(kb_dir, create=True, embedding_model=model,
                            analyser=DEFAULT_ANALYSER) as kb:
        report = kb.ingest(documents, writer="speed",
                           guard=IngestGuard(Settings().pipeline.guard),
                           **({"batch_size": 200} if old_batches else {"commit_seconds": 30}),
                           on_progress=watch)
    rate = report.chunks_added / report.seconds
    gaps = [b - a for a, b in zip([0.0, *commits], commits, strict=False)]
    versus = ratio(rate / alone, 0.85, at_most=False)
    label = f"{model}, {'200-document batches (before)' if old_batches else '30 s commits'}"
    say(f"  {label}: {report.chunks_added} chunks in {report.seconds:.1f} s = {rate:.1f} "
        f"chunks/s; / encoder alone {rate / alone:.2f} ({versus})")
    eta = f"{first_eta[0]:.1f} s" if first_eta else "never"
    say(f"    {len(commits)} commits, longest stretch {max(gaps):.1f} s "
        f"({ratio(max(gaps), 30.0)}); first ETA after {eta}")
    return kb_dir


# -- 3./4. commands ------------------------------------------------------------------------
def command(*args: str, env: dict[str, str] | None = None, runs: int = 3) -> float:
    """Median wall seconds of the CLI (bytecode cached: the first run writes it)."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONDONTWRITEBYTECODE", "TRISHIELD_API_KEY")}
    environment.update({"PYTHONPATH": str(SOURCE), "HF_HUB_OFFLINE": "1", **(env or {})})
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "trishield.cli", *args],
                              capture_output=True, text=True, env=environment, check=False)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"trishield {' '.join(args)} failed: {done.stderr[-2000:]}")
    return statistics.median(times)


def startup(kb_dir: Path) -> None:
    command("--help", runs=1)  # writes the bytecode cache
    for args in (("--help",), ("documents", "list", "--kb", str(kb_dir))):
        seconds = command(*args)
        say(f"  trishield {' '.join(args[:2])}: {seconds:.2f} s ({ratio(seconds, 1.0)}; "
            f"load {load():.2f})")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cold_and_warm(kb_dir: Path) -> None:
    from trishield.provenance.keys import KeyStore

    token = KeyStore(kb_dir).create_key("speed-reader", "reader", "neutral")[1]
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": str(SOURCE), "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen([sys.executable, "-m", "trishield.cli", "serve", "--kb",
                              str(kb_dir), "--port", str(port), "--log-level", "warning"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=environment)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        key = {"TRISHIELD_API_KEY": token}
        for verb, what in (("search", "When did the tower open to the public?"),
                           ("ask", "When did the tower open to the public?")):
            extra = ("--defense", "none", "--panel", "extractive") if verb == "ask" else ()
            base = (verb, what, *extra)
            cold = command(*base, "--kb", str(kb_dir), "--local", runs=1)
            remote = command(*base, "--server", url, env=key)
            warm = command(*base, "--kb", str(kb_dir))  # no key: the run's local key
            say(f"  {verb}: cold --local {cold:.2f} s; --server {remote:.2f} s; --kb with the "
                f"server running {warm:.2f} s = {warm / remote:.2f}x --server "
                f"({ratio(warm / remote, 1.10)}); cold / warm {cold / warm:.1f}x "
                f"(load {load():.2f})")
    finally:
        server.terminate()
        server.wait(timeout=60)


# -- 5. screen() ---------------------------------------------------------------------------
def screen_timing(documents: list[Document]) -> None:
    import trishield

    question = "When did the tower open to the public?"
    chosen = documents[:20]
    vectors = load_embedder(FP32).encode([d.text for d in chosen])
    given = [{"id": d.id, "text": d.text, "score": 1.0 / (n + 1), "embedding": v}
             for n, (d, v) in enumerate(zip(chosen, vectors, strict=True))]
    bare = [{k: v for k, v in p.items() if k != "embedding"} for p in given]
    trishield.screen(question, given)  # warm: the rings' first call loads their tables
    timings = {}
    for name, passages_ in (("embeddings given", given), ("embedded by screen()", bare)):
        started = time.perf_counter()
        result = trishield.screen(question, passages_)
        timings[name] = time.perf_counter() - started
        say(f"  screen() of 20 passages, {name}: {timings[name]:.3f} s "
            f"({result.embedded} embedded; {ratio(timings[name], 0.5)})")


# -- 6. a cold ask with the default panel ---------------------------------------------------
_COLD_ASK = """
import json, sys, time
started = time.perf_counter()
from click.testing import CliRunner
from trishield.cli import cli
from trishield.llm.local import loaded_models
done = CliRunner().invoke(cli, ["ask", sys.argv[1], "--kb", sys.argv[2], "--local", "--json"])
seconds = time.perf_counter() - started
assert done.exit_code == 0, done.output[-2000:]
trace = json.loads(done.output)["trace"]
print(json.dumps({"seconds": seconds, "loaded": loaded_models(), "gate": trace["gate"],
                  "asked": [c["model"] for c in trace["calls"] if c["llm"]]}))
"""


def cold_ask(kb_dir: Path) -> None:
    """``trishield ask`` with every default (``full``, the default panel, its second
    reader), in a fresh interpreter with an empty response cache: what a first question
    costs, and the models it loaded (``trishield.llm.local.loaded_models``)."""
    from trishield.llm.panel import DEFAULT_PANEL, DEFAULT_SECOND_READER

    with tempfile.TemporaryDirectory(prefix="trishield-responses-") as responses:
        environment = {**os.environ, "PYTHONPATH": str(SOURCE), "HF_HUB_OFFLINE": "1",
                       "TRISHIELD_RESPONSE_CACHE": responses}
        environment.pop("TRISHIELD_API_KEY", None)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _COLD_ASK,
                               "When did the tower open to the public?", str(kb_dir)],
                              capture_output=True, text=True, env=environment, check=False)
        wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the cold ask failed: {done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    built = [m for m in DEFAULT_PANEL if m != "extractive"] + (
        [DEFAULT_SECOND_READER] if DEFAULT_SECOND_READER else [])
    gate = "convened the panel" if (figures["gate"] or {}).get("use_panel") else "closed"
    say(f"  cold ask (full, panel {', '.join(DEFAULT_PANEL)}, second reader "
        f"{DEFAULT_SECOND_READER}): {wall:.1f} s wall ({figures['seconds']:.1f} s in the "
        f"process); gate {gate}"
        f"; models asked {figures['asked']}; loaded {figures['loaded']} of "
        f"{sorted(set(built))} built (load {load():.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=160,
                        help="wiki5k passages for the encoders and the ingest")
    parser.add_argument("--full", action="store_true",
                        help="the 2,000-passage folder (overrides --passages)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-llm", action="store_true",
                        help="skip the cold ask with the default panel (section 6)")
    args = parser.parse_args()
    count = 2000 if args.full else args.passages
    started = time.perf_counter()
    say(f"speed.py: {count} passages; load average {load():.2f}; {os.cpu_count()} CPUs")
    documents = passages(count, args.seed)
    with tempfile.TemporaryDirectory(prefix="trishield-speed-") as scratch:
        work = Path(scratch)
        say("1. encoders alone")
        rates = encoders(chunk_texts(documents))
        say("2. ingest (Ring 1 guard)")
        ingest(documents, FP32, rates[FP32], work, old_batches=True)
        kb_dirs = {model: ingest(documents, model, rates[model], work)
                   for model in (FP32, INT8)}
        say("3. start-up")
        startup(kb_dirs[FP32])
        say("4. cold vs warm (the fp32 KB)")
        cold_and_warm(kb_dirs[FP32])
        say("5. screen()")
        screen_timing(documents)
        if not args.no_llm:
            say("6. a cold ask with every default (the fp32 KB)")
            cold_ask(kb_dirs[FP32])
    say(f"load average {load():.2f}; {time.perf_counter() - started:.0f} s; figures: "
        f"{json.dumps({'passages': count, 'seed': args.seed})}")


if __name__ == "__main__":
    main()
