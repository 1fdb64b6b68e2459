"""Issue 17, part B, against the real ``trishield serve`` and CLI: a writer cannot starve the
service, locks held elsewhere give 503 + Retry-After quickly, a full disk gives 507 with the
truth about what was committed (and reads keep working), a damaged index is rebuilt, a
read-only KB directory is served read-only, and an oversized JSON integer is a 400.

The full-disk and read-only cases need a real small filesystem and a real read-only mount
(root can write through ``chmod``): they mount a tmpfs or a read-only bind mount, and are
skipped, saying why, where mounting is not allowed.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from service_support import REFUND_QUESTION, Keys, ServerProcess, bearer, copy_kb, policy_batch
from trishield.kb import KnowledgeBase
from trishield.kb.locking import FAULT_RESUME_ENV

pytestmark = pytest.mark.slow

LOCK_TIMEOUT = "3"
BACKLOG = 4


@pytest.fixture(scope="module")
def server(demo_kb_template: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[ServerProcess, Keys, Path]]:
    kb_dir = copy_kb(demo_kb_template, tmp_path_factory.mktemp("hardening") / "kb")
    keys = Keys.create(kb_dir)
    process = ServerProcess(kb_dir, extra=("--lock-timeout", LOCK_TIMEOUT,
                                           "--write-backlog", str(BACKLOG)))
    try:
        process.wait_ready()
        yield process, keys, kb_dir
    finally:
        process.stop()


def _post(url: str, token: str, documents: list[dict], timeout: float = 60.0) -> httpx.Response:
    return httpx.post(f"{url}/v1/documents", headers=bearer(token),
                      json={"documents": documents}, timeout=timeout)


def _timed(call) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = call()
    return response, time.perf_counter() - started


def test_writes_blocked_by_an_outside_lock_starve_nothing(server) -> None:
    """Issue 17 item 3: 42 posts while another process holds kb.lock used to take every
    request thread (and hang for as long as the lock was held): /healthz, search and ask timed
    out. Now they answer at once and every write gets a quick 503."""
    process, keys, kb_dir = server
    with (kb_dir / "kb.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # this test process is the "outside process"
        try:
            with ThreadPoolExecutor(max_workers=42) as pool:
                posts = [pool.submit(_post, process.url, keys.writer,
                                     policy_batch(f"locked{n}", 1), 60.0) for n in range(42)]
                time.sleep(1.5)
                health, health_s = _timed(lambda: httpx.get(f"{process.url}/healthz",
                                                            timeout=10))
                search, search_s = _timed(lambda: httpx.post(
                    f"{process.url}/v1/search", headers=bearer(keys.reader),
                    json={"query": "exchanged within days", "k": 3}, timeout=10))
                ask, ask_s = _timed(lambda: httpx.post(
                    f"{process.url}/v1/ask", headers=bearer(keys.reader),
                    json={"question": REFUND_QUESTION, "panel": ["extractive"]}, timeout=30))
                results = [future.result() for future in posts]
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    assert health.status_code == 200 and health_s < 1.0, (health.status_code, health_s)
    assert search.status_code == 200 and search_s < 5.0, (search.status_code, search_s)
    assert ask.status_code == 200 and ask_s < 10.0, (ask.status_code, ask_s)
    statuses = Counter(r.status_code for r in results)
    assert statuses == Counter({503: 42}), statuses
    assert all(int(r.headers["retry-after"]) >= 1 for r in results)
    errors = Counter("writes are already waiting" in r.json()["error"] for r in results)
    assert errors[True] == 42 - 1 - BACKLOG  # refused at once: the backlog was full
    assert all("another writer holds" in r.json()["error"] for r in results
               if "already waiting" not in r.json()["error"])
    after = _post(process.url, keys.writer, policy_batch("unlocked", 1))
    assert after.status_code == 200 and after.json()["added"] == ["unlocked-0"]


def test_sqlite_locked_by_another_process_is_a_quick_503(server) -> None:
    """Issue 17 item 8: a SQLite write lock held by another process gave a 500 after 30 s."""
    process, keys, kb_dir = server
    other = sqlite3.connect(kb_dir / "kb.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        response, seconds = _timed(lambda: _post(process.url, keys.writer,
                                                 policy_batch("sqlitelock", 1)))
        search = httpx.post(f"{process.url}/v1/search", headers=bearer(keys.reader),
                            json={"query": "exchanged within days", "k": 3}, timeout=10)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert response.status_code == 503 and seconds < 20, (response.status_code, seconds)
    assert "SQLite lock" in response.json()["error"] and response.headers["retry-after"]
    assert search.status_code == 200
    missing = httpx.get(f"{process.url}/v1/documents/sqlitelock-0", headers=bearer(keys.reader))
    assert missing.status_code == 404


def test_a_json_integer_over_4300_digits_is_a_400_before_authentication(server) -> None:
    """Issue 17 item 6: Python's int conversion limit raised ValueError in the body check."""
    process, _, _ = server
    body = '{"query": ' + "9" * 5000 + "}"
    for path in ("/v1/search", "/v1/documents", "/v1/ask"):
        response = httpx.post(f"{process.url}{path}", content=body,
                              headers={"Content-Type": "application/json"}, timeout=10)
        assert response.status_code == 400, response.text
        assert "number is too long" in response.json()["error"]


