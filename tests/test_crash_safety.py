"""A real ``kill -9`` in the middle of an ingest leaves the KB as before or as after the batch.

The ingest runs in a subprocess through the real CLI. ``TRISHIELD_FAULT_PAUSE`` makes it stop
at a named phase (before the commit, inside the open transaction, after the commit but before
the indexes, between the two indexes) and wait; the test then SIGKILLs it. A last case kills
at an arbitrary moment without any pause.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trishield.kb import KnowledgeBase
from trishield.kb.locking import FAULT_PAUSE_ENV

pytestmark = pytest.mark.slow

BATCH_SIZE = 16


def _batch_file(directory: Path) -> Path:
    """Distinct policy-style paragraphs (long enough to need several chunks)."""
    path = directory / "batch.jsonl"
    topics = ["tents", "stoves", "kayaks", "boots", "jackets", "lanterns", "ropes", "maps"]
    with path.open("w") as handle:
        for number in range(BATCH_SIZE):
            topic = topics[number % len(topics)]
            sentences = [f"Section {number}.{line}: {topic} bought in store {number} may be "
                         f"exchanged within {10 + line} days if unused." for line in range(14)]
            handle.write(json.dumps({"id": f"batch-{number}", "text": " ".join(sentences)}) + "\n")
    return path


def _start_ingest(kb_dir: Path, batch: Path, pause: str | None) -> subprocess.Popen:
    environment = dict(os.environ)
    environment.pop(FAULT_PAUSE_ENV, None)
    if pause:
        environment[FAULT_PAUSE_ENV] = pause
    return subprocess.Popen(
        [sys.executable, "-m", "trishield.cli", "ingest", str(batch), "--kb", str(kb_dir),
         "--writer", "crash-test"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment, text=True)


def _wait_for_pause(process: subprocess.Popen, phase: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if f"FAULT-PAUSE {phase}" in line:
            return
        if not line and process.poll() is not None:
            break
    process.kill()
    raise AssertionError(f"ingest never reached phase {phase}: rc={process.poll()}")


def _state(kb_dir: Path) -> dict[str, int]:
    with KnowledgeBase.open(kb_dir) as kb:
        counts = kb.store.counts()
        dense, lexical = kb.indexes()
        assert len(dense) == len(lexical) == counts["chunks"], "indexes out of step with the DB"
        hits = kb.search("kayaks exchanged within days", backend="hybrid", k=3)
        return counts | {"generation": kb.store.generation(),
                         "batch_hits": sum(c.doc_id.startswith("batch-") for c in hits)}


def _kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


@pytest.mark.parametrize(("phase", "expect_batch"), [
    ("before-commit", False), ("inside-commit", False),
    ("after-commit", True), ("between-indexes", True)])
def test_kill_at_each_phase(demo_kb_dir: Path, tmp_path: Path, phase: str,
                            expect_batch: bool) -> None:
    before = _state(demo_kb_dir)
    process = _start_ingest(demo_kb_dir, _batch_file(tmp_path), phase)
    _wait_for_pause(process, phase)
    _kill(process)

    after = _state(demo_kb_dir)
    if expect_batch:
        assert after["documents"] == before["documents"] + BATCH_SIZE
        assert after["generation"] == before["generation"] + 1 and after["batch_hits"] > 0
    else:
        assert after == before

    # Re-running the ingest completes the work exactly once, whichever side the kill left.
    rerun = _start_ingest(demo_kb_dir, _batch_file(tmp_path), None)
    assert rerun.wait(timeout=180) == 0, rerun.stderr.read()
    final = _state(demo_kb_dir)
    assert final["documents"] == before["documents"] + BATCH_SIZE
    assert final["batches"] == before["batches"] + 1


def test_kill_at_an_arbitrary_moment(demo_kb_dir: Path, tmp_path: Path) -> None:
    before = _state(demo_kb_dir)
    process = _start_ingest(demo_kb_dir, _batch_file(tmp_path), None)
    time.sleep(6.0)  # somewhere in start-up, loading, embedding or writing
    if process.poll() is None:
        _kill(process)
    after = _state(demo_kb_dir)
    whole_batch = (after["documents"] == before["documents"] + BATCH_SIZE
                   and after["batches"] == before["batches"] + 1
                   and after["generation"] == before["generation"] + 1)
    assert after == before or whole_batch
