"""The neighbour cache's row arrays (``kb/screening/neighbour_cache.py``, ``_EntryRows``): each
cached document's vector, writer and bar as the catch-up reads them, matched to its entry object
through replacements, removals and the dropping of stale rows. That every list stays exact
through writes is tested end to end in ``test_kb_neighbourhood.py``."""

from __future__ import annotations

import numpy as np
import pytest

from trishield.kb.screening.neighbour_cache import CachedNeighbours, _EntryRows

DIMENSION = 8


def _entry(rng: np.random.Generator, writer: str, exhausted: bool) -> CachedNeighbours:
    depth = 6
    length = 3 if exhausted else depth
    return CachedNeighbours(writer, rng.standard_normal(DIMENSION).astype(np.float32),
                            np.array([1], np.int64), np.arange(length, dtype=np.int64),
                            np.sort(rng.random(length).astype(np.float32))[::-1], depth)


def _assert_rows_match(arrays: _EntryRows, entries: dict[int, CachedNeighbours]) -> None:
    listed = list(entries.values())
    names = [e.writer for e in listed]
    asked_before = arrays.writer_codes(names)  # as a catch-up codes the added chunks' writers
    rows = arrays.align(entries)
    assert len(set(rows.tolist())) == len(rows)
    assert np.array_equal(arrays.vectors[rows], np.stack([e.vector for e in listed]))
    assert np.array_equal(arrays.bars[rows],
                          np.array([e.bar for e in listed], dtype=np.float32))
    codes = arrays.writers[rows]
    assert np.array_equal(codes, asked_before)  # a writer's code outlives dropped rows
    assert len(set(codes.tolist())) == len(set(names))


def test_rows_follow_the_entries_through_replacements_removals_and_drops() -> None:
    rng = np.random.default_rng(3)
    arrays = _EntryRows()
    entries = {pk: _entry(rng, f"w{pk % 7}", pk % 4 == 0) for pk in range(300)}
    _assert_rows_match(arrays, entries)
    first_rows = arrays.align(entries)
    assert np.array_equal(arrays.align(entries), first_rows)  # nothing changed: same rows
    next_pk = 300
    dropped = False
    for round_ in range(40):
        for pk in list(entries)[:: 5 + round_ % 3]:  # removed documents
            del entries[pk]
        for pk in list(entries)[:10]:  # a document's list searched again: a new object
            entries[pk] = _entry(rng, entries[pk].writer, False)
        for _ in range(60):  # new documents, some by new writers
            entries[next_pk] = _entry(rng, f"w{next_pk % 23}", next_pk % 3 == 0)
            next_pk += 1
        used_before = arrays.used
        _assert_rows_match(arrays, entries)
        dropped |= arrays.used < used_before
        assert arrays.used <= 2 * len(entries) + 256 + len(entries)
    assert dropped  # the stale rows were dropped at least once, and the rows still matched


def test_a_raised_bar_is_kept_and_an_empty_cache_has_no_rows() -> None:
    rng = np.random.default_rng(5)
    arrays = _EntryRows()
    entries = {1: _entry(rng, "a", True), 2: _entry(rng, "b", False)}
    rows = arrays.align(entries)
    assert arrays.bars[rows[0]] == -np.inf and arrays.bars[rows[1]] == entries[2].scores[-1]
    arrays.bars[rows[1]] = 0.99  # as _merge_added records a merge
    assert arrays.align(entries)[1] == rows[1] and arrays.bars[rows[1]] == np.float32(0.99)
    assert len(arrays.align({})) == 0


def test_rows_seeded_from_one_array_are_those_align_would_make() -> None:
    rng = np.random.default_rng(9)
    entries = {pk: _entry(rng, f"w{pk % 5}", pk % 3 == 0) for pk in range(50)}
    stacked = np.stack([entry.vector for entry in entries.values()])
    for entry, row in zip(entries.values(), stacked, strict=True):
        entry.vector = row  # as the saved lists' file gives them: rows of one array
    arrays = _EntryRows()
    arrays.seed(entries, stacked)
    assert np.array_equal(arrays.align(entries), np.arange(50)) and arrays.used == 50
    _assert_rows_match(arrays, entries)
    entries[99] = _entry(rng, "new", False)  # a row appended later leaves the array alone
    before = stacked.copy()
    _assert_rows_match(arrays, entries)
    assert np.array_equal(stacked, before) and arrays.used == 51
    with pytest.raises(ValueError, match="rows made already"):
        arrays.seed(entries, np.zeros((51, DIMENSION), np.float32))
    with pytest.raises(ValueError, match="49 vectors for 51 entries"):
        _EntryRows().seed(entries, np.zeros((49, DIMENSION), np.float32))
