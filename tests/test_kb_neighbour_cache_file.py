"""Ring 1's neighbour lists and reference draws saved when a KB handle closes
(``kb/screening/neighbour_cache_file.py``): the next handle screens from them without drawing or
searching its reference sample, with exactly the scores a fresh search gives, through writes
made in between; a file that cannot be used is ignored."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import trishield.kb.screening.neighbour_cache_file as neighbour_cache_file
from test_kb_neighbourhood import ROUNDING, _many_writers_kb, _unit, _write
from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import chunk_document
from trishield.kb.screening.neighbourhood import StoredNeighbourhood
from trishield.rings.ingest_guard import IngestGuard
from trishield.rings.outlier import stored_outlier_scores

WRITERS = {f"w{n:02d}": 1 + n % 3 for n in range(30)} | {"archive": 12}
NEW = _unit(np.random.default_rng(7), 2)


def _screen(kb: KnowledgeBase, writer: str = "newcomer") -> list[dict[str, object]]:
    """Ring 1's screen of two new documents (given embeddings), as an ingest runs it."""
    documents = [Document(id=f"new-{n}", text=f"A new note {n} about the same things.")
                 for n in range(len(NEW))]
    chunks = [chunk_document(d, kb.settings.chunking) for d in documents]
    verdicts, _ = kb._screening.screen(IngestGuard(), documents, chunks, NEW,
                                       ["neutral"] * len(NEW), writer)
    return [verdict.as_dict() for verdict in verdicts]


def _fresh_scores(kb: KnowledgeBase, writer: str = "newcomer") -> np.ndarray:
    """``S_out`` of the new documents from a search of the whole sample, no cache."""
    _, dense, _ = kb._refresh_indexes(persist=False)
    found = stored_outlier_scores(NEW, StoredNeighbourhood(kb.store, dense, kb.dimension,
                                                           writer))
    assert found.scores is not None
    return found.scores


def _cached_scores(kb: KnowledgeBase, writer: str = "newcomer") -> np.ndarray:
    _, dense, _ = kb._refresh_indexes(persist=False)
    found = stored_outlier_scores(NEW, StoredNeighbourhood(kb.store, dense, kb.dimension,
                                                           writer, cache=kb._screening.cache))
    assert found.scores is not None
    return found.scores


def _count_searches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many reference documents each screen searched to fill the cache."""
    searched: list[int] = []
    original = StoredNeighbourhood._cache_documents

    def counted(self: StoredNeighbourhood, cache: object, rows: list[int], depth: int) -> None:
        searched.append(len(rows))
        original(self, cache, rows, depth)  # type: ignore[arg-type]

    monkeypatch.setattr(StoredNeighbourhood, "_cache_documents", counted)
    return searched


def _screen_after_writes_by_another_handle(directory: Path, searched: list[int]) -> int:
    """Writes by another handle between two screens: the saved lists are caught up from the
    change log and only the seven new documents are searched, with the scores a fresh search
    gives. How many writers' draws the screen redrew."""
    with KnowledgeBase.open(directory) as kb:
        _write(kb, "w03", 3, seed=1)
        _write(kb, "fresh", 4, seed=2)
    with KnowledgeBase.open(directory) as kb:
        _screen(kb)
        assert searched[-1] == 7
        np.testing.assert_allclose(_cached_scores(kb), _fresh_scores(kb), rtol=0,
                                   atol=ROUNDING)
        chunks = kb._screening.cache.chunks
        assert chunks.read_in_full == 1  # the new writer; w03's three documents read alone
        for writer, known in chunks.known.items():
            assert known.pks.tolist() == kb.store.chunk_pks_by_writer([writer])[writer].tolist()
        return kb._screening.cache.draws.redrawn