# -- a full disk --------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs",
                              str(mount_point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {mounted.stderr}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` (tmpfs allocates whole pages, so it ends full)."""
    filler = disk / f"filler-{time.monotonic_ns()}"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for block in (1 << 20, 4096):
            try:
                while True:
                    os.write(descriptor, b"\0" * block)
            except OSError:
                pass
    finally:
        os.close(descriptor)
    assert os.statvfs(disk).f_bavail == 0
    return filler


def test_a_full_disk_is_507_with_the_truth_and_reads_keep_working(
        demo_kb_template: Path, small_disk: Path, tmp_path: Path) -> None:
    """Issue 17 item 8: a full disk at the commit (nothing written) and after it (documents
    stored) were both generic 500s, and key checks and reads failed while it was full."""
    kb_dir = copy_kb(demo_kb_template, small_disk / "kb")
    keys = Keys.create(kb_dir)
    resume = tmp_path / "resume"
    process = ServerProcess(kb_dir, fault="after-commit", env={FAULT_RESUME_ENV: str(resume)})
    try:
        process.wait_ready()
        filler = _fill(small_disk)
        refused = _post(process.url, keys.writer, policy_batch("full", 2))
        assert refused.status_code == 507, refused.text
        assert "nothing was written" in refused.json()["error"]
        assert refused.json()["details"] == [{"field": "committed", "problem": "false"}]
        # reads, key checks included, work on the full disk
        assert httpx.get(f"{process.url}/v1/whoami",
                         headers=bearer(keys.reader)).status_code == 200
        assert httpx.get(f"{process.url}/v1/documents/full-0",
                         headers=bearer(keys.reader)).status_code == 404
        search = httpx.post(f"{process.url}/v1/search", headers=bearer(keys.reader),
                            json={"query": "refund window days", "k": 3}, timeout=30)
        assert search.status_code == 200 and search.json()["results"]
        generation = httpx.get(f"{process.url}/healthz").json()["generation"]

        filler.unlink()  # room for the commit; the disk fills again before the indexes
        result: dict[str, httpx.Response] = {}
        writer = threading.Thread(target=lambda: result.update(
            response=_post(process.url, keys.writer, policy_batch("stored", 2), 120)))
        writer.start()
        process.wait_for_fault()
        _fill(small_disk)
        resume.touch()
        writer.join(timeout=120)
        stored = result["response"]
        assert stored.status_code == 200, (stored.text, "".join(process.stderr)[-3000:])
        assert stored.json()["added"] == ["stored-0", "stored-1"]
        assert stored.json()["generation"] == generation + 1
        warning, = stored.json()["warnings"]
        assert "is committed" in warning and "the disk is full" in warning
        document = httpx.get(f"{process.url}/v1/documents/stored-1",
                             headers=bearer(keys.reader))
        assert document.status_code == 200
        hits = httpx.post(f"{process.url}/v1/search", headers=bearer(keys.reader),
                          json={"query": "stored store 1 note exchanged", "k": 5}, timeout=60)
        assert hits.status_code == 200
        assert "stored-1" in {hit["doc_id"] for hit in hits.json()["results"]}
        health = httpx.get(f"{process.url}/healthz").json()
        assert health["generation"] == generation + 1
    finally:
        process.stop()
    # nothing half-written: every dense snapshot has its checksums, and no temporary is left
    snapshots = list(kb_dir.glob("dense-s*.faiss"))
    assert snapshots and all((kb_dir / p.name.replace("dense-", "checksums-").replace(
        ".faiss", ".json")).is_file() for p in snapshots)
    assert not list(kb_dir.glob(".dense-*")) and not list(kb_dir.glob(".checksums-*"))


# -- damaged indexes and `trishield repair` ------------------------------------------------------
def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trishield.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ))


def test_a_truncated_or_empty_dense_index_is_rebuilt_and_repaired(
        demo_kb_template: Path, tmp_path: Path) -> None:
    """Issue 17 item 9: a damaged dense-N.faiss crashed search, ask and serve with a FAISS
    traceback, and there was no repair command."""
    kb_dir = copy_kb(demo_kb_template, tmp_path / "kb")
    dense = next(kb_dir.glob("dense-*.faiss"))
    damaged = dense.read_bytes()[:dense.stat().st_size // 2]
    dense.write_bytes(damaged)
    search = _cli("search", "refund window", "--kb", str(kb_dir), "--json")
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)["results"] and "Traceback" not in search.stderr
    assert dense.read_bytes() == damaged  # a reader rebuilds in memory and never writes
    first = _cli("repair", "--kb", str(kb_dir), "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) | {"generation": 0} == {
        "generation": 0, "indexes_were": "damaged", "rebuilt": True}
    again = _cli("repair", "--kb", str(kb_dir), "--json")
    assert json.loads(again.stdout)["indexes_were"] == "intact"
    with KnowledgeBase.open(kb_dir) as kb:
        assert kb.check_indexes()["intact"]

    dense.write_bytes(b"")  # emptied
    keys = Keys.create(kb_dir)
    process = ServerProcess(kb_dir)
    try:
        process.wait_ready()
        response = httpx.post(f"{process.url}/v1/search", headers=bearer(keys.reader),
                              json={"query": "refund window", "k": 3}, timeout=60)
        assert response.status_code == 200 and response.json()["results"]
    finally:
        process.stop()
    assert "Traceback" not in "".join(process.stderr)


# -- a read-only KB directory -------------------------------------------------------------------
@pytest.fixture
def read_only_kb(demo_kb_template: Path, tmp_path: Path) -> Iterator[tuple[Path, Keys]]:
    source = copy_kb(demo_kb_template, tmp_path / "source")
    keys = Keys.create(source)
    view = tmp_path / "read-only"
    view.mkdir()
    bound = subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True,
                           text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount (needs root): {bound.stderr}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        yield view, keys
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


def test_a_read_only_kb_directory_is_served_read_only(read_only_kb, tmp_path: Path) -> None:
    """Issue 17 item 10: every command failed with sqlite3's 'unable to open database file'."""
    view, keys = read_only_kb
    assert not os.access(view, os.W_OK)
    search = _cli("search", "refund window", "--kb", str(view), "--json")
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)["results"]
    batch = tmp_path / "batch.jsonl"
    batch.write_text(json.dumps({"id": "ro-1", "text": "Tents may be returned in 30 days."}))
    ingest = _cli("ingest", str(batch), "--kb", str(view))
    assert ingest.returncode != 0
    assert "read-only" in ingest.stderr and "Traceback" not in ingest.stderr

    process = ServerProcess(view)
    try:
        process.wait_ready()
        health = httpx.get(f"{process.url}/healthz").json()
        assert health["read_only"] is True
        assert httpx.get(f"{process.url}/v1/whoami",
                         headers=bearer(keys.reader)).status_code == 200
        found = httpx.post(f"{process.url}/v1/search", headers=bearer(keys.reader),
                           json={"query": "refund window", "k": 3}, timeout=60)
        assert found.status_code == 200 and found.json()["results"]
        refused = _post(process.url, keys.writer, policy_batch("ro", 1))
        assert refused.status_code == 503 and "read-only" in refused.json()["error"]
    finally:
        process.stop()
    assert "Traceback" not in "".join(process.stderr)
