"""The disputes queue through a real KB (MiniLM, SQLite) and the real pipeline (``full``, the
extractive reader): conflicts between writers recorded at question time and at ingest,
deduplicated, never changing or failing the answer, and settled by a person (quarantine a
side, trust a side, dismiss), audited."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from clocks import YEAR, Clock
from dispute_support import FILLER, LIE, QUESTION, TRUTH, conflict_kb, side_of
from trishield.defenses import build_defense
from trishield.errors import ConflictError, InputError, NotFoundError
from trishield.kb import Document, KnowledgeBase
from trishield.kb.store.migrations import MIGRATIONS
from trishield.llm import ExtractiveReader
from trishield.rings.ingest_guard import IngestGuard


@pytest.fixture(scope="module")
def conflict_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return conflict_kb(tmp_path_factory.mktemp("disputes") / "kb")


@pytest.fixture
def kb_dir(conflict_template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(conflict_template, tmp_path / "kb"))


def _ask(kb: KnowledgeBase, question: str = QUESTION):
    return build_defense("full", kb, [ExtractiveReader()]).ask(question)


def test_a_conflict_is_recorded_once_with_both_claims_and_counted_again(kb_dir: Path) -> None:
    with KnowledgeBase.open(kb_dir) as kb:
        assert kb.disputes() == []
        first = _ask(kb)
        assert first.refused and "conflicting sources" in first.reason
        note = first.trace.evidence.dispute
        assert note is not None and note.recorded and note.occurrences == 1, note
        # the recording's cheap commit (synchronous=NORMAL, a short wait) is its own only
        connection = kb.store.connection
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
        again = _ask(kb, "  who designed the HALDEN bridge over the Tista river ")
        listed = kb.disputes()
        dispute = kb.dispute(note.id)
    # the same answer (recording changes nothing), one dispute met twice
    assert again.refused and again.reason == first.reason
    assert again.trace.evidence.dispute.id == note.id
    assert [d["id"] for d in listed] == [note.id] and listed[0]["occurrences"] == 2
    assert dispute["origin"] == "question" and dispute["question"] == QUESTION
    assert dispute["outcome"] == "conflict" and dispute["decision"] == ""
    assert "both sides are new" in dispute["reason"]
    assert dispute["writers"] == ["historian", "mallory"]
    assert dispute["documents"] == ["bridge/lie", "bridge/truth"]
    claims = " ".join(side["claim"] for side in dispute["sides"])
    assert "Ada Lindqvist" in claims and "Marco Bellini" in claims
    for side in dispute["sides"]:
        (source,) = side["sources"]
        assert source["tier"] == "neutral" and source["weight"] > 0
        assert source["stood_s"] is not None and not source["established"]
        (passage,) = source["passages"]
        assert passage["state"] == "stored" and passage["ingested_at"] is not None
        assert passage["text"] in (TRUTH, LIE)


def test_a_read_only_kb_answers_and_the_trace_says_it_was_not_recorded(
        kb_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with KnowledgeBase.open(kb_dir) as kb:
        writable = _ask(kb)
    with KnowledgeBase.open(kb_dir, read_only=True) as kb:  # as a read-only directory is
        answer = _ask(kb)
    assert (answer.answer, answer.refused, answer.reason) == \
        (writable.answer, writable.refused, writable.reason)
    note = answer.trace.evidence.dispute
    assert note is not None and not note.recorded and "read-only" in note.note
    assert any("not recorded as disputes" in r.getMessage() for r in caplog.records)


def test_a_busy_kb_answers_after_a_short_wait_and_says_so(kb_dir: Path) -> None:
    """Another process holds the SQLite write lock: the answer does not wait out the KB's
    5 s busy timeout, nor fail."""
    import time

    blocker = sqlite3.connect(kb_dir / "kb.sqlite", isolation_level=None)
    with KnowledgeBase.open(kb_dir) as kb:
        kb.indexes()
        blocker.execute("BEGIN IMMEDIATE")
        try:
            started = time.perf_counter()
            answer = _ask(kb)
            waited = time.perf_counter() - started
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert kb.disputes() == []
    note = answer.trace.evidence.dispute
    assert answer.refused and not note.recorded and "lock" in note.note
    assert waited < 4.0, waited


def test_a_decided_dispute_records_the_answer_given(tmp_path: Path) -> None:
    """A trusted archive against an untrusted writer: decided for the archive, recorded with
    the answer given."""
    clock = Clock()
    with KnowledgeBase.open(tmp_path / "kb", create=True, clock=clock) as kb:
        kb.ingest([Document(id=f"library-{n}", text=text) for n, text in enumerate(FILLER)]
                  + [Document(id="bridge/truth", text=TRUTH)], tier="trusted", writer="archive")
        clock.advance(YEAR)
        kb.ingest([Document(id=f"lie-{n}", text=LIE + f" Note {n}.") for n in range(3)],
                  tier="neutral", writer="mallory")
        answer = _ask(kb)
        listed = kb.disputes()
    assert not answer.refused and "Ada Lindqvist" in answer.answer
    assert len(listed) == 1
    dispute = listed[0]
    assert dispute["outcome"] == "stands" and dispute["decision"] == answer.answer
    assert dispute["sides"][0]["top_tier"] == "trusted"


def test_quarantining_a_side_settles_it_is_audited_and_release_undoes_it(kb_dir: Path) -> None:
    with KnowledgeBase.open(kb_dir) as kb:
        note = _ask(kb).trace.evidence.dispute
        side = side_of(kb.dispute(note.id), "bridge/lie")
        done = kb.resolve_dispute(note.id, action="quarantine", side=side, by="ada",
                                  note="Bellini never worked in Halden")
        assert done.documents == ["bridge/lie"] and done.skipped == []
        held = kb.store.quarantined_document("bridge/lie")
        assert held["state"] == "held" and held["writer"] == "mallory"
        assert held["verdict"]["dispute"] == note.id and held["verdict"]["from"] == "stored"
        assert f"dispute {note.id}" in held["verdict"]["reasons"][0]
        assert kb.store.document("bridge/lie") is None
        shown = kb.dispute(note.id)
        assert shown["state"] == "resolved" and shown["closed_by"] == "ada"
        assert shown["resolution"]["action"] == "quarantine"
        assert {p["state"] for s in shown["sides"][side - 1]["sources"]
                for p in s["passages"]} == {"held"}
        audit = kb.store.audit_log(5)
        assert [a["action"] for a in audit[:2]] == ["dispute", "quarantine"]
        assert audit[0]["writer"] == "ada" and audit[0]["detail"]["dispute"] == note.id
        assert audit[0]["detail"]["note"] == "Bellini never worked in Halden"
        assert audit[1]["doc_id"] == "bridge/lie"
        settled = _ask(kb)
        assert not settled.refused and "Ada Lindqvist" in settled.answer, settled.reason
        with pytest.raises(ConflictError, match="already resolved"):
            kb.resolve_dispute(note.id, action="dismiss", by="ada")
        kb.release("bridge/lie", by="ada")
        assert kb.store.document("bridge/lie")["writer"] == "mallory"
        # back in the indexes: the question is contested again (the release stamps it now,
        # so against the truth it is a later claim: docs/design/ring3-consensus.md, "Disputes")
        again = _ask(kb)
        assert any("contested" in reason for reason in again.trace.gate.reasons)
        assert "bridge/lie#0" in {p.id for p in again.trace.evidence.passages}


def test_trusting_a_side_raises_its_documents_in_place(kb_dir: Path) -> None:
    with KnowledgeBase.open(kb_dir) as kb:
        note = _ask(kb).trace.evidence.dispute
        side = side_of(kb.dispute(note.id), "bridge/truth")
        stored_at = kb.store.document("bridge/truth")["ingested_at"]
        done = kb.resolve_dispute(note.id, action="trust", side=side, by="ada")
        assert done.documents == ["bridge/truth"]
        record = kb.store.document("bridge/truth")
        assert record["tier"] == "trusted" and record["ingested_at"] == stored_at
        assert f"raised from neutral to trusted by ada (dispute {note.id})" in \
            record["provenance"]
        assert [a["action"] for a in kb.store.audit_log(2)] == ["dispute", "retier"]
        settled = _ask(kb)
        assert not settled.refused and "Ada Lindqvist" in settled.answer, settled.reason
        # the conflict recurs as its resolution: counted on the closed row, not reopened
        assert kb.disputes() == []
        shown = kb.dispute(note.id)
        assert shown["state"] == "resolved" and shown["occurrences"] == 2


def test_dismissing_changes_nothing_and_stays_dismissed(kb_dir: Path) -> None:
    with KnowledgeBase.open(kb_dir) as kb:
        note = _ask(kb).trace.evidence.dispute
        generation = kb.store.generation()
        kb.resolve_dispute(note.id, action="dismiss", by="ada", note="both plausible")
        assert kb.store.generation() == generation
        assert kb.store.audit_log(1)[0]["detail"]["state"] == "dismissed"
        assert _ask(kb).refused
        assert kb.disputes() == [] and kb.disputes(state="dismissed")[0]["occurrences"] == 2


def test_resolutions_are_validated(kb_dir: Path) -> None:
    with KnowledgeBase.open(kb_dir) as kb:
        note = _ask(kb).trace.evidence.dispute
        for kwargs, message in (({"action": "burn", "side": 1}, "unknown action"),
                                ({"action": "quarantine"}, "needs the side"),
                                ({"action": "dismiss", "side": 1}, "takes no side"),
                                ({"action": "trust", "side": 3}, "sides 1 to 2")):
            with pytest.raises(InputError, match=message):
                kb.resolve_dispute(note.id, by="ada", **kwargs)
        with pytest.raises(NotFoundError):
            kb.resolve_dispute(note.id + 1, action="dismiss", by="ada")
        with pytest.raises(InputError, match="state"):
            kb.disputes(state="closed")
        assert kb.dispute(note.id)["state"] == "open"


def test_a_tampered_copy_is_recorded_at_ingest(tmp_path: Path) -> None:
    """Ring 1's tampered-copy detector already aligns a new document with other writers'
    stored ones: a fact it changed is recorded as a dispute in the ingest's transaction."""
    clock = Clock()
    with KnowledgeBase.open(tmp_path / "kb", create=True, clock=clock) as kb:
        original = ("The Harbour Bridge of Lindmouth was opened to traffic in 1998 after six "
                    "years of construction. It was designed by the engineer Marta Kovacs and "
                    "carries four lanes of road traffic and a light railway across the estuary "
                    "of the river Lind. The main span is 412 metres long, and the bridge is "
                    "maintained by the Lindmouth Port Authority.")
        kb.ingest([Document(id="wiki/lindmouth", text=original)], tier="neutral",
                  writer="wikipedia")
        clock.advance(30 * 86_400)
        copy = original.replace("1998", "2003")
        report = kb.ingest([Document(id="copy", text=copy)], tier="neutral", writer="mallory",
                           guard=IngestGuard())
        (dispute,) = kb.disputes()
        shown = kb.dispute(dispute["id"])
    assert [q["id"] for q in report.quarantined] == ["copy"]
    assert shown["origin"] == "ingest" and shown["outcome"] == "blocked"
    assert [side["claim"] for side in shown["sides"]] == ["1998", "2003"]
    assert shown["writers"] == ["mallory", "wikipedia"]
    stored, new = shown["sides"]
    assert stored["sources"][0]["stood_s"] == pytest.approx(30 * 86_400, abs=60)
    assert stored["sources"][0]["established"]
    assert stored["sources"][0]["passages"][0]["state"] == "stored"
    assert new["sources"][0]["passages"][0]["state"] == "held"
    assert "copies wiki/lindmouth" in shown["reason"]


def test_an_older_kb_gets_the_disputes_table(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True):
        pass
    with sqlite3.connect(tmp_path / "kb" / "kb.sqlite") as connection:
        connection.execute("DROP TABLE disputes")
        connection.execute("DELETE FROM schema_migrations WHERE name = '0012_disputes'")
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        assert "0012_disputes" in kb.store.migrations()
        assert kb.disputes() == []
    assert MIGRATIONS[-1].name == "0012_disputes"
