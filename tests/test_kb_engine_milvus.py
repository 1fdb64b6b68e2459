"""The Milvus search engine against a real Milvus Lite in a temporary folder, and its parity
with the embedded indexes on 200 real SQuAD paragraphs embedded with the default model."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trishield.errors import DatasetError, InputError, KnowledgeBaseError
from trishield.kb import KnowledgeBase
from trishield.kb.datasets import DATASETS
from trishield.kb.indexes.engines import sync as engine_sync
from trishield.kb.indexes.engines.milvus import TOKEN_ENV, MilvusBackend
from trishield.kb.indexes.engines.terms import engine_terms
from trishield.kb.loaders import iter_squad

pytest.importorskip("pymilvus", reason="the Milvus engine's tests need pymilvus + milvus-lite "
                                       "(pip install 'trishield[milvus]')")
pytest.importorskip("milvus_lite", reason="Milvus Lite is not installed on this platform")

DIMENSION = 8
TEXTS = [
    "Bicycles are the fastest way across the old town.",
    "The harbour closes at midnight in winter.",
    "Paris is the capital of France.",
    "O'Brien repaired two bicycles on Sunday.",
    "The of and",  # nothing but stop words: no index terms
]


def unit_vectors(count: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, DIMENSION)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def lite(tmp_path: Path) -> str:
    return str(tmp_path / "engine.db")


@pytest.fixture
def backend(lite: str):
    opened = MilvusBackend(lite, "chunks", DIMENSION)
    yield opened
    opened.close()


def loaded(backend: MilvusBackend) -> np.ndarray:
    vectors = unit_vectors(len(TEXTS))
    backend.add(np.arange(1, len(TEXTS) + 1), vectors, list(TEXTS))
    return vectors


def test_dense_and_lexical_search(backend: MilvusBackend) -> None:
    vectors = loaded(backend)
    assert len(backend) == len(TEXTS)
    for row, vector in enumerate(vectors, start=1):
        hits = backend.dense(vector, 3)
        assert hits[0][0] == row and hits[0][1] == pytest.approx(1.0, abs=1e-5)
        assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
        expected = sorted(float(vector @ other) for other in vectors)[::-1][:3]
        assert [score for _, score in hits] == pytest.approx(expected, abs=1e-5)
    # TriShield's analysis: "bicycle" finds "Bicycles" and "bicycles", "O'Brien" its row
    bicycle = backend.lexical("bicycle", 10)
    assert {row for row, _ in bicycle} == {1, 4} and all(score > 0 for _, score in bicycle)
    assert backend.lexical("obrien's bicycles", 10)[0][0] == 4
    assert backend.lexical("capital of France", 1)[0][0] == 3
    assert backend.lexical("the of and", 5) == [] and backend.lexical("zeppelin", 5) == []


def test_a_search_right_after_a_write_sees_it(backend: MilvusBackend) -> None:
    vectors = unit_vectors(20, seed=1)
    for row in range(20):
        backend.add(np.array([row + 100]), vectors[row:row + 1], [f"marker{row} text"])
        assert backend.dense(vectors[row], 1)[0][0] == row + 100
        assert backend.lexical(f"marker{row}", 1)[0][0] == row + 100
        backend.remove(np.array([row + 100]))
        assert row + 100 not in {hit for hit, _ in backend.dense(vectors[row], 5)}
        assert backend.lexical(f"marker{row}", 1) == []
    assert len(backend) == 0


def test_remove_and_unknown_ids(backend: MilvusBackend) -> None:
    backend.remove(np.array([7, 8]))  # nothing there yet: harmless
    vectors = loaded(backend)
    backend.remove(np.array([2, 4, 999]))
    assert len(backend) == len(TEXTS) - 2
    assert backend.ids().tolist() == [1, 3, 5]
    assert 4 not in {row for row, _ in backend.dense(vectors[3], 10)}
    assert {row for row, _ in backend.lexical("bicycle", 10)} == {1}
    backend.remove(np.array([], dtype=np.int64))
    assert len(backend) == len(TEXTS) - 2


def test_adding_again_replaces_the_row(backend: MilvusBackend) -> None:
    loaded(backend)
    replacement = unit_vectors(2, seed=7)
    backend.add(np.array([1, 2]), replacement, ["zeppelins over the harbour", "nothing new"])
    backend.add(np.array([1, 2]), replacement, ["zeppelins over the harbour", "nothing new"])
    assert len(backend) == len(TEXTS)
    assert backend.dense(replacement[0], 1)[0][0] == 1
    assert {row for row, _ in backend.lexical("bicycle", 10)} == {4}
    assert backend.lexical("zeppelin", 5)[0][0] == 1
    held = backend.vectors_of(np.array([1, 2, 404]))
    assert set(held) == {1, 2}
    assert np.allclose(held[1], replacement[0]) and np.allclose(held[2], replacement[1])


def test_bad_writes_are_refused_before_anything_is_written(backend: MilvusBackend) -> None:
    loaded(backend)
    vectors = unit_vectors(2)
    bad = [
        (np.array([10, 11]), vectors[:, :4], ["a", "b"]),          # wrong dimension
        (np.array([10, 10]), vectors, ["a", "b"]),                 # repeated id
        (np.array([10, 11]), vectors, ["a"]),                      # one text short
        (np.array([10.5, 11.0]), vectors, ["a", "b"]),             # not integer ids
        (np.array([10, 11]), np.full((2, DIMENSION), np.nan), ["a", "b"]),
        (np.array([10, 11]), vectors, ["a", "bicycle " * 20000]),  # terms over 64 KiB
    ]
    for ids, matrix, texts in bad:
        with pytest.raises(InputError):
            backend.add(ids, matrix, texts)
    assert len(backend) == len(TEXTS) and 10 not in backend.ids()
    with pytest.raises(InputError, match="must be 8 finite numbers"):
        backend.dense(np.ones(4, dtype=np.float32), 3)
    with pytest.raises(InputError, match="depth"):
        backend.dense(vectors[0], 0)
    with pytest.raises(InputError, match="depth"):
        backend.lexical("bicycle", -1)


def test_reopening_the_file_keeps_the_rows(lite: str) -> None:
    first = MilvusBackend(lite, "chunks", DIMENSION)
    vectors = loaded(first)
    first.close()
    first.close()  # twice is harmless
    with pytest.raises(KnowledgeBaseError, match="closed"):
        len(first)
    reopened = MilvusBackend(lite, "chunks", DIMENSION)
    try:
        assert len(reopened) == len(TEXTS)
        assert reopened.dense(vectors[2], 1)[0][0] == 3
        assert reopened.lexical("harbour", 1)[0][0] == 2
    finally:
        reopened.close()


def test_the_collection_must_fit_the_kb(lite: str) -> None:
    MilvusBackend(lite, "chunks", DIMENSION).close()
    with pytest.raises(KnowledgeBaseError, match=r"holds 8-dimensional vectors.*16-dimensional"):
        MilvusBackend(lite, "chunks", 16)
    with pytest.raises(KnowledgeBaseError, match=r"'FLAT' vector index.*'hnsw'"):
        MilvusBackend(lite, "chunks", DIMENSION, index="hnsw")
    # a collection someone else made in the same Milvus is not taken over
    from pymilvus import MilvusClient
    client = MilvusClient(lite)
    try:
        client.create_collection("theirs", dimension=DIMENSION)
    finally:
        client.close()
    with pytest.raises(KnowledgeBaseError, match="not made by TriShield"):
        MilvusBackend(lite, "theirs", DIMENSION)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_index_kinds_find_the_nearest_row(lite: str, kind: str) -> None:
    backend = MilvusBackend(lite, f"chunks_{kind}", DIMENSION, index=kind)
    try:
        vectors = unit_vectors(300, seed=3)
        backend.add(np.arange(300), vectors, [f"row {row}" for row in range(300)])
        found = sum(backend.dense(vectors[row], 1)[0][0] == row for row in range(0, 300, 10))
        assert found == 30
    finally:
        backend.close()


def test_arguments_are_checked_before_connecting(tmp_path: Path) -> None:
    cases = [
        (dict(uri="ftp://milvus.example:19530"), "unsupported Milvus URI"),
        (dict(uri=""), "URI is empty"),
        (dict(uri=str(tmp_path / "missing" / "engine.db")), "does not exist"),
        (dict(collection="1st-collection"), "collection name"),
        (dict(dimension=0), "dimension"),
        (dict(index="pq"), "unknown Milvus index kind 'pq'"),
        (dict(timeout=0), "timeout"),
    ]
    for override, message in cases:
        arguments = dict(uri=str(tmp_path / "engine.db"), collection="chunks",
                         dimension=DIMENSION) | override
        timeout = arguments.pop("timeout", 10.0)
        index = arguments.pop("index", "flat")
        with pytest.raises(InputError, match=message):
            MilvusBackend(arguments["uri"], arguments["collection"], arguments["dimension"],
                          index=index, timeout=timeout)
    (tmp_path / "old.db").write_bytes(b"SQLite format 3\x00")
    with pytest.raises(InputError, match="a file is there"):
        MilvusBackend(str(tmp_path / "old.db"), "chunks", DIMENSION)


def test_an_unreachable_server_is_named_without_credentials(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(TOKEN_ENV, "root:hunter2-token")
    with pytest.raises(KnowledgeBaseError, match=f"cannot reach Milvus at http://127.0.0.1:{port}"
                       ) as raised:
        MilvusBackend(f"http://admin:pa55word@127.0.0.1:{port}", "chunks", DIMENSION, timeout=3)
    assert "pa55word" not in str(raised.value) and "hunter2" not in str(raised.value)


def test_without_pymilvus_the_error_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch, lite: str) -> None:
    monkeypatch.setitem(sys.modules, "pymilvus", None)  # what `import` sees when it is absent
    with pytest.raises(KnowledgeBaseError, match=r"pip install 'trishield\[milvus\]'"):
        MilvusBackend(lite, "chunks", DIMENSION)


def test_engine_terms_are_tokenizer_proof() -> None:
    assert engine_terms("O'Brien's Bicycles, and the harbour_master!") == \
        "obrien bicycl harbour master idharbourmaster"  # and the identifier, whole
    assert engine_terms("the of and") == ""


# -- parity with the embedded indexes on a real corpus --------------------------------------
PASSAGES = 200
WRITER = "squad-test"


@pytest.fixture(scope="module")
def squad_kb(tmp_path_factory: pytest.TempPathFactory):
    """200 SQuAD dev paragraphs in a real KB (default embedder), and one question each."""
    try:
        path = DATASETS["squad-dev"].verified_path()
    except DatasetError as error:
        pytest.skip(f"SQuAD dev is not in the data directory: {error}")
    documents = list(itertools.islice(iter_squad(path, id_prefix="squad-dev:"), PASSAGES))
    questions = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for number, paragraph in enumerate(article["paragraphs"]):
            questions.append((f"squad-dev:{article['title']}:{number}",
                              paragraph["qas"][0]["question"]))
    questions = questions[:PASSAGES]
    assert [doc_id for doc_id, _ in questions] == [document.id for document in documents]
    directory = tmp_path_factory.mktemp("squad") / "kb"
    with KnowledgeBase.open(directory, create=True) as kb:
        kb.ingest(documents, tier="trusted", writer=WRITER)
        yield kb, questions


def test_milvus_flat_matches_the_embedded_indexes(squad_kb, tmp_path: Path) -> None:
    kb, questions = squad_kb
    backend = MilvusBackend(str(tmp_path / "engine.db"), "squad", kb.dimension)
    try:
        report = engine_sync.sync(backend, kb.store, kb.dimension)
        chunks = kb.store.counts()["chunks"]
        assert (report.upserted, report.removed, report.rows) == (chunks, 0, chunks)
        assert engine_sync.check(backend, kb.store, kb.dimension)["consistent"]

        dense, lexical = kb.indexes()
        vectors = kb.embedder.encode([question for _, question in questions])
        doc_of = {pk: chunk.doc_id for pk, chunk in
                  kb.store.chunks_by_pk(backend.ids().tolist()).items()}
        same_top5 = engine_hits = embedded_hits = 0
        for (doc_id, question), vector in zip(questions, vectors, strict=True):
            ours, theirs = dense.search(vector, 5), backend.dense(vector, 5)
            same_top5 += [pk for pk, _ in ours] == [pk for pk, _ in theirs]
            assert [s for _, s in theirs] == pytest.approx([s for _, s in ours], abs=1e-4)
            engine_hits += doc_id in {doc_of[pk] for pk, _ in backend.lexical(question, 3)}
            embedded_hits += doc_id in {doc_of[pk] for pk, _ in lexical.search(question, 3)}
        print(f"\ndense top-5 identical: {same_top5}/{len(questions)}; lexical recall@3: "
              f"milvus {engine_hits}/{len(questions)}, embedded bm25 "
              f"{embedded_hits}/{len(questions)}")
        assert same_top5 == len(questions)
        # same terms, same BM25 parameters: the engine recalls what the embedded index does
        # (a broken analysis or scoring scores far lower; chance is 3/200 per question)
        assert engine_hits >= 0.8 * len(questions)
        assert abs(engine_hits - embedded_hits) <= 0.02 * len(questions)
    finally:
        backend.close()


def test_check_and_sync_follow_a_delete(squad_kb, tmp_path: Path) -> None:
    kb, questions = squad_kb
    backend = MilvusBackend(str(tmp_path / "engine.db"), "squad", kb.dimension)
    try:
        engine_sync.sync(backend, kb.store, kb.dimension)
        doc_id = questions[0][0]
        gone = [pk for pk, chunk in kb.store.chunks_by_pk(backend.ids().tolist()).items()
                if chunk.doc_id == doc_id]
        kb.delete(doc_id, by="tester")
        state = engine_sync.check(backend, kb.store, kb.dimension)
        assert not state["consistent"] and state["extra"] == len(gone) and not state["missing"]
        assert state["extra_ids"] == sorted(gone)
        report = engine_sync.sync(backend, kb.store, kb.dimension)
        assert report.removed == len(gone) and report.rows == kb.store.counts()["chunks"]
        assert engine_sync.check(backend, kb.store, kb.dimension)["consistent"]
        # a row whose contents changed under the same id is caught by the vector sample
        pk = int(backend.ids()[0])
        changed = np.random.default_rng(5).normal(size=(1, kb.dimension)).astype(np.float32)
        backend.add(np.array([pk]), changed / np.linalg.norm(changed), ["changed"])
        state = engine_sync.check(backend, kb.store, kb.dimension, sample=10_000)
        assert not state["consistent"] and state["vectors_differing"] == [pk]
        with pytest.raises(InputError, match="not 8-dimensional"):
            engine_sync.sync(backend, kb.store, DIMENSION)
    finally:
        backend.close()


def test_a_lite_folder_held_by_another_process_is_named(lite: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from trishield.kb.indexes.engines.milvus import MilvusBackend\n"
         f"MilvusBackend({lite!r}, 'chunks', {DIMENSION})\n"
         "print('open', flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(KnowledgeBaseError, match="one process at a time"):
            MilvusBackend(lite, "chunks", DIMENSION)
    finally:
        holder.communicate("", timeout=60)


def test_an_empty_kb_syncs_to_an_empty_collection(tmp_path: Path, lite: str) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        backend = MilvusBackend(lite, "empty", kb.dimension)
        try:
            backend.add(np.array([5]), np.ones((1, kb.dimension), dtype=np.float32), ["stale"])
            state = engine_sync.check(backend, kb.store, kb.dimension)
            assert (state["store_rows"], state["engine_rows"], state["extra_ids"]) == (0, 1, [5])
            report = engine_sync.sync(backend, kb.store, kb.dimension)
            assert report.as_dict() == {"generation": kb.store.generation(), "upserted": 0,
                                        "removed": 1, "rows": 0,
                                        "position": kb.store.index_position().current}
            assert backend.position == report.position  # recorded in the collection
            backend.close()
            backend = MilvusBackend(lite, "empty", kb.dimension)
            assert backend.position == report.position
            assert engine_sync.check(backend, kb.store, kb.dimension)["consistent"]
        finally:
            backend.close()