def test_a_closed_handles_lists_serve_the_next_handle_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _many_writers_kb(tmp_path / "kb", WRITERS, secluded=frozenset({"archive"}))
    searched = _count_searches(monkeypatch)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        first = _screen(kb)
        assert searched == [sum(WRITERS.values())]  # cold: the whole sample
        saved_entries = len(kb._screening.cache.entries)
    path = tmp_path / "kb" / neighbour_cache_file.FILE
    assert path.is_file() and not list((tmp_path / "kb").glob(".*.tmp"))
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        assert _screen(kb) == first
        assert searched == [sum(WRITERS.values())], "the second handle searched nothing"
        assert kb._screening.cache.draws.redrawn == 0, "nor drew its sample again"
        assert kb._screening.cache.chunks.read_in_full == 0, "nor read a writer's chunk ids"
        assert len(kb._screening.cache.entries) == saved_entries
        np.testing.assert_allclose(_cached_scores(kb), _fresh_scores(kb), rtol=0,
                                   atol=ROUNDING)
    assert _screen_after_writes_by_another_handle(tmp_path / "kb", searched) == 2
    # a deletion drops the lists that held its chunks (searched again when next needed)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        kb.delete_many(["w05-0", "archive-3"], by="admin")
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
        np.testing.assert_allclose(_cached_scores(kb), _fresh_scores(kb), rtol=0,
                                   atol=ROUNDING)


def test_an_unchanged_cache_is_not_written_again(tmp_path: Path) -> None:
    _many_writers_kb(tmp_path / "kb", WRITERS)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
    path = tmp_path / "kb" / neighbour_cache_file.FILE
    before = os.stat(path)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)  # nothing written since: the same lists at the same position
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        pass  # never screened: never looked at the file
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def _other_kb_file(tmp_path: Path) -> bytes:
    _many_writers_kb(tmp_path / "other", WRITERS)
    with KnowledgeBase.open(tmp_path / "other") as kb:
        _screen(kb)
    return (tmp_path / "other" / neighbour_cache_file.FILE).read_bytes()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "another kb", "old format",
                                    "unsorted list", "draw without a vector",
                                    "codebook without probed lists", "unsorted chunk ids"])
