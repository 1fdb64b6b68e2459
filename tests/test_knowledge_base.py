"""Knowledge-base behaviour: dedupe, model/chunking mismatch refusal, audit, index consistency."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from trishield.demo import corpus_dir
from trishield.errors import InputError, KnowledgeBaseError
from trishield.kb import ChunkingConfig, Document, KnowledgeBase, load_path


def _snapshot(directory: Path) -> dict[str, int]:
    with KnowledgeBase.open(directory) as kb:
        return kb.stats() | {}


def test_reingesting_the_same_corpus_is_a_no_op(demo_kb_dir: Path) -> None:
    before = _snapshot(demo_kb_dir)
    with KnowledgeBase.open(demo_kb_dir) as kb:
        report = kb.ingest(load_path(corpus_dir()).documents, tier="trusted",
                           writer="northwind-policy-team")
        audited = kb.store.audit_log(limit=before["documents"])
    assert report.added == [] and report.chunks_added == 0 and report.batch_id is None
    assert len(report.duplicates) == before["documents"]
    # no document, chunk, batch or generation; each duplicate is audited
    assert _snapshot(demo_kb_dir) == before | {"audit": before["audit"] + before["documents"]}
    assert {entry["action"] for entry in audited} == {"duplicate"}


def test_same_text_under_a_new_id_is_a_duplicate_of_the_writers_own(demo_kb_dir: Path) -> None:
    text = (corpus_dir() / "refund-policy.md").read_text()
    with KnowledgeBase.open(demo_kb_dir) as kb:
        report = kb.ingest([Document(id="copy-of-refunds", text="  " + text + "\n")],
                           tier="trusted", writer="northwind-policy-team")
    assert report.added == []
    assert report.duplicates == [{"id": "copy-of-refunds", "same_text_as": "refund-policy",
                                  "state": "stored"}]


def test_another_writers_copy_of_a_text_is_its_own_document(demo_kb_dir: Path) -> None:
    """Dedupe is per writer: a copy by someone else is stored under its own id and owner."""
    text = (corpus_dir() / "refund-policy.md").read_text()
    with KnowledgeBase.open(demo_kb_dir) as kb:
        report = kb.ingest([Document(id="copy-of-refunds", text=text)], tier="untrusted",
                           writer="mallory", guard=None)
        assert report.added == ["copy-of-refunds"] and report.duplicates == []
        copy, original = kb.store.document("copy-of-refunds"), kb.store.document("refund-policy")
        assert copy["writer"] == "mallory" and copy["tier"] == "untrusted"
        assert original["writer"] == "northwind-policy-team" and original["tier"] == "trusted"
        with pytest.raises(InputError, match="already used by another writer"):
            kb.ingest([Document(id="refund-policy", text=text)], writer="mallory")
        refused = kb.store.audit_log(limit=1)[0]
        assert (refused["action"], refused["doc_id"]) == ("refused", "refund-policy")


def test_known_id_with_different_text_refuses_the_whole_batch(demo_kb_dir: Path) -> None:
    before = _snapshot(demo_kb_dir)
    batch = [Document(id="brand-new", text="A new policy on bicycles."),
             Document(id="refund-policy", text="Refunds within 90 days.", origin="x.jsonl:2")]
    with KnowledgeBase.open(demo_kb_dir) as kb, pytest.raises(InputError) as raised:
        kb.ingest(batch, tier="trusted", writer="northwind-policy-team")
    assert "refund-policy" in str(raised.value) and "x.jsonl:2" in str(raised.value)
    assert "different text" in str(raised.value)
    assert _snapshot(demo_kb_dir) == before | {"audit": before["audit"] + 1}  # the refusal


def test_new_documents_are_added_with_provenance_and_audited(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        generation = kb.store.generation()
        report = kb.ingest([Document(id="bikes", text="Bicycles can be returned in 14 days.")],
                           tier="untrusted", writer="mallory")
        assert report.added == ["bikes"] and report.generation == generation + 1
        stored = kb.store.document("bikes")
        assert stored["tier"] == "untrusted" and stored["writer"] == "mallory"
        entry = kb.store.audit_log(limit=1)[0]
        assert (entry["action"], entry["writer"], entry["doc_id"]) == ("ingest", "mallory", "bikes")
        assert entry["detail"]["tier"] == "untrusted"
        top = kb.search("How long do I have to return a bicycle?", backend="bm25", k=1)[0]
        assert top.doc_id == "bikes" and top.chunk.tier == "untrusted"


@pytest.mark.parametrize(
    ("option", "value", "what"),
    [("embedding_model", "all-mpnet-base-v2", "embedding model"),
     ("chunking", ChunkingConfig(words=200, overlap=10), "chunking"),
     ("dense_index", "hnsw", "dense index")],
)
def test_opening_with_other_settings_is_refused(demo_kb_dir: Path, option: str, value: object,
                                                what: str) -> None:
    with pytest.raises(KnowledgeBaseError) as raised:
        KnowledgeBase.open(demo_kb_dir, **{option: value})
    assert what in str(raised.value) and "refusing to mix" in str(raised.value)


def test_settings_are_recorded_and_matching_ones_are_accepted(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir, embedding_model="all-MiniLM-L6-v2",
                            chunking=ChunkingConfig(strategy="window"),  # the template's
                            dense_index="flat") as kb:
        meta = kb.store.meta()
    assert meta["embedding_model"] == "all-MiniLM-L6-v2"
    assert (meta["chunk_words"], meta["chunk_overlap"], meta["chunk_strategy"]) == (
        "120", "20", "window")
    assert meta["embedding_dimension"] == "384"


def test_refuses_to_open_or_create_in_the_wrong_place(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeBaseError, match="not a TriShield knowledge base"):
        KnowledgeBase.open(tmp_path / "missing")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(KnowledgeBaseError, match="not empty"):
        KnowledgeBase.open(tmp_path / "notes", create=True)
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["todo.txt"]


def test_bad_tier_or_writer_is_rejected_before_any_write(demo_kb_dir: Path) -> None:
    before = _snapshot(demo_kb_dir)
    with KnowledgeBase.open(demo_kb_dir) as kb:
        with pytest.raises(InputError, match="unknown tier"):
            kb.ingest([Document(id="x", text="text")], tier="admin")
        with pytest.raises(InputError, match="writer"):
            kb.ingest([Document(id="x", text="text")], writer=" ")
    assert _snapshot(demo_kb_dir) == before


def test_indexes_are_persisted_for_the_current_generation_only(demo_kb_dir: Path) -> None:
    """One dense snapshot, named by the change-log position it reflects; the lexical index
    is inside kb.sqlite (no separate BM25 files)."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.ingest([Document(id="tents", text="Tents are checked for seam leaks.")])
        position = kb.store.index_position().current
        chunks = kb.store.counts()["chunks"]
    names = sorted(p.name for p in demo_kb_dir.iterdir()
                   if p.name.startswith(("dense", "bm25", "checksums")))
    assert names == [f"checksums-s{position}.0.json", f"dense-s{position}.0.faiss"]
    with KnowledgeBase.open(demo_kb_dir) as kb:
        dense, lexical = kb.indexes()
        assert len(dense) == len(lexical) == chunks


