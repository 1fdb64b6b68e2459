"""Ring 1's reference sample kept between screened writes (``kb/reference_draw.py``): the
handle's draws are, document for document, what drawing from every stored document gives,
through writes, deletions, writers joining and leaving (the per-writer share moving) and
different batch writers; and a write redraws only its own writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trishield.kb.reference_draw as reference_draw
from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import chunk_document
from trishield.kb.reference_draw import ReferenceDraws, writer_seed


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
        if len(chosen) > share:
            rng = np.random.default_rng([seed, writer_seed(name)])
            chosen = [chosen[i] for i in sorted(rng.choice(len(chosen), share, replace=False))]
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
        _write(kb, "w07", 2, "more")
        drawn = draws.draw(kb.store, kb.dimension, excluding="w00")
        assert draws.redrawn == 30  # w07 alone
        assert (drawn.pks, list(drawn.writers)) == _fresh_draw(kb, "w00")
        drawn = draws.draw(kb.store, kb.dimension, excluding="w07")  # another batch writer:
        assert draws.redrawn == 31  # w00 joins the sample, w07 leaves it; nothing redrawn
        assert (drawn.pks, list(drawn.writers)) == _fresh_draw(kb, "w07")
