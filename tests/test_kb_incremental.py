"""Issue 19: indexes that take in one write at a time instead of being rebuilt.

Every test runs the real KB (real embedder, SQLite, FAISS, FTS5); the readers "in another
process" are real subprocesses, and the crash test kills a real CLI process with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import trishield.kb.indexes.dense as indexes
import trishield.kb.indexes.snapshots as dense_snapshots
from trishield.kb import Document, KnowledgeBase
from trishield.kb.indexes.backend import EmbeddedBackend, IndexBackend, catch_up
from trishield.kb.indexes.dense import TOMBSTONE_SHARE, DenseIndex
from trishield.kb.indexes.lexical import LexicalIndex
from trishield.kb.locking import FAULT_PAUSE_ENV
from trishield.kb.store import Store
from trishield.kb.store.change_log import Position
from trishield.kb.store.fts import ANALYZER

TOPICS = ["tents", "stoves", "kayaks", "boots", "jackets", "lanterns", "ropes", "compasses"]


def _documents(prefix: str, count: int) -> list[Document]:
    return [Document(id=f"{prefix}-{n}", text=f"Rule {prefix} {n}: {TOPICS[n % len(TOPICS)]} "
                     f"bought in store {n} may be exchanged within {10 + n} days if unused.")
            for n in range(count)]


def _kb(directory: Path, kind: str = "flat", engine: str = "embedded") -> KnowledgeBase:
    return KnowledgeBase.open(directory, create=True, dense_index=kind,
                              engine=_engine_uri(directory, engine))


def _engine_uri(directory: Path, engine: str) -> str:
    """``embedded``, or a Milvus Lite folder beside the KB (tests/test_kb_engines.py has the
    engine's own tests; these are the retrieval tests both engines must pass)."""
    if engine == "embedded":
        return engine
    pytest.importorskip("milvus_lite", reason="the Milvus engine needs 'trishield[milvus]'")
    return str(directory.parent / f"{directory.name}-engine.db")


ENGINES = ["embedded", "milvus"]


def test_the_embedded_backend_is_an_index_backend(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.indexes()
        backend = kb._dense_indexes.backend
        assert isinstance(backend, EmbeddedBackend) and isinstance(backend, IndexBackend)
        assert len(backend) == kb.store.counts()["chunks"]
        assert backend.position == kb.store.index_position().current


def test_a_one_document_ingest_touches_only_its_rows(demo_kb_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """No read of every embedding, no new dense index: the write's rows go into the index
    already in memory, and the lexical index took them in the same transaction."""
    monkeypatch.setattr(dense_snapshots, "SNAPSHOT_ALWAYS_BELOW", 0)  # the large-KB policy
    full_reads = []
    original = Store.all_embeddings
    monkeypatch.setattr(Store, "all_embeddings",
                        lambda self, dimension: full_reads.append(1) or original(self, dimension))
    with KnowledgeBase.open(demo_kb_dir) as kb:
        dense, lexical = kb.indexes()
        full_reads.clear()
        before = kb.store.index_position().current
        rows_before = len(dense)
        snapshots = sorted(p.name for p in demo_kb_dir.glob("dense-s*.faiss"))
        report = kb.ingest([Document(id="tents", text="Tents are checked for seam leaks.")])
        after_dense, _ = kb.indexes()
        new_pks = [pk for (pk,) in kb.store.connection.execute(
            "SELECT c.pk FROM chunks c JOIN documents d ON d.pk = c.doc_pk "
            "WHERE d.doc_id = 'tents'")]
        delta = kb.store.index_delta(before, kb.store.index_position().current, kb.dimension)
        assert after_dense is dense and len(dense) == len(lexical)
        assert report.chunks_added == len(new_pks) and len(dense) == rows_before + len(new_pks)
        assert delta.added_ids.tolist() == new_pks and delta.removed.size == 0
        assert full_reads == []
        assert sorted(p.name for p in demo_kb_dir.glob("dense-s*.faiss")) == snapshots
        assert kb.search("seam leaks in tents", k=1)[0].doc_id == "tents"
        assert kb.search("seam leaks in tents", backend="bm25", k=1)[0].doc_id == "tents"
    # a fresh handle catches up from the older snapshot and the log
    with KnowledgeBase.open(demo_kb_dir) as kb:
        assert kb.search("seam leaks in tents", k=1)[0].doc_id == "tents"
        assert kb.check_indexes()["intact"] is True


@pytest.mark.parametrize(("kind", "engine"), [("flat", "embedded"), ("hnsw", "embedded"),
                                               ("ivfpq", "embedded"), ("flat", "milvus")])
def test_a_deleted_document_leaves_the_results(tmp_path: Path, kind: str, engine: str) -> None:
    with _kb(tmp_path / "kb", kind, engine) as kb:
        kb.ingest(_documents("rule", 12))
        kb.indexes()
        target = "rule-3"
        query = "kayaks bought in store 3 exchanged within 13 days"
        assert target in {c.doc_id for c in kb.search(query, k=3)}
        kb.delete(target, by="admin")
        for backend in ("dense", "bm25", "hybrid"):
            found = {c.doc_id for c in kb.search(query, backend=backend, k=12)}
            assert target not in found and len(found) == 11
        dense, lexical = kb.indexes()
        assert len(dense) == len(lexical) == kb.store.counts()["chunks"] == 11
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        assert target not in {c.doc_id for c in kb.search(query, k=12)}


def test_a_reused_row_id_gets_its_new_vector(tmp_path: Path) -> None:
    """SQLite reuses the highest row id after it is deleted: the graph must not keep
    answering with the old vector under that id."""
    with _kb(tmp_path / "kb", "hnsw") as kb:
        kb.ingest(_documents("rule", 6))
        kb.ingest([Document(id="old", text="Lanterns need two spare batteries in winter.")])
        dense, _ = kb.indexes()
        old_pk = max(dense.vectors()[0])
        kb.delete("old", by="admin")
        kb.ingest([Document(id="new", text="Ropes are inspected for frayed strands yearly.")])
        new_pk = kb.store.connection.execute(
            "SELECT c.pk FROM chunks c JOIN documents d ON d.pk = c.doc_pk "
            "WHERE d.doc_id = 'new'").fetchone()[0]
        assert new_pk == old_pk and dense.tombstones == 1
        assert kb.search("frayed rope strands", k=1)[0].doc_id == "new"
        lantern = kb.embedder.encode(["Lanterns need two spare batteries in winter."])[0]
        hits = dict(dense.search(lantern, 7))
        assert hits.get(new_pk, 0.0) < 0.9  # the old vector is gone with its tombstone


_READER = """
import json, sys
from trishield.kb import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    query, backend = json.loads(line)
    print(json.dumps([c.doc_id for c in kb.search(query, backend=backend, k=3)]), flush=True)
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_a_reader_in_another_process_sees_new_and_deleted_rows(demo_kb_dir: Path,
                                                               engine: str) -> None:
    """On Milvus Lite (one process per folder) the reader holds the engine, so the writer's
    own catch-up fails: its commit stands with a warning, and the reader, finding the write
    lock free, catches the engine up from the change log before it searches."""
    if engine != "embedded":
        with KnowledgeBase.open(demo_kb_dir) as kb:
            kb.attach_engine(_engine_uri(demo_kb_dir, engine))
    environment = dict(os.environ)
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(demo_kb_dir)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=environment)

    def ask(query: str, backend: str) -> list[str]:
        reader.stdin.write(json.dumps([query, backend]) + "\n")
        reader.stdin.flush()
        return json.loads(reader.stdout.readline())

    try:
        assert reader.stdout.readline().strip() == "ready"
        query = "seam leaks in tents"
        assert "tents" not in ask(query, "hybrid")  # its indexes are loaded now
        with KnowledgeBase.open(demo_kb_dir) as kb:
            report = kb.ingest([Document(id="tents", text="Tents are checked for seam leaks.")])
        assert len(report.warnings) == (engine != "embedded")
        assert ask(query, "dense")[0] == "tents"
        # Milvus Lite weighs BM25 terms per segment (see tests/test_kb_engines.py): a row
        # just written is found, though not always first
        assert ask(query, "bm25")[0] == "tents" if engine == "embedded" else \
            "tents" in ask(query, "bm25")
        with KnowledgeBase.open(demo_kb_dir) as kb:
            kb.delete("tents", by="admin")
        assert "tents" not in ask(query, "dense") + ask(query, "bm25")
    finally:
        reader.stdin.close()
        reader.wait(timeout=60)


def test_hnsw_tombstones_are_skipped_and_compacted(tmp_path: Path) -> None:
    directory = tmp_path / "kb"
    with _kb(directory, "hnsw") as kb:
        kb.ingest(_documents("rule", 20))
        dense, _ = kb.indexes()
        kb.delete("rule-0", by="admin")
        kb.delete("rule-1", by="admin")
        assert dense.tombstones == 2 and len(dense) == 18
        assert dense.tombstone_share < TOMBSTONE_SHARE
        found = {c.doc_id for c in kb.search("tents stoves kayaks boots", k=20)}
        assert found.isdisjoint({"rule-0", "rule-1"}) and len(found) == 18
    compacted = subprocess.run([sys.executable, "-m", "trishield.cli", "compact", "--kb",
                                str(directory), "--json"], capture_output=True, text=True,
                               timeout=300)
    assert compacted.returncode == 0, compacted.stderr
    report = json.loads(compacted.stdout)
    assert report["chunks"] == 18 and report["dense_index"] == "hnsw"
    with KnowledgeBase.open(directory) as kb:
        dense, _ = kb.indexes()
        assert dense.tombstones == 0 and len(dense) == 18
        assert kb.check_indexes()["intact"] is True
        # past the threshold the graph is rebuilt by the write itself: the 4th delete makes
        # 4 of 18 nodes tombstones (> 20 %), the next two leave 2 of 14
        for n in range(2, 6):
            kb.delete(f"rule-{n}", by="admin")
        assert kb.indexes()[0].tombstones == 0
        for n in range(6, 8):
            kb.delete(f"rule-{n}", by="admin")
        dense, _ = kb.indexes()
        assert dense.tombstones == 2 and len(dense) == 12
        assert {c.doc_id for c in kb.search("tents stoves", k=20)}.isdisjoint(
            {f"rule-{n}" for n in range(8)})


def test_fts5_bm25_ranking(tmp_path: Path) -> None:
    with _kb(tmp_path / "kb") as kb:
        kb.ingest([
            Document(id="one", text="A bicycle may be returned. Helmets are sold separately."),
            Document(id="many", text="Bicycles, bicycles, bicycles: every bicycle is checked."),
            Document(id="none", text="Tents may be exchanged within thirty days."),
            Document(id="rare", text="The warranty of a unicycle lasts two years."),
        ])
        hits = kb.search("bicycles", backend="bm25", k=5)
        assert [c.doc_id for c in hits] == ["many", "one"]  # stemmed; tf raises the score
        assert hits[0].score > hits[1].score > 0
        # a rare term outweighs a common one
        assert kb.search("bicycle warranty", backend="bm25", k=1)[0].doc_id == "rare"
        assert kb.search("the of a", backend="bm25", k=3) == []  # stop words only
        assert kb.unknown_terms("Is a unicycle or a kayak covered?") == ["kayak", "cover"]
        kb.delete("rare", by="admin")
        assert "unicycl" in kb.unknown_terms("unicycle")


def test_a_kill_while_a_snapshot_is_written_leaves_a_working_kb(demo_kb_dir: Path) -> None:
    """SIGKILL after the new snapshot file is written but before its checksums: the older
    snapshot and the change log still serve, `repair` finds them intact, and the next
    compaction completes."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.ingest([Document(id="tents", text="Tents are checked for seam leaks.")])
        expected = [c.doc_id for c in kb.search("seam leaks in tents", backend="hybrid", k=3)]
    environment = dict(os.environ) | {FAULT_PAUSE_ENV: "snapshot-written"}
    process = subprocess.Popen([sys.executable, "-m", "trishield.cli", "compact", "--kb",
                                str(demo_kb_dir)], stderr=subprocess.PIPE, text=True,
                               env=environment)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "FAULT-PAUSE" not in process.stderr.readline():
        assert process.poll() is None, "compact never reached the pause"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    with KnowledgeBase.open(demo_kb_dir) as kb:
        assert kb.check_indexes()["intact"] is True
        assert [c.doc_id for c in kb.search("seam leaks in tents", backend="hybrid",
                                           k=3)] == expected
        dense, lexical = kb.indexes()
        assert len(dense) == len(lexical) == kb.store.counts()["chunks"]
        kb.compact()
        assert len(list(demo_kb_dir.glob("dense-s*.faiss"))) == 1
        assert [c.doc_id for c in kb.search("seam leaks in tents", backend="hybrid",
                                           k=3)] == expected


def test_ivfpq_is_exact_until_trained(tmp_path: Path) -> None:
    with _kb(tmp_path / "kb", "ivfpq") as kb:
        kb.ingest(_documents("rule", 8))
        dense, _ = kb.indexes()
        assert dense.kind == "ivfpq" and not dense.trained
        vector = kb.embedder.encode(["kayaks bought in store 2"])[0]
        scores = np.array([s for _, s in dense.search(vector, 8)])
        assert np.all(np.diff(scores) <= 1e-6) and len(scores) == 8


def test_ivfpq_codes_rank_the_probed_lists_as_a_search_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What Ring 1's neighbour cache relies on (kb/screening/neighbour_cache.py): a trained IVF-PQ
    search ranks the rows of the lists it probes by the query's product with their decoded
    codes, so both can be computed outside the search and give its result."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((1200, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(1, len(vectors) + 1, dtype=np.int64)
    assert DenseIndex.build("ivfpq", 384, ids, vectors).codes is None  # exact until trained
    monkeypatch.setattr(indexes, "IVF_MIN_TRAIN", 1000)  # 128 lists, 32 probed
    dense = DenseIndex.build("ivfpq", 384, ids, vectors)
    codes = dense.codes
    assert codes is not None and dense.index.nlist > indexes.IVF_NPROBE
    lists, decoded = codes.decoded(vectors)
    queries = vectors[:20] + 0.5 * rng.standard_normal((20, 384)).astype(np.float32)
    scores, found = dense.search_many(queries, 30)
    for query, probed, row_scores, row_ids in zip(queries, codes.probes(queries), scores,
                                                  found, strict=True):
        reached = np.isin(lists, probed)
        assert not reached.all()  # some lists are out of this search's reach
        mine = np.where(reached, decoded @ query, -np.inf)
        order = np.argsort(-mine, kind="stable")[:30]
        assert ids[order].tolist() == row_ids.tolist()
        np.testing.assert_allclose(mine[order], row_scores, rtol=0, atol=1e-5)
    # the same rows train the same codebooks (seeded); other rows train others
    again = DenseIndex.build("ivfpq", 384, ids, vectors).codes
    other = DenseIndex.build("ivfpq", 384, ids[1:], vectors[1:]).codes
    assert again is not None and other is not None
    assert again.fingerprint == codes.fingerprint != other.fingerprint


def test_a_lexical_table_built_with_another_analyzer_is_rebuilt(demo_kb_dir: Path) -> None:
    """Its contentless rows could not even be deleted with other terms: the writer that
    opens the KB rebuilds it from the chunks."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        expected = [c.doc_id for c in kb.search("parental leave", backend="bm25", k=3)]
        assert expected
        with kb.store.transaction() as connection:
            connection.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")
            kb.store.set_meta({"lexical_analyzer": "words-lower/v0"}, connection)
        assert kb.search("parental leave", backend="bm25", k=3) == []
    with KnowledgeBase.open(demo_kb_dir) as kb:
        assert kb.store.meta()["lexical_analyzer"] == ANALYZER
        assert [c.doc_id for c in kb.search("parental leave", backend="bm25", k=3)] == expected


def test_catch_up_needs_the_log_since_its_position(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        current = kb.store.index_position().current
        behind = EmbeddedBackend(DenseIndex("flat", kb.dimension),
                                 LexicalIndex(kb.store.connection), 0)
        assert catch_up(behind, kb.store) and len(behind) == kb.store.counts()["chunks"]
        assert behind.position == current
        kb.store.prune_index_log(current)
        assert kb.store.index_position() == Position(current, current)
        again = EmbeddedBackend(DenseIndex("flat", kb.dimension),
                                LexicalIndex(kb.store.connection), 0)
        assert catch_up(again, kb.store) is False and len(again) == 0
        # the KB itself starts again from its snapshot
        assert len(kb.indexes()[0]) == kb.store.counts()["chunks"]


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_batched_searches_skip_tombstones_and_exclusions_together(kind: str) -> None:
    """Ring 1's neighbourhood excludes the writer's own chunks; with HNSW tombstones the two
    selectors combine."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    dense = DenseIndex.build(kind, 16, np.arange(1, 201), vectors)
    assert dense.remove(np.array([1, 2, 3])) == 3
    scores, ids = dense.search_many(vectors[:5], 10, excluding=np.array([4, 5]))
    found = set(ids.ravel().tolist())
    assert found.isdisjoint({1, 2, 3, 4, 5, -1}) and not np.isnan(scores).any()
    assert len(dense) == 197 and dense.tombstones == (3 if kind == "hnsw" else 0)
