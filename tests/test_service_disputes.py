"""The disputes queue through ``trishield serve`` as a real subprocess on loopback: an ask
over HTTP records the conflict (deduplicated), admins list, show and resolve it (audited
under the key's name), readers and writers may not, and a read-only KB still answers."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dispute_support import QUESTION, TRUTH, conflict_kb, side_of
from service_support import Keys, ServerProcess, bearer
from trishield.kb import KnowledgeBase

pytestmark = pytest.mark.slow
ASK = {"question": QUESTION, "panel": ["extractive"], "defense": "full"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Keys, Path]]:
    kb_dir = conflict_kb(tmp_path / "kb")
    keys = Keys.create(kb_dir)
    process = ServerProcess(kb_dir)
    try:
        process.wait_ready()
        yield process.url, keys, kb_dir
    finally:
        process.stop()
    assert "Traceback" not in "".join(process.stderr)


def _ask(url: str, key: str) -> dict:
    response = httpx.post(f"{url}/v1/ask", headers=bearer(key), json=ASK, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def test_an_ask_records_a_dispute_that_an_admin_settles(served) -> None:
    url, keys, kb_dir = served
    first = _ask(url, keys.reader)
    assert first["refused"] and "conflicting sources" in first["reason"]
    note = first["trace"]["evidence"]["dispute"]
    assert note["recorded"] and note["occurrences"] == 1
    again = _ask(url, keys.writer)
    assert again["trace"]["evidence"]["dispute"]["id"] == note["id"]
    assert again["reason"] == first["reason"]

    # readers and writers may not see or settle disputes (another's question, held texts)
    for key in (keys.reader, keys.writer):
        assert httpx.get(f"{url}/v1/disputes", headers=bearer(key)).status_code == 403
        assert httpx.post(f"{url}/v1/disputes/{note['id']}/resolve", headers=bearer(key),
                          json={"action": "dismiss"}).status_code == 403
    assert httpx.get(f"{url}/v1/disputes").status_code == 401

    listed = httpx.get(f"{url}/v1/disputes", headers=bearer(keys.admin)).json()["disputes"]
    assert [d["id"] for d in listed] == [note["id"]] and listed[0]["occurrences"] == 2
    assert listed[0]["question"] == QUESTION and listed[0]["writers"] == ["historian", "mallory"]
    shown = httpx.get(f"{url}/v1/disputes/{note['id']}", headers=bearer(keys.admin)).json()
    texts = {p["text"] for side in shown["sides"] for s in side["sources"]
             for p in s["passages"]}
    assert TRUTH in texts and {p["state"] for side in shown["sides"] for s in side["sources"]
                               for p in s["passages"]} == {"stored"}
    assert httpx.get(f"{url}/v1/disputes/999", headers=bearer(keys.admin)).status_code == 404
    bad = httpx.post(f"{url}/v1/disputes/{note['id']}/resolve", headers=bearer(keys.admin),
                     json={"action": "trust"})
    assert bad.status_code == 422 and "needs the side" in bad.json()["error"]
    assert httpx.post(f"{url}/v1/disputes/{note['id']}/resolve", headers=bearer(keys.admin),
                      json={"action": "burn", "side": 1}).status_code == 422

    side = side_of(shown, "bridge/lie")
    done = httpx.post(f"{url}/v1/disputes/{note['id']}/resolve", headers=bearer(keys.admin),
                      json={"action": "quarantine", "side": side, "note": "a forgery"},
                      timeout=60)
    assert done.status_code == 200, done.text
    assert done.json() | {"note": "a forgery"} == {
        "dispute": note["id"], "action": "quarantine", "side": side, "by": "ada",
        "note": "a forgery", "documents": ["bridge/lie"], "skipped": [], "state": "resolved"}
    held = httpx.get(f"{url}/v1/quarantine", headers=bearer(keys.admin)).json()["documents"]
    assert [d["id"] for d in held] == ["bridge/lie"]
    assert held[0]["verdict"]["dispute"] == note["id"]
    conflict = httpx.post(f"{url}/v1/disputes/{note['id']}/resolve",
                          headers=bearer(keys.admin), json={"action": "dismiss"})
    assert conflict.status_code == 409
    # the lie is out of the indexes: the served handles answer with the truth
    settled = _ask(url, keys.reader)
    assert not settled["refused"] and "Ada Lindqvist" in settled["answer"], settled["reason"]
    assert httpx.get(f"{url}/v1/disputes", headers=bearer(keys.admin)).json() == \
        {"disputes": []}
    closed = httpx.get(f"{url}/v1/disputes?state=resolved",
                       headers=bearer(keys.admin)).json()["disputes"]
    assert closed[0]["closed_by"] == "ada"
    with KnowledgeBase.open(kb_dir, read_only=True) as kb:
        audit = [a for a in kb.store.audit_log(20) if a["action"] in ("dispute", "quarantine")]
    assert audit[0]["writer"] == "ada" and audit[0]["detail"]["action"] == "quarantine"
    assert audit[1]["doc_id"] == "bridge/lie"


@pytest.fixture
def read_only_served(tmp_path: Path) -> Iterator[tuple[str, Keys]]:
    source = conflict_kb(tmp_path / "source")
    keys = Keys.create(source)
    view = tmp_path / "read-only"
    view.mkdir()
    bound = subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True,
                           text=True, check=False)
    if bound.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount (needs root): {bound.stderr}")
    process = None
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        process = ServerProcess(view)
        process.wait_ready()
        yield process.url, keys
    finally:
        if process is not None:
            process.stop()
        subprocess.run(["umount", "-l", str(view)], check=False)


def test_a_read_only_kb_answers_and_says_the_dispute_was_not_recorded(
        read_only_served) -> None:
    url, keys = read_only_served
    answer = _ask(url, keys.reader)
    assert answer["refused"] and "conflicting sources" in answer["reason"]
    note = answer["trace"]["evidence"]["dispute"]
    assert not note["recorded"] and "read-only" in note["note"]
    assert httpx.get(f"{url}/v1/disputes", headers=bearer(keys.admin)).json() == \
        {"disputes": []}