def test_an_index_that_disagrees_with_the_database_is_rebuilt(demo_kb_dir: Path) -> None:
    """Simulate a crash after the commit: the database moved on, the snapshot did not."""
    old = {p.name: p.read_bytes() for p in demo_kb_dir.iterdir()
           if p.name.startswith(("dense-s", "checksums-s"))}
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.ingest([Document(id="tents", text="Tents are checked for seam leaks.")])
        generation = kb.store.generation()
        position = kb.store.index_position().current
    for path in demo_kb_dir.glob("*-s*.*"):
        path.unlink()
    for name, data in old.items():
        (demo_kb_dir / name).write_bytes(data)
    with KnowledgeBase.open(demo_kb_dir) as kb:
        results = kb.search("seam leaks in tents", k=1)
        assert results[0].doc_id == "tents"  # caught up from the change log
        results = kb.search("parental leave", backend="hybrid", k=3)
        assert results and results[0].doc_id in {"leave-policy", "employee-handbook"}
        assert kb.repair() == generation
    assert [p.name for p in demo_kb_dir.glob("dense-s*")] == [f"dense-s{position}.0.faiss"]
    assert not any((demo_kb_dir / name).exists() for name in old)


def test_read_methods_for_higher_layers(demo_kb_dir: Path) -> None:
    """What eval/ and the pipeline read, without SQL on the store."""
    corpus = load_path(corpus_dir()).documents
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.ingest([Document(id="bikes", text="Bicycles can be returned in 14 days.")])
        kb.delete("refund-policy", by="admin")
        ids = kb.document_ids()
        assert ids[-1] == "bikes" and "refund-policy" not in ids
        assert set(ids) == {d.id for d in corpus} - {"refund-policy"} | {"bikes"}
        assert kb.content_hash_of("bikes") == kb.store.document("bikes")["content_hash"]
        assert kb.content_hash_of("refund-policy") is None

        stored = kb.documents_with_embeddings()
        assert [doc_id for doc_id, _, _ in stored] == ids
        assert sum(len(vectors) for _, _, vectors in stored) == kb.stats()["chunks"]
        doc_id, text, vectors = stored[-1]
        assert (doc_id, text) == ("bikes", "Bicycles can be returned in 14 days.")
        assert vectors.shape == (1, kb.dimension) and vectors.dtype == np.float32
        assert np.allclose(vectors[0], kb.embedder.encode([text])[0], atol=1e-5)

        sample = kb.embedding_sample(limit=5)
        assert sample.shape == (5, kb.dimension)
        assert np.array_equal(sample, kb.embedding_sample(limit=5))
        assert len(kb.embedding_sample()) == kb.stats()["chunks"]  # fewer than the limit

        candidates = kb.search("return a bicycle", backend="bm25", k=3)
        found = kb.embeddings_for(candidates)
        assert set(found) == {c.chunk.pk for c in candidates}
        pks, vectors = kb.store.all_embeddings(kb.dimension)
        by_pk = dict(zip(pks.tolist(), vectors, strict=True))
        assert all(np.array_equal(vector, by_pk[pk]) for pk, vector in found.items())