def test_a_saved_file_that_cannot_be_used_is_ignored(
        tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    _many_writers_kb(tmp_path / "kb", WRITERS)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        expected = _screen(kb)
    path = tmp_path / "kb" / neighbour_cache_file.FILE
    good = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a saved cache at all")
    elif damage == "truncated":
        path.write_bytes(good[:len(good) // 2])
    elif damage == "another kb":
        path.write_bytes(_other_kb_file(tmp_path))
    elif damage == "codebook without probed lists":  # lists said to be scored by IVF-PQ codes
        with np.load(path) as saved:
            arrays = dict(saved)
        header = json.loads(str(arrays["header"]))
        arrays["header"] = np.array(json.dumps(header | {"codebook": "0" * 64}))
        with path.open("wb") as handle:
            np.savez(handle, **arrays)
    else:
        with KnowledgeBase.open(tmp_path / "kb") as kb:
            cache = neighbour_cache_file.load(path, kb._screening.identity(), kb.dimension)
            assert cache is not None
            if damage == "old format":
                monkeypatch.setattr(neighbour_cache_file, "FORMAT", 0)
            elif damage == "draw without a vector":
                draw = next(iter(cache.draws.draws.values()))
                draw.vectors = draw.vectors[:-1]
            elif damage == "unsorted chunk ids":
                known = next(k for k in cache.chunks.known.values() if len(k.pks) > 1)
                known.pks = known.pks[::-1].copy()
            else:
                entry = next(e for e in cache.entries.values() if len(e.scores) > 1)
                entry.scores = entry.scores[::-1].copy()
            neighbour_cache_file.save(cache, path, kb._screening.identity(), kb.dimension)
            monkeypatch.undo()
    searched = _count_searches(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="trishield.kb"), \
            KnowledgeBase.open(tmp_path / "kb") as kb:
        assert _screen(kb) == expected
        assert searched == [sum(WRITERS.values())], "searched afresh"
    assert "are not used" in caplog.text
    with KnowledgeBase.open(tmp_path / "kb") as kb:  # the next close wrote a good one
        assert neighbour_cache_file.load(path, kb._screening.identity(),
                                         kb.dimension) is not None


def test_a_file_the_change_log_no_longer_reaches_starts_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _many_writers_kb(tmp_path / "kb", WRITERS)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _write(kb, "w02", 2, seed=3)
        kb.store.prune_index_log(kb.store.index_position().current)
    searched = _count_searches(monkeypatch)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
        assert searched == [sum(WRITERS.values()) + 2]
        np.testing.assert_allclose(_cached_scores(kb), _fresh_scores(kb), rtol=0,
                                   atol=ROUNDING)


def test_a_save_that_fails_leaves_nothing_and_does_not_fail_the_close(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    _many_writers_kb(tmp_path / "kb", WRITERS)

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(neighbour_cache_file.np, "savez", full_disk)
    with caplog.at_level(logging.WARNING, logger="trishield.kb"), \
            KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
    assert "were not saved (No space left on device)" in caplog.text
    assert sorted(p.name for p in (tmp_path / "kb").iterdir()
                  if "neighbours" in p.name) == []


def test_a_copied_kb_keeps_its_lists_and_a_new_kb_ignores_them(tmp_path: Path) -> None:
    """The file belongs to the KB it was saved by (its creation time and embedding model),
    so a copy of the whole directory uses it and another KB given the file does not."""
    _many_writers_kb(tmp_path / "kb", WRITERS)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
        identity = kb._screening.identity()
    shutil.copytree(tmp_path / "kb", tmp_path / "copy")
    with KnowledgeBase.open(tmp_path / "copy") as kb:
        assert kb._screening.identity() == identity
    path = tmp_path / "copy" / neighbour_cache_file.FILE
    assert neighbour_cache_file.load(path, identity, 384) is not None
    assert neighbour_cache_file.load(path, identity | {"created_at": "0"}, 384) is None
    assert neighbour_cache_file.load(path, identity, 768) is None


def test_repair_discards_the_saved_lists(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``trishield repair`` rebuilds what is derived from the database: the lists too (a
    ``kb.sqlite`` restored from a backup and written to since has another history than the
    one the change log would catch them up on)."""
    _many_writers_kb(tmp_path / "kb", WRITERS)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
        kb.repair()
        assert not (tmp_path / "kb" / neighbour_cache_file.FILE).exists()
    assert not (tmp_path / "kb" / neighbour_cache_file.FILE).exists(), "not saved again"
    searched = _count_searches(monkeypatch)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        _screen(kb)
        assert searched == [sum(WRITERS.values())]


def test_lists_scored_through_ivfpq_codes_serve_the_next_handle_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a trained IVF-PQ index the saved lists carry the codebooks' fingerprint and each
    document's probed lists: the next handle (its index loaded from the snapshot) screens
    from them, catches them up through writes by another handle, and scores what a fresh
    search of the index scores."""
    import trishield.kb.indexes.dense as indexes
    from test_kb_neighbourhood import IVF_TRAINED_AT

    monkeypatch.setattr(indexes, "IVF_MIN_TRAIN", IVF_TRAINED_AT)
    writers = {f"w{n:02d}": 6 + n % 4 for n in range(40)}
    _many_writers_kb(tmp_path / "kb", writers, dense_index="ivfpq")
    searched = _count_searches(monkeypatch)
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        first = _screen(kb)
        with kb._lock.hold():  # a snapshot, as an ingest saves one: later handles load it
            codes = kb._refresh_indexes(persist=True)[1].codes
        assert codes is not None and kb._screening.cache.codebook == codes.fingerprint
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        assert _screen(kb) == first
        assert len(searched) == 1, "the second handle searched nothing"
        cache = kb._screening.cache
        assert cache.codebook == codes.fingerprint
        assert all(entry.probes is not None and len(entry.probes) == indexes.IVF_NPROBE
                   for entry in cache.entries.values())
        np.testing.assert_allclose(_cached_scores(kb), _fresh_scores(kb), rtol=0,
                                   atol=ROUNDING)
    _screen_after_writes_by_another_handle(tmp_path / "kb", searched)
