"""A knowledge base that searches on Milvus (Lite, in a temporary folder) while its store keeps
provenance, tiers, quarantine and audit: the same answers as the embedded engine on the real
demo corpus, commits that the engine follows, lag and failures that it survives, and the CLI
that chooses and moves the engine. The shared retrieval tests run on both engines too
(``tests/test_kb_incremental.py``, parametrized over ``engine``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from trishield.cli import cli
from trishield.errors import InputError, KnowledgeBaseError
from trishield.kb import Document, KnowledgeBase
from trishield.kb.indexes.backend import IndexBackend
from trishield.kb.indexes.engines import sync as engine_sync
from trishield.kb.indexes.engines.config import EngineConfig
from trishield.kb.indexes.engines.milvus import TOKEN_ENV, MilvusBackend
from trishield.kb.indexes.lexical import LexicalIndex
from trishield.kb.locking import FAULT_PAUSE_ENV

pytest.importorskip("pymilvus", reason="the Milvus engine needs pip install 'trishield[milvus]'")
pytest.importorskip("milvus_lite", reason="Milvus Lite is not installed on this platform")

QUESTIONS = {
    "How long do I have to return a bicycle?": "refund-policy",
    "parental leave": "leave-policy",
    "What is the warranty on tents?": "warranty-policy",
    # (was "Who do I contact about a data breach?", which no policy states: with chunks cut
    # by sections, dense ranks the support guide's fraud warning above the handbook)
    "Where do I report a phishing email?": "employee-handbook",
    "expense reimbursement limit": "employee-handbook",
}


def first_or_found(found, backend: str, wanted: str = "zeppelins") -> str | None:
    """The top document, except for Milvus Lite's BM25 on rows just written: Lite weighs a
    term by the segment it is in (its own TODO, milvus_lite/engine/collection.py), so a new
    row in a one-row segment is found but may rank below older matches; a server weighs
    terms over the whole collection. Then: ``wanted`` when it is among the hits."""
    ids = [candidate.doc_id for candidate in found]
    if backend == "bm25" and wanted in ids:
        return wanted
    return ids[0] if ids else None


@pytest.fixture(scope="module")
def kbs(demo_kb_template: Path, tmp_path_factory: pytest.TempPathFactory):
    """The demo KB twice: embedded, and attached to a Milvus Lite collection (module-scoped:
    a Milvus Lite start costs seconds)."""
    root = tmp_path_factory.mktemp("engines")
    shutil.copytree(demo_kb_template, root / "embedded")
    shutil.copytree(demo_kb_template, root / "milvus")
    embedded = KnowledgeBase.open(root / "embedded")
    milvus = KnowledgeBase.open(root / "milvus")
    report = milvus.attach_engine(EngineConfig.parse(str(root / "engine.db"), "demo"))
    assert report["rows"] == milvus.store.counts()["chunks"] > 0
    yield {"embedded": embedded, "milvus": milvus}
    embedded.close()
    milvus.close()


@pytest.mark.parametrize("backend", ["dense", "bm25", "hybrid"])
def test_both_engines_answer_alike_on_the_demo_corpus(kbs, backend: str) -> None:
    for question, expected in QUESTIONS.items():
        ours = kbs["embedded"].search(question, backend=backend, k=3)
        theirs = kbs["milvus"].search(question, backend=backend, k=3)
        assert theirs[0].doc_id == ours[0].doc_id == expected, (question, backend)
        assert theirs[0].chunk.pk == ours[0].chunk.pk
        assert theirs[0].chunk.tier == "trusted" and theirs[0].chunk.writer == ours[0].chunk.writer
        if backend == "dense":  # exact cosine on both sides: the same list, the same scores
            assert [c.chunk.pk for c in theirs] == [c.chunk.pk for c in ours]
            assert [c.score for c in theirs] == pytest.approx([c.score for c in ours],
                                                              abs=1e-4)
        else:  # BM25's idf differs (FTS5 floors it): the same rows, rarely another order
            assert {c.chunk.pk for c in theirs} == {c.chunk.pk for c in ours}


def test_the_engine_follows_each_commit_and_a_delete(kbs) -> None:
    kb = kbs["milvus"]
    engine = kb._engines.client
    assert isinstance(engine, MilvusBackend) and isinstance(engine, IndexBackend)
    query = "zeppelin hangar inspection"
    report = kb.ingest([Document(id="zeppelins", text="The zeppelin hangar is inspected "
                                 "every spring by two engineers.")], writer="tester")
    assert report.warnings == []
    assert engine.position == kb.store.index_position().current
    for backend in ("dense", "bm25", "hybrid"):
        assert first_or_found(kb.search(query, backend=backend, k=5), backend) == "zeppelins"
    kb.delete("zeppelins", by="admin")
    assert engine.position == kb.store.index_position().current
    for backend in ("dense", "bm25", "hybrid"):
        assert "zeppelins" not in {c.doc_id for c in kb.search(query, backend=backend, k=5)}
    assert kb.check_indexes()["engine"]["consistent"] is True
    # the engine's own vocabulary agrees with the store's (FTS5), which the KB answers from
    text = "zeppelins and parental leave for bicycles"
    assert engine.unknown_terms(text) == ["zeppelin", "bicycl"] == \
        LexicalIndex(kb.store.connection).unknown_terms(text) == kb.unknown_terms(text)


def test_a_reopened_kb_catches_up_without_a_reload(kbs, monkeypatch) -> None:
    kb = kbs["milvus"]
    directory = kb.directory
    kb._engines.client.close()  # Milvus Lite: one client per folder at a time
    kb._engines.client = None
    reloads = []
    original = engine_sync.sync
    monkeypatch.setattr(engine_sync, "sync", lambda *a, **k: reloads.append(1) or original(*a, **k))
    with KnowledgeBase.open(directory) as other:
        other.ingest([Document(id="lanterns", text="Lanterns take two spare batteries.")])
        assert other._engines.client.position == other.store.index_position().current
        assert first_or_found(other.search("spare lantern batteries", backend="bm25", k=5),
                              "bm25", "lanterns") == "lanterns"
        other.delete("lanterns", by="admin")
    assert reloads == []
    assert kb.search("parental leave", k=1)[0].doc_id == "leave-policy"  # reconnects


def test_a_failed_engine_write_keeps_the_commit_and_the_engine_catches_up(kbs) -> None:
    kb = kbs["milvus"]
    kb.search("parental leave", k=1)
    kb._engines.client.close()  # every engine call now fails, as with an unreachable cluster
    report = kb.ingest([Document(id="ropes", text="Climbing ropes are retired after five "
                                 "years of use.")], writer="tester")
    assert kb.document("ropes")["writer"] == "tester"  # committed all the same
    assert len(report.warnings) == 1 and "did not take it in" in report.warnings[0]
    assert "ropes" in {c.doc_id for c in kb.search("climbing ropes retired", k=3)}
    assert kb.check_indexes()["intact"] is True
    kb.delete("ropes", by="admin")


def test_a_lagging_engine_is_reported_and_repaired(kbs) -> None:
    kb = kbs["milvus"]
    engine = kb._engines.backend()
    pks = engine.ids()[:3]
    engine.remove(pks)  # rows lost behind the KB's back
    state = kb.check_indexes()
    assert state["intact"] is False and state["engine"]["missing"] == 3
    assert state["engine"]["missing_ids"] == sorted(pks.tolist())
    kb.repair()
    state = kb.check_indexes()
    assert state["intact"] is True and state["engine"]["in_step"] is True
    # a row the engine holds but the store does not is never returned
    stale = np.array([10_000_000])
    vector = kb.embedder.encode(["parental leave"])
    engine.add(stale, vector, ["parental leave parental leave"])
    for backend in ("dense", "bm25"):
        found = kb.search("parental leave", backend=backend, k=3)
        assert found and all(c.chunk.pk != 10_000_000 for c in found)
        assert [c.rank for c in found] == list(range(1, len(found) + 1))
    engine.remove(stale)
    assert kb.compact()["engine"].startswith("in step")


def test_the_engine_setting_is_recorded_and_refused_when_changed(tmp_path: Path) -> None:
    lite = str(tmp_path / "engine.db")
    with KnowledgeBase.open(tmp_path / "kb", create=True, engine=lite) as kb:
        assert kb.settings.engine == EngineConfig(lite, "trishield_chunks", "flat")
        assert kb.stats()["engine"] == f"milvus {lite} collection trishield_chunks (flat)"
    with pytest.raises(KnowledgeBaseError, match=r"search engine.*engine attach"):
        KnowledgeBase.open(tmp_path / "kb", engine="embedded")
    with KnowledgeBase.open(tmp_path / "kb", engine=lite) as kb:  # the same one is fine
        assert kb.search("anything at all", k=1) == []
    with pytest.raises(InputError, match="carries credentials"):
        KnowledgeBase.open(tmp_path / "other", create=True, engine="http://u:secret@h:19530")
    assert not (tmp_path / "other").exists()
    for bad, message in [(("ftp://h:1",), "unsupported Milvus URI"),
                         ((lite, "1bad"), "collection name"),
                         ((lite, None, "pq"), "index kind"),
                         (("embedded", "c"), "need a Milvus")]:
        with pytest.raises(InputError, match=message):
            EngineConfig.parse(*bad)


def _cli(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def test_the_cli_chooses_moves_and_checks_the_engine(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "root:never-stored")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"id": "tents", "text": "Tents are checked for seam leaks."}\n'
                      '{"id": "kayaks", "text": "Kayaks are rinsed after each rental."}\n')
    lite = str(tmp_path / "engine.db")
    result = _cli("ingest", str(corpus), "--kb", str(tmp_path / "kb"), "--engine", lite,
                  "--engine-collection", "cli_kb", "--no-guard")
    assert result.exit_code == 0, result.output
    result = _cli("search", "seam leaks", "--kb", str(tmp_path / "kb"), "--backend", "bm25")
    assert result.exit_code == 0 and "tents" in result.output
    result = _cli("engine", "status", "--kb", str(tmp_path / "kb"), "--json")
    assert result.exit_code == 0 and '"consistent": true' in result.output
    lost = MilvusBackend(lite, "cli_kb", 384)  # rows lost behind the KB's back
    lost.remove(lost.ids()[:1])
    lost.close()
    assert _cli("engine", "status", "--kb", str(tmp_path / "kb")).exit_code == 1
    result = _cli("repair", "--kb", str(tmp_path / "kb"), "--json")
    assert result.exit_code == 0 and json.loads(result.output)["rebuilt"] is True
    assert json.loads(result.output)["engine"]["consistent"] is True
    result = _cli("ingest", str(corpus), "--kb", str(tmp_path / "kb"), "--engine", "embedded")
    assert result.exit_code != 0 and "refusing to mix" in str(result.exception)
    # an embedded KB moved onto another collection, then back
    assert _cli("ingest", str(corpus), "--kb", str(tmp_path / "kb2"), "--no-guard"
                ).exit_code == 0
    result = _cli("engine", "attach", "--kb", str(tmp_path / "kb2"), "--uri", lite,
                  "--collection", "moved", "--index", "hnsw")
    # rich wraps at the console's width, and the line's length depends on the temp path
    assert result.exit_code == 0 and "2 chunks loaded" in " ".join(result.output.split()), \
        result.output
    result = _cli("search", "kayak rental", "--kb", str(tmp_path / "kb2"))
    assert result.exit_code == 0 and "kayaks" in result.output
    assert _cli("engine", "status", "--kb", str(tmp_path / "kb2")).exit_code == 0
    for directory in ("kb", "kb2"):
        assert b"never-stored" not in (tmp_path / directory / "kb.sqlite").read_bytes()
    assert _cli("engine", "attach", "--kb", str(tmp_path / "kb2"), "--uri", "embedded"
                ).exit_code == 0
    with KnowledgeBase.open(tmp_path / "kb2") as kb:
        assert kb.settings.engine.embedded and kb.search("kayak rental", k=1)[0].doc_id == \
            "kayaks"


def test_a_kill_after_the_commit_leaves_the_engine_behind_and_it_catches_up(
        demo_kb_dir: Path, tmp_path: Path) -> None:
    """SIGKILL a CLI ingest right after its commit, before the engine took it in: the store
    holds the document, the engine lags (reported), and the next handle catches it up from
    the change log."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.attach_engine(str(tmp_path / "engine.db"))
    corpus = tmp_path / "tents.jsonl"
    corpus.write_text('{"id": "tents", "text": "Tents are checked for seam leaks."}\n')
    environment = dict(os.environ) | {FAULT_PAUSE_ENV: "after-commit"}
    process = subprocess.Popen([sys.executable, "-m", "trishield.cli", "ingest", str(corpus),
                                "--kb", str(demo_kb_dir), "--no-guard"],
                               stderr=subprocess.PIPE, text=True, env=environment)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "FAULT-PAUSE" not in process.stderr.readline():
        assert process.poll() is None, "the ingest never reached the pause"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    with KnowledgeBase.open(demo_kb_dir) as kb:
        assert kb.document("tents")["id"] == "tents"
        state = kb.check_indexes()
        assert state["intact"] is False and state["engine"]["missing"] == 1
        assert state["engine"]["position"] < state["engine"]["store_position"]
        assert kb.search("seam leaks in tents", backend="dense", k=1)[0].doc_id == "tents"
        state = kb.check_indexes()
        assert state["intact"] is True and state["engine"]["missing"] == 0
