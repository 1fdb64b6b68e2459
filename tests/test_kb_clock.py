"""The KB clock: one injectable source of every stored time, never a client's timestamp.

The evidence weighs time (a source's time stood, a writer's tenure), so a stored time is
provenance: only the KB's clock sets it. A simulation injects one (the PoisonedRAG matrix
writes its base KB "a year ago"); a document's front matter, an HTTP body or a signed record's
``issued_at`` never does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service_support import Keys, bearer, copy_kb, signed
from trishield.errors import InputError
from trishield.kb import KnowledgeBase, load_path
from trishield.kb.documents import Document
from trishield.provenance.keys import KeyStore
from trishield.provenance.signing import generate_private_key, load_private_key
from trishield.service.app import create_app
from trishield.service.runtime import ServiceConfig

YEAR_AGO = 1_700_000_000.0


class Ticking:
    """A clock that stands where it is set and moves one second per reading."""

    def __init__(self, at: float):
        self.at = at

    def __call__(self) -> float:
        self.at += 1.0
        return self.at


def test_every_stored_time_comes_from_the_injected_clock(tmp_path: Path) -> None:
    clock = Ticking(YEAR_AGO)
    with KnowledgeBase.open(tmp_path / "kb", create=True, clock=clock) as kb:
        assert kb.clock is clock and YEAR_AGO < kb.now() < YEAR_AGO + 10
        kb.ingest([Document("a", "The Halden Bridge opened in 1912.")], writer="wiki")
        clock.at += 365 * 86_400.0
        kb.ingest([Document("b", "The Halden Bridge opened in 1913.")], writer="late")
        stored = {d: kb.document(d)["ingested_at"] for d in ("a", "b")}
        since = kb.writers_since()
        created = float(kb.store.meta()["created_at"])
        audit = kb.store.audit_log(10)
    assert YEAR_AGO < created < stored["a"] < YEAR_AGO + 100
    assert stored["b"] - stored["a"] == pytest.approx(365 * 86_400.0, abs=100)
    assert since == {"late": stored["b"], "wiki": stored["a"]}
    assert all(YEAR_AGO < entry["at"] < YEAR_AGO + 366 * 86_400.0 for entry in audit)


def test_a_clock_must_be_callable(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="callable"):
        KnowledgeBase.open(tmp_path / "kb", create=True, clock=12.0)  # type: ignore[arg-type]


def test_front_matter_dates_are_metadata_never_the_stored_time(tmp_path: Path) -> None:
    source = tmp_path / "notes"
    source.mkdir()
    (source / "old.md").write_text("---\ntitle: Old news\ningested_at: 2001-01-01\n"
                                   "stored_at: 978307200\n---\nThe bridge opened in 1912.\n")
    clock = Ticking(YEAR_AGO)
    with KnowledgeBase.open(tmp_path / "kb", create=True, clock=clock) as kb:
        kb.ingest(load_path(source).documents, writer="notes")
        (doc_id,) = [d["id"] for d in kb.store.list_documents()]
        stored = kb.document(doc_id)
    assert YEAR_AGO < stored["ingested_at"] < YEAR_AGO + 100
    assert stored["metadata"]["ingested_at"] == "2001-01-01"


def test_the_service_takes_no_timestamp_from_a_client(demo_kb_template: Path,
                                                      tmp_path: Path) -> None:
    """A stored time in a request body is refused by name; a signed record's ``issued_at``
    (the publisher's claim, years back) is kept as the record's, not as the stored time."""
    kb_dir = copy_kb(demo_kb_template, tmp_path / "kb")
    keys = Keys.create(kb_dir)
    pem, public = generate_private_key()
    (tmp_path / "p.pem").write_bytes(pem)
    KeyStore(kb_dir).add_publisher("legal", public)
    text = "Northwind legal notice: gift cards are valid for 3 years."
    provenance = signed(load_private_key(tmp_path / "p.pem"), "legal", "legal/old", text,
                        issued_at=946_684_800)
    config = ServiceConfig(kb_dir=kb_dir, allowed_members=("extractive",))
    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        for field in ("ingested_at", "stored_at"):
            refused = client.post("/v1/documents", headers=bearer(keys.writer), json={
                "documents": [{"id": "x", "text": "Backdated.", field: 946_684_800.0}]})
            assert refused.status_code == 422 and field in refused.text
        with KnowledgeBase.open(kb_dir, read_only=True) as kb:
            before = kb.now()
        written = client.post("/v1/documents", headers=bearer(keys.writer), json={
            "documents": [{"id": "legal/old", "text": text, "provenance": provenance}]})
        assert written.status_code == 200, written.text
        stored = client.get("/v1/documents/legal/old", headers=bearer(keys.reader)).json()
    assert stored["tier"] == "trusted" and stored["ingested_at"] >= before
