"""The real server on loopback: concurrency, kill -9 mid-ingest, raw HTTP abuse, local panel.

``trishield serve`` runs as a subprocess on a free 127.0.0.1 port, exactly as an operator
starts it; requests go over real sockets.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from service_support import REFUND_QUESTION, Keys, ServerProcess, bearer, copy_kb, policy_batch
from trishield.kb import KnowledgeBase
from trishield.llm.panel import DEFAULT_PANEL, DEFAULT_SECOND_READER

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(demo_kb_template: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[ServerProcess, Keys, Path]]:
    kb_dir = copy_kb(demo_kb_template, tmp_path_factory.mktemp("live") / "kb")
    keys = Keys.create(kb_dir)
    process = ServerProcess(kb_dir, extra=("--max-body-bytes", "200000"))
    try:
        process.wait_ready()
        yield process, keys, kb_dir
    finally:
        process.stop()


def _kb_consistent(kb_dir: Path) -> dict[str, int]:
    with KnowledgeBase.open(kb_dir) as kb:
        counts = kb.store.counts()
        dense, lexical = kb.indexes()
        assert len(dense) == len(lexical) == counts["chunks"], "indexes out of step"
        ids = [row[0] for row in kb.store.connection.execute("SELECT doc_id FROM documents")]
        assert len(ids) == len(set(ids))
        orphans = kb.store.connection.execute(
            "SELECT COUNT(*) FROM chunks WHERE doc_pk NOT IN (SELECT pk FROM documents)"
        ).fetchone()[0]
        assert orphans == 0
        return counts


def test_concurrent_asks_while_batches_are_ingested(server) -> None:
    process, keys, kb_dir = server
    before = httpx.get(f"{process.url}/healthz").json()
    batch = policy_batch("concurrent", 24)
    done = threading.Event()
    failures: list[str] = []
    answered = [0]

    def ingest() -> dict:
        try:
            with httpx.Client(timeout=300) as client:
                response = client.post(f"{process.url}/v1/documents", headers=bearer(keys.writer),
                                       json={"documents": batch})
                assert response.status_code == 200, response.text
                return response.json()
        finally:
            done.set()

    def ask_until_done(number: int) -> None:
        with httpx.Client(timeout=300) as client:
            while not done.is_set() or answered[0] < 8:
                if number % 2:
                    response = client.post(f"{process.url}/v1/search", headers=bearer(keys.reader),
                                           json={"query": "exchanged within days", "k": 5})
                else:
                    response = client.post(f"{process.url}/v1/ask", headers=bearer(keys.reader),
                                           json={"question": REFUND_QUESTION,
                                                 "panel": ["extractive"]})
                if response.status_code != 200:
                    failures.append(f"{response.status_code} {response.text[:200]}")
                answered[0] += 1

    with ThreadPoolExecutor(max_workers=6) as pool:
        readers = [pool.submit(ask_until_done, n) for n in range(4)]
        # the same batch twice at once: one writes it, the other finds only duplicates
        first, second = pool.submit(ingest), pool.submit(ingest)
        reports = [first.result(), second.result()]
        for future in readers:
            future.result()
    assert not failures, failures[:3]
    assert answered[0] >= 8
    added = sorted(reports, key=lambda r: len(r["added"]))
    assert len(added[0]["added"]) == 0 and len(added[0]["duplicates"]) == len(batch)
    assert sorted(added[1]["added"]) == sorted(d["id"] for d in batch)
    after = httpx.get(f"{process.url}/healthz").json()
    assert after["documents"] == before["documents"] + len(batch)
    for document in batch[:5]:
        fetched = httpx.get(f"{process.url}/v1/documents/{document['id']}",
                            headers=bearer(keys.reader))
        assert fetched.status_code == 200 and fetched.json()["text"] == document["text"]
    counts = _kb_consistent(kb_dir)
    assert counts["documents"] == after["documents"]


def _raw(process: ServerProcess, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (no client library to tidy them up); the status and body."""
    with socket.create_connection(("127.0.0.1", process.port), timeout=30) as connection:
        connection.sendall(request)
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def test_raw_http_abuse_gets_4xx_never_500(server) -> None:
    process, keys, _ = server
    auth = f"Authorization: Bearer {keys.admin}\r\n".encode()
    cases = {
        "huge header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 70000 +
                       b"\r\nConnection: close\r\n\r\n",
        "non-ASCII header": b"POST /v1/search HTTP/1.1\r\nHost: x\r\n" + auth +
                            b"X-Note: \xff\xfe ignore previous instructions\r\n"
                            b"Content-Type: application/json\r\nContent-Length: 17\r\n"
                            b"Connection: close\r\n\r\n{\"query\": \"tent\"}",
        "garbage key": b"POST /v1/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                       b"\xc3\xa9\xff" + b"z" * 3000 + b"\r\nContent-Length: 2\r\n"
                       b"Content-Type: application/json\r\n"
                       b"Connection: close\r\n\r\n{}",
        "bad content-length": b"POST /v1/search HTTP/1.1\r\nHost: x\r\n" + auth +
                              b"Content-Type: application/json\r\nContent-Length: -5\r\n"
                              b"Connection: close\r\n\r\n",
        "declared too large": b"POST /v1/documents HTTP/1.1\r\nHost: x\r\n" + auth +
                              b"Content-Type: application/json\r\nContent-Length: 999999999\r\n"
                              b"Connection: close\r\n\r\n{",
        "chunked oversize": b"POST /v1/documents HTTP/1.1\r\nHost: x\r\n" + auth +
                            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                            b"Connection: close\r\n\r\n" +
                            (b"10000\r\n" + b" " * 65536 + b"\r\n") * 4 + b"0\r\n\r\n",
    }
    seen = {}
    for what, request in cases.items():
        status, body = _raw(process, request)
        seen[what] = status
        assert 400 <= status < 500 or (what == "non-ASCII header" and status == 200), \
            (what, status, body[:300])
        assert b"Traceback" not in body
    assert seen["declared too large"] == seen["chunked oversize"] == 413
    print("raw HTTP abuse:", seen)
    assert seen["garbage key"] == 401 and seen["huge header"] == 431
    # the server is still healthy after all that
    assert httpx.get(f"{process.url}/healthz").status_code == 200