def test_a_damaged_index_file_fails_its_checksum_and_is_rebuilt(demo_kb_dir: Path) -> None:
    """One flipped byte keeps the file's size and may even load: only the checksum tells."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        generation = kb.store.generation()
        assert kb.check_indexes() == {"generation": generation, "present": True,
                                      "intact": True}
    dense = next(demo_kb_dir.glob("dense-s*.faiss"))
    data = bytearray(dense.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dense.write_bytes(bytes(data))
    with KnowledgeBase.open(demo_kb_dir) as kb:
        assert kb.check_indexes()["intact"] is False
        results = kb.search("parental leave", backend="hybrid", k=3)
        assert results and results[0].doc_id in {"leave-policy", "employee-handbook"}
        assert dense.read_bytes() == bytes(data)  # the reader rebuilt in memory only
        assert kb.repair() == generation
        assert kb.check_indexes()["intact"] is True


def test_a_write_over_its_time_limit_or_lock_wait_writes_nothing(demo_kb_dir: Path) -> None:
    """Issue 17 item 3: a write is bounded in time (the service sets both limits)."""
    import fcntl

    from trishield.errors import BusyError

    before = _snapshot(demo_kb_dir)
    long_text = " ".join(f"Clause {n}: tents may be exchanged within {n} days." for n in range(900))
    with (KnowledgeBase.open(demo_kb_dir, write_time_limit=0.001) as kb,
          pytest.raises(BusyError, match="took longer than")):
        kb.ingest([Document(id="slow", text=long_text)])
    with (demo_kb_dir / "kb.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        with KnowledgeBase.open(demo_kb_dir, lock_timeout=0.2) as kb:
            with pytest.raises(BusyError, match="another writer holds"):
                kb.ingest([Document(id="locked", text="Kayaks are rented by the hour.")])
            assert kb.search("kayaks rented", k=1)  # a reader needs no lock
        fcntl.flock(handle, fcntl.LOCK_UN)
    assert _snapshot(demo_kb_dir) == before


def test_documents_per_writer_follows_every_write(demo_kb_dir: Path) -> None:
    """The track-record counts Ring 2 reads on every question are kept between writes and
    follow each ingest and delete, in this process and in another KB handle."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        before = kb.documents_per_writer()
        assert kb.documents_per_writer() == before  # kept: nothing was written
        kb.ingest([Document("note-1", "A brand new note about the harbour ferry timetable.")],
                  tier="neutral", writer="newcomer")
        assert kb.documents_per_writer() == before | {"newcomer": 1}
        with KnowledgeBase.open(demo_kb_dir) as other:
            other.ingest([Document("note-2", "A second note, on the ferry's winter fares.")],
                         tier="neutral", writer="newcomer")
        assert kb.documents_per_writer()["newcomer"] == 2  # the other handle's write is seen
        kb.delete("note-1", by="admin")
        assert kb.documents_per_writer()["newcomer"] == 1


def test_writers_since_is_each_writers_first_stored_document(demo_kb_dir: Path) -> None:
    """A writer's tenure starts at its first stored document: later documents do not move
    it, another handle's write is seen, and deleting the first moves it to the next one."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        known = kb.writers_since()
        started = time.time()
        kb.ingest([Document("note-1", "A brand new note about the harbour ferry timetable.")],
                  tier="neutral", writer="newcomer")
        first = kb.writers_since()["newcomer"]
        assert started <= first <= time.time()
        assert {w: t for w, t in kb.writers_since().items() if w != "newcomer"} == known
        with KnowledgeBase.open(demo_kb_dir) as other:
            other.ingest([Document("note-2", "A second note, on the ferry's winter fares.")],
                         tier="neutral", writer="newcomer")
        assert kb.writers_since()["newcomer"] == first
        kb.delete("note-1", by="admin")
        assert kb.writers_since()["newcomer"] > first
