"""Ring 1's reference sample kept between screened writes (``kb/screening/reference_draw.py``): the
handle's draws are, document for document, what drawing from every stored document gives,
through writes, deletions, writers joining and leaving (the per-writer share moving) and
different batch writers; a write redraws only its own writer; and the draw is stable: a
write changes at most one sampled document, a share that moves takes a prefix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trishield.kb.screening.reference_draw as reference_draw
from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import chunk_document
from trishield.kb.screening.reference_draw import ReferenceDraws, draw_keys, writer_sample


def _fresh_draw(kb: KnowledgeBase, excluding: str, seed: int = 0) -> tuple[list[int], list[str]]:
    """The sample as it was drawn before draws were kept: every stored document read, grouped
    by writer, the share from the number of writers."""
    grouped: dict[str, list[int]] = {}
    for pk, writer in kb.store.connection.execute(
            "SELECT pk, writer FROM documents WHERE writer != ? ORDER BY pk", (excluding,)):
        grouped.setdefault(writer, []).append(pk)
    share = min(reference_draw.REFERENCE_PER_WRITER,
                max(1, reference_draw.REFERENCE_SIZE // max(len(grouped), 1)))
    pks: list[int] = []
    writers: list[str] = []
    for name in sorted(grouped):
        chosen = grouped[name]
        if len(chosen) > share:  # the smallest keys, found by sorting every key here
            keys = draw_keys(np.array(chosen), name, seed).tolist()
            chosen = sorted(pk for _, pk in sorted(zip(keys, chosen, strict=True))[:share])
        pks += chosen
        writers += [name] * len(chosen)
    return pks, writers


def _write(kb: KnowledgeBase, writer: str, count: int, tag: str) -> None:
    rng = np.random.default_rng(abs(hash((writer, tag))) % 2**32)
    documents = [Document(id=f"{writer}-{tag}-{n}", text=f"Note {n} of {tag} by {writer}.")
                 for n in range(count)]
    vectors = rng.standard_normal((count, kb.dimension)).astype(np.float32)
    with kb.store.transaction() as connection:
        kb.store.write_batch(
            connection, documents=documents,
            chunks=[chunk_document(d, kb.settings.chunking) for d in documents],
            embeddings=vectors / np.linalg.norm(vectors, axis=1, keepdims=True),
            tier="neutral", writer=writer, source="test")


def test_kept_draws_are_the_fresh_draw_through_every_kind_of_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference_draw, "REFERENCE_SIZE", 24)  # the share moves at 3-24
    monkeypatch.setattr(reference_draw, "REFERENCE_PER_WRITER", 6)
    steps: list[tuple[str, object]] = [
        ("big", ("w0", 2)), ("w1", ("w1", 3)), ("big", ("new-a", 1)), ("w2", ("new-b", 9)),
        ("new-a", "delete-w0"), ("big", ("new-c", 1)), ("w3", ("new-d", 1)),
        ("new-d", "delete-new-b"), ("big", ("big", 4)), ("w0", None)]
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        _write(kb, "big", 30, "start")
        for number in range(4):
            _write(kb, f"w{number}", 2 + 3 * number, "start")
        draws = ReferenceDraws()
        for number, (batch_writer, then) in enumerate(steps):
            drawn = draws.draw(kb.store, kb.dimension, excluding=batch_writer)
            pks, writers = _fresh_draw(kb, batch_writer)
            assert (drawn.pks, list(drawn.writers)) == (pks, writers), f"step {number}"
            np.testing.assert_array_equal(
                drawn.vectors, kb.store.document_vectors(pks, kb.dimension))
            if then == "delete-w0":
                kb.delete_many([f"w0-start-{n}" for n in range(2)] + ["w0-0-0", "w0-0-1"],
                               by="admin")  # w0 leaves the KB: the share moves back
            elif isinstance(then, str):
                kb.delete_many([f"new-b-{number - 4}-0", f"new-b-{number - 4}-3"],
                               by="admin")
            elif then is not None:
                _write(kb, then[0], then[1], str(number))


def test_a_write_redraws_only_its_own_writer(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        for number in range(30):
            _write(kb, f"w{number:02d}", 3 + number % 5, "start")
        draws = ReferenceDraws()
        draws.draw(kb.store, kb.dimension, excluding="w00")
        assert draws.redrawn == 29
        assert draws.read_every == 29
        _write(kb, "w07", 2, "more")
        drawn = draws.draw(kb.store, kb.dimension, excluding="w00")
        assert draws.redrawn == 30  # w07 alone
        assert draws.read_every == 29  # from its last draw and its two new documents
        assert (drawn.pks, list(drawn.writers)) == _fresh_draw(kb, "w00")
        drawn = draws.draw(kb.store, kb.dimension, excluding="w07")  # another batch writer:
        assert draws.redrawn == 31  # w00 joins the sample, w07 leaves it; nothing redrawn
        assert (drawn.pks, list(drawn.writers)) == _fresh_draw(kb, "w07")


def test_the_draw_is_stable_under_appends_and_share_moves() -> None:
    pks = np.arange(1, 2001, dtype=np.int64)
    drawn = set(writer_sample(pks, "writer", 40).tolist())
    entered = 0
    for new in range(2001, 2301):  # one document more at a time
        after = set(writer_sample(np.arange(1, new + 1), "writer", 40).tolist())
        assert len(after - drawn) <= 1 and len(drawn - after) == len(after - drawn)
        entered += len(after - drawn)
        drawn = after
    assert 0 < entered < 30  # a new document enters about share / documents of the time
    smaller = set(writer_sample(pks, "writer", 25).tolist())
    assert smaller < set(writer_sample(pks, "writer", 40).tolist())  # a prefix of the same order
    assert set(writer_sample(pks, "another", 40).tolist()) != \
        set(writer_sample(pks, "writer", 40).tolist())
    assert set(writer_sample(pks, "writer", 40, seed=1).tolist()) != \
        set(writer_sample(pks, "writer", 40).tolist())
    assert writer_sample(pks[:30], "writer", 40).tolist() == list(range(1, 31))  # all of them


def test_the_draw_is_a_uniform_sample() -> None:
    """Each document is drawn about share / documents of the time over many writers (a
    bias to old or new row ids would tilt the calibration)."""
    counts = np.zeros(200)
    for number in range(2000):
        counts[writer_sample(np.arange(200), f"w{number}", 20)] += 1
    expected = 2000 * 20 / 200
    assert abs(counts[:100].sum() - counts[100:].sum()) < 0.05 * counts.sum()
    assert counts.min() > expected * 0.6 and counts.max() < expected * 1.4


def test_a_row_id_taken_again_is_read_again(tmp_path: Path) -> None:
    """SQLite gives a deleted last row's id to the next document: a draw that reused the
    vector it remembered for that id would calibrate on a document no longer stored."""
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        for name in ("a", "b", "c"):
            _write(kb, name, 3, "start")
        draws = ReferenceDraws()
        draws.draw(kb.store, kb.dimension, excluding="b")
        last = max(kb.store.document_pks_of_writer("c"))
        kb.delete_many(["c-start-2"], by="admin")
        _write(kb, "c", 1, "again")
        assert max(kb.store.document_pks_of_writer("c")) == last  # the id was taken again
        drawn = draws.draw(kb.store, kb.dimension, excluding="b")
        np.testing.assert_array_equal(
            drawn.vectors, kb.store.document_vectors(drawn.pks, kb.dimension))


def test_a_share_that_shrinks_reads_no_document(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference_draw, "REFERENCE_SIZE", 12)
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        for name in ("a", "b", "c"):
            _write(kb, name, 9, "start")
        draws = ReferenceDraws()
        draws.draw(kb.store, kb.dimension, excluding="x")  # share 4 of 9 each
        _write(kb, "d", 1, "start")  # share 3: a prefix of each draw
        drawn = draws.draw(kb.store, kb.dimension, excluding="x")
        assert draws.read_every == 4  # a, b, c, then d
        assert (drawn.pks, list(drawn.writers)) == _fresh_draw(kb, "x")
        kb.delete_many(["d-start-0"], by="admin")  # share 4 again: more than drawn, read all
        drawn = draws.draw(kb.store, kb.dimension, excluding="x")
        assert draws.read_every == 7
        assert (drawn.pks, list(drawn.writers)) == _fresh_draw(kb, "x")


def test_document_vectors_are_each_documents_own_mean_bit_for_bit(tmp_path: Path) -> None:
    """Documents of one to a dozen chunks, averaged by chunk count together: every vector is the
    normalised mean of its own chunks as computed one document at a time (the same bits, so
    a screen's verdicts cannot move), in the order asked, zero for an unknown row id."""
    rng = np.random.default_rng(4)
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        documents = [Document(id=f"d{n}", text=" ".join(["word"] * (40 + 190 * (n % 9))))
                     for n in range(40)]
        chunks = [chunk_document(d, kb.settings.chunking) for d in documents]
        assert len({len(c) for c in chunks}) >= 6 and min(map(len, chunks)) == 1
        vectors = rng.standard_normal((sum(map(len, chunks)), kb.dimension)).astype(np.float32)
        with kb.store.transaction() as connection:
            kb.store.write_batch(connection, documents=documents, chunks=chunks,
                                 embeddings=vectors, tier="neutral", writer="w", source="t")
        doc_pks = [pk for (pk,) in kb.store.connection.execute(
            "SELECT pk FROM documents ORDER BY pk DESC")] + [10_000]
        got = kb.store.document_vectors(doc_pks, kb.dimension)
        for row, doc_pk in enumerate(doc_pks[:-1]):
            blobs = [blob for (blob,) in kb.store.connection.execute(
                "SELECT embedding FROM chunks WHERE doc_pk = ? ORDER BY chunk_index", (doc_pk,))]
            mean = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(
                len(blobs), kb.dimension).mean(axis=0)
            assert np.array_equal(got[row], mean / np.linalg.norm(mean)), doc_pk
        assert not got[-1].any()
