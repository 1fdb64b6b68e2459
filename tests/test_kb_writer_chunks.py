"""Each writer's chunk row ids kept between screened writes (``kb/screening/writer_chunks.py``):
what a fresh read gives through writes, deletes, a row id taken again and writers leaving, reading a
writer in full only when it lost a document."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import ChunkingConfig, chunk_document
from trishield.kb.screening.writer_chunks import WriterChunks


def _write(kb: KnowledgeBase, writer: str, count: int, tag: str, words: int = 6) -> None:
    rng = np.random.default_rng(abs(hash((writer, tag))) % 2**32)
    documents = [Document(id=f"{writer}-{tag}-{n}",
                          text=" ".join(f"w{tag}{n}x{i}" for i in range(words)))
                 for n in range(count)]
    chunks = [chunk_document(d, ChunkingConfig(words=4, overlap=0)) for d in documents]
    vectors = rng.standard_normal((sum(map(len, chunks)), kb.dimension)).astype(np.float32)
    with kb.store.transaction() as connection:
        kb.store.write_batch(
            connection, documents=documents, chunks=chunks,
            embeddings=vectors / np.linalg.norm(vectors, axis=1, keepdims=True),
            tier="neutral", writer=writer, source="test")


def _check(kb: KnowledgeBase, known: WriterChunks, writers: list[str]) -> None:
    got = known.of(kb.store, writers, kb.store.writer_versions())
    fresh = kb.store.chunk_pks_by_writer(writers)
    assert sorted(got) == sorted(fresh)
    for name in writers:
        np.testing.assert_array_equal(got[name], fresh[name], err_msg=name)


def test_kept_chunk_ids_are_a_fresh_read_through_every_kind_of_change(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        for name in ("a", "b", "c"):
            _write(kb, name, 3, "start")
        known = WriterChunks()
        writers = ["a", "b", "c", "d"]
        _check(kb, known, writers)
        assert known.read_in_full == 4
        _write(kb, "a", 2, "more")  # added only: read in part
        _write(kb, "d", 1, "new")  # a writer that had none
        _check(kb, known, writers)
        assert known.read_in_full == 4
        kb.delete_many(["b-start-1"], by="admin")  # a delete: b read in full
        _check(kb, known, writers)
        assert known.read_in_full == 5
        newest = max(kb.store.document_pks_of_writer("d"))
        kb.delete_many(["d-new-0"], by="admin")  # the table's last row: its id is taken again
        _write(kb, "c", 1, "again")
        assert max(kb.store.document_pks_of_writer("c")) == newest
        _check(kb, known, writers)
        kb.delete_many([f"a-{tag}-{n}" for tag, count in (("start", 3), ("more", 2))
                        for n in range(count)], by="admin")  # a leaves the KB
        _check(kb, known, writers)
        _check(kb, known, writers)  # unchanged: nothing read
        assert known.read_in_full == 7  # d and a
