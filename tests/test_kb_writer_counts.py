"""Per-writer document counts and versions kept by triggers (``kb/store/writer_counts.py``): they
equal a count of the stored documents after every kind of write, and a writer's version moves
exactly when one of its stored documents is inserted or deleted."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import chunk_document


def _counted(kb: KnowledgeBase) -> dict[str, int]:
    return dict(kb.store.connection.execute(
        "SELECT writer, COUNT(*) FROM documents GROUP BY writer ORDER BY writer"))


def _write(kb: KnowledgeBase, writer: str, ids: list[str], *, held: list[str] = ()) -> None:
    rng = np.random.default_rng(len(ids) + sum(map(len, ids)))
    documents = [Document(id=doc_id, text=f"Note {doc_id} written by {writer}.") for doc_id
                 in ids]
    vectors = rng.standard_normal((len(ids), kb.dimension)).astype(np.float32)
    with kb.store.transaction() as connection:
        kb.store.write_batch(
            connection, documents=documents,
            chunks=[chunk_document(d, kb.settings.chunking) for d in documents],
            embeddings=vectors / np.linalg.norm(vectors, axis=1, keepdims=True),
            tier="neutral", writer=writer, source="test",
            quarantined=[(Document(id=doc_id, text=f"Held {doc_id}."), {"reason": "test"})
                         for doc_id in held])


def test_counts_and_versions_follow_inserts_deletes_updates_and_quarantine(
        tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        assert kb.store.documents_per_writer() == {} == kb.store.writer_versions()
        _write(kb, "alice", ["a1", "a2", "a3"])
        _write(kb, "bob", ["b1"], held=["b-held"])  # a held document is not stored
        assert kb.store.documents_per_writer() == _counted(kb) == {"alice": 3, "bob": 1}
        versions = kb.store.writer_versions()
        _write(kb, "carol", ["c1", "c2"])
        kb.delete_many(["a2"], by="admin")
        after = kb.store.writer_versions()
        assert after["bob"] == versions["bob"]  # untouched writers keep their version
        assert after["alice"][0] == 2 and after["alice"][1] > versions["alice"][1]
        with kb.store.transaction() as connection:  # an update: retired, then written again
            kb.store.retire_document(connection, "c1", by="carol", replaced_by="h",
                                     source="test")
        _write(kb, "carol", ["c1"])
        assert kb.store.writer_versions()["carol"] == (2, after["carol"][1] + 2)
        kb.delete_many(["b1"], by="admin")  # bob has none left: not listed, row kept
        assert kb.store.documents_per_writer() == _counted(kb) == {"alice": 2, "carol": 2}
        assert "bob" not in kb.store.writer_versions()
        bob_version = kb.store.connection.execute(
            "SELECT version FROM writer_documents WHERE writer = 'bob'").fetchone()[0]
        _write(kb, "bob", ["b2"])
        assert kb.store.writer_versions()["bob"] == (1, bob_version + 1)  # never goes back
        assert kb.store.documents_per_writer() == _counted(kb)