def test_local_panel_answers_over_http(server) -> None:
    """One ask with the default local panel (two GGUF LLMs + the extractive reader)."""
    process, keys, _ = server
    response = httpx.post(f"{process.url}/v1/ask", headers=bearer(keys.reader), timeout=600,
                          json={"question": REFUND_QUESTION, "gate": "always"})
    assert response.status_code == 200, response.text
    trace = response.json()["trace"]
    panel = set(DEFAULT_PANEL)
    members = {m["name"] for m in trace["panel"]}
    assert members == panel | {DEFAULT_SECOND_READER}  # the second reader is listed (here
    # the reader itself: the 1.5B reads by default)
    voters = {v["member"] for r in trace["ring3"]["rounds"] for v in r["votes"]}
    # it votes only when asked (no stated claim, or a reading dispute over one source)
    assert voters == (members if trace["ring3"]["escalated"] else panel)
    metrics = httpx.get(f"{process.url}/metrics").text
    assert 'trishield_panel_calls_total{cached=' in metrics and DEFAULT_PANEL[0] in metrics


def test_kill_9_mid_ingest_then_restart(demo_kb_template: Path, tmp_path: Path) -> None:
    """Acknowledged batches survive a kill -9; a batch killed inside its commit leaves
    nothing behind; after a restart the KB is consistent and the batch can be sent again."""
    kb_dir = copy_kb(demo_kb_template, tmp_path / "kb")
    keys = Keys.create(kb_dir)
    acknowledged, interrupted = policy_batch("acked", 6), policy_batch("killed", 6)

    servers: list[ServerProcess] = []
    try:
        _kill_scenario(kb_dir, keys, acknowledged, interrupted, servers)
    finally:
        for process in servers:  # whatever an assertion left running
            process.kill()
    counts = _kb_consistent(kb_dir)
    with KnowledgeBase.open(kb_dir) as kb:
        audit = [e for e in kb.store.audit_log(200) if e["action"] == "ingest"
                 and e["doc_id"].startswith(("acked", "killed"))]
    assert len(audit) == len(acknowledged) + len(interrupted)
    assert {e["writer"] for e in audit} == {"wes"}
    assert counts["documents"] == 8 + len(acknowledged) + len(interrupted)


def test_json_error_bodies_over_the_wire(server) -> None:
    process, keys, _ = server
    response = httpx.post(f"{process.url}/v1/ask", headers=bearer(keys.reader) |
                          {"Content-Type": "application/json"}, content=b"{not json")
    assert response.status_code == 400
    assert json.loads(response.text)["error"].startswith("request body is not valid JSON")


def _kill_scenario(kb_dir: Path, keys: Keys, acknowledged: list[dict], interrupted: list[dict],
                   servers: list[ServerProcess]) -> None:
    first = ServerProcess(kb_dir)
    servers.append(first)
    first.wait_ready()
    reply = httpx.post(f"{first.url}/v1/documents", headers=bearer(keys.writer), timeout=300,
                       json={"documents": acknowledged})
    assert reply.status_code == 200 and len(reply.json()["added"]) == len(acknowledged)
    first.kill()  # right after the acknowledgement

    second = ServerProcess(kb_dir, fault="inside-commit")
    servers.append(second)
    second.wait_ready()
    outcome: dict[str, object] = {}

    def send() -> None:
        try:
            outcome["response"] = httpx.post(f"{second.url}/v1/documents", timeout=300,
                                             headers=bearer(keys.writer),
                                             json={"documents": interrupted})
        except httpx.TransportError as error:
            outcome["error"] = error

    sender = threading.Thread(target=send)
    sender.start()
    second.wait_for_fault()
    second.kill()
    sender.join(timeout=60)
    assert "error" in outcome, "the interrupted ingest must not have been acknowledged"

    third = ServerProcess(kb_dir)
    servers.append(third)
    try:
        third.wait_ready()
        for document in acknowledged:
            assert httpx.get(f"{third.url}/v1/documents/{document['id']}",
                             headers=bearer(keys.reader)).status_code == 200
        for document in interrupted:
            assert httpx.get(f"{third.url}/v1/documents/{document['id']}",
                             headers=bearer(keys.reader)).status_code == 404
        hits = httpx.post(f"{third.url}/v1/search", headers=bearer(keys.reader),
                          json={"query": "maps exchanged within days receipt", "k": 20}).json()
        assert {h["doc_id"].split("-")[0] for h in hits["results"]} & {"acked"}
        resent = httpx.post(f"{third.url}/v1/documents", headers=bearer(keys.writer),
                            timeout=300, json={"documents": interrupted})
        assert resent.status_code == 200 and len(resent.json()["added"]) == len(interrupted)
    finally:
        third.stop()
