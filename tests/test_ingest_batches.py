"""Long ingests commit in batches: an interrupt keeps the finished batches and a re-run
finishes the rest without duplicates; progress is reported as the run goes.

The interrupt is real: ``KeyboardInterrupt`` raised from inside a running ingest (what Ctrl-C
raises in Python), and a ``SIGINT`` sent to the real CLI in a subprocess that the
``TRISHIELD_FAULT_PAUSE`` hook stopped in the middle of its second batch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trishield.errors import InputError
from trishield.kb import Document, IngestInterrupted, IngestProgress, KnowledgeBase
from trishield.kb.ingest_report import CommitPacer
from trishield.kb.locking import FAULT_PAUSE_ENV

TOPICS = ["tents", "stoves", "kayaks", "boots", "jackets", "lanterns", "ropes", "maps"]


def _documents(count: int, prefix: str = "doc") -> list[Document]:
    """Distinct paragraphs, each long enough for two chunks."""
    documents = []
    for number in range(count):
        topic = TOPICS[number % len(TOPICS)]
        sentences = [f"Rule {number}.{line}: {topic} from shop {number} may be swapped within "
                     f"{5 + line} days when unused." for line in range(14)]
        documents.append(Document(id=f"{prefix}-{number}", text=" ".join(sentences)))
    return documents


def _ids(kb: KnowledgeBase) -> list[str]:
    return sorted(kb.document_ids())


def test_batches_are_committed_one_by_one_with_progress(tmp_path: Path) -> None:
    seen: list[IngestProgress] = []
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.ingest(_documents(5), writer="bulk", batch_size=2, on_progress=seen.append)
        assert len(report.batch_ids) == 3 and report.batch_id == report.batch_ids[0]
        assert report.added == [f"doc-{n}" for n in range(5)] and report.remaining == 0
        assert kb.store.counts()["batches"] == 3
        assert kb.store.generation() == 3  # each batch is its own commit
        dense, lexical = kb.indexes()
        assert len(dense) == len(lexical) == kb.store.counts()["chunks"] == report.chunks_added
    first, last = seen[0], seen[-1]
    assert (first.documents_done, first.chunks_embedded, first.batches_done) == (0, 0, 0)
    assert (last.documents_total, last.documents_done) == (5, 5)
    assert last.chunks_embedded == last.chunks_total == report.chunks_added
    assert (last.batches_done, last.batches_total) == (3, 3)
    assert last.chunks_per_second > 0
    done = [state.documents_done for state in seen]
    assert done == sorted(done) and {2, 4}.issubset(done)


def test_an_interrupt_keeps_finished_batches_and_a_rerun_finishes(tmp_path: Path) -> None:
    documents = _documents(6)

    def interrupt_in_batch_two(state: IngestProgress) -> None:
        # Ctrl-C while the second batch is being embedded (the first one is committed)
        if state.batches_done == 1 and state.chunks_embedded > 0:
            raise KeyboardInterrupt

    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        with pytest.raises(IngestInterrupted) as caught:
            kb.ingest(documents, writer="bulk", batch_size=2, on_progress=interrupt_in_batch_two)
        kept = caught.value.report
        assert isinstance(caught.value, KeyboardInterrupt)
        assert kept.added == ["doc-0", "doc-1"] and len(kept.batch_ids) == 1
        assert kept.remaining == 4
        assert _ids(kb) == ["doc-0", "doc-1"]
        assert kb.store.counts()["batches"] == 1
        dense, _ = kb.indexes()
        assert len(dense) == kb.store.counts()["chunks"]

        rerun = kb.ingest(documents, writer="bulk", batch_size=2)
        assert rerun.added == [f"doc-{n}" for n in range(2, 6)]
        assert [d["id"] for d in rerun.duplicates] == ["doc-0", "doc-1"]
        assert rerun.already_present == 2 and rerun.already_quarantined == 0
        assert _ids(kb) == sorted(d.id for d in documents)
        hashes = [kb.content_hash_of(d.id) for d in documents]
        assert hashes == [d.content_hash for d in documents]
        ingested = [e for e in kb.store.audit_log(limit=100) if e["action"] == "ingest"]
        assert sorted(e["doc_id"] for e in ingested) == sorted(d.id for d in documents)
        again = kb.ingest(documents, writer="bulk", batch_size=2)
        assert again.added == [] and again.already_present == 6


def test_refused_ids_refuse_before_any_batch(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.ingest(_documents(1, "taken"), writer="alice")
        clash = [*_documents(4), Document(id="taken-0", text="Another writer's text.")]
        with pytest.raises(InputError, match="already used by another writer"):
            kb.ingest(clash, writer="bob", batch_size=2)
        assert _ids(kb) == ["taken-0"]
        with pytest.raises(InputError, match="batch size"):
            kb.ingest(_documents(1), writer="bob", batch_size=0)


def _jsonl(directory: Path, count: int) -> Path:
    path = directory / "bulk.jsonl"
    path.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n"
                            for d in _documents(count)), encoding="utf-8")
    return path


def _cli(*args: str, pause: str | None = None) -> subprocess.Popen:
    environment = {key: value for key, value in os.environ.items() if key != FAULT_PAUSE_ENV}
    if pause:
        environment[FAULT_PAUSE_ENV] = pause
    # A suite started in the background by a non-interactive shell inherits SIGINT ignored,
    # and a child Python keeps an ignored SIGINT ignored (no KeyboardInterrupt): give the CLI
    # the default disposition, as a terminal would.
    return subprocess.Popen([sys.executable, "-m", "trishield.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(process: subprocess.Popen, marker: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if marker in line:
            return
        if not line and process.poll() is not None:
            break
    process.kill()
    raise AssertionError(f"never saw {marker!r}: rc={process.poll()}")


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["before-commit#2", "inside-commit#2"])
def test_sigint_to_the_cli_mid_ingest_keeps_the_first_batch(tmp_path: Path, phase: str) -> None:
    """Ctrl-C (SIGINT) while batch 2 is embedded or inside its open transaction: batch 1
    stays, batch 2 is rolled back, the CLI says what to do and exits 130; the same command
    run again completes the ingest with no duplicate."""
    source, kb_dir = _jsonl(tmp_path, 6), tmp_path / "kb"
    command = ("ingest", str(source), "--kb", str(kb_dir), "--writer", "bulk",
               "--batch-size", "2", "--no-guard")
    process = _cli(*command, pause=phase)
    _wait_for(process, f"FAULT-PAUSE {phase.split('#')[0]}")
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=60)
    finally:  # never leave a paused CLI behind
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "interrupted: kept 1 committed batch(es)" in stderr
    assert "4 document(s) not ingested yet" in stderr and "Run the same command again" in stderr
    with KnowledgeBase.open(kb_dir) as kb:
        assert _ids(kb) == ["doc-0", "doc-1"] and kb.store.counts()["batches"] == 1

    rerun = _cli(*command, "--json")
    stdout, stderr = rerun.communicate(timeout=240)
    assert rerun.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["documents_added"] == 4 and summary["documents_already_present"] == 2
    assert summary["documents_remaining"] == 0 and len(summary["batch_ids"]) == 2
    with KnowledgeBase.open(kb_dir) as kb:
        assert _ids(kb) == [f"doc-{n}" for n in range(6)]
        counts = kb.store.counts()
        assert counts["documents"] == 6 and counts["batches"] == 3
        dense, lexical = kb.indexes()
        assert len(dense) == len(lexical) == counts["chunks"]


def test_the_commit_pacer_sizes_batches_by_the_rate_it_measured() -> None:
    counts = [4] * 100  # documents of four chunks
    pacer = CommitPacer(seconds=30)
    assert pacer.next_end(counts, 0) == CommitPacer.FIRST_CHUNKS // 4  # first: one encoder batch
    pacer.record(32, 4.0)  # 8 chunks/s, commits included
    budget = 8 * 30 * CommitPacer.SAFETY  # chunks that fit in 30 s with the margin
    assert pacer.next_end(counts, 8) == 8 + int(budget // 4)
    pacer.record(400, 200.0)  # the machine got busy: 432 chunks in 204 s
    assert pacer.next_end(counts, 50) == 50 + int(432 / 204 * 30 * CommitPacer.SAFETY // 4)
    assert pacer.next_end([500, 1, 1], 0) == 1  # a document is never split
    assert CommitPacer(seconds=30, max_documents=3).next_end(counts, 0) == 3
    assert CommitPacer().next_end(counts, 10) == 100  # neither: one batch
    with pytest.raises(ValueError, match="positive"):
        CommitPacer(seconds=0)


def test_an_interrupt_of_a_timed_ingest_keeps_every_committed_batch(tmp_path: Path) -> None:
    """Batches by time: the first holds one encoder batch (32 chunks), so a Ctrl-C during
    the second keeps it; progress has an ETA from the first encoder batch on."""
    documents = _documents(30)  # two chunks each: 16 documents in the first batch
    seen: list[IngestProgress] = []

    def interrupt_in_batch_two(state: IngestProgress) -> None:
        seen.append(state)
        if state.batches_done == 1 and state.chunks_embedded > 32:
            raise KeyboardInterrupt

    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        with pytest.raises(IngestInterrupted) as caught:
            kb.ingest(documents, writer="bulk", commit_seconds=30,
                      on_progress=interrupt_in_batch_two)
        kept = caught.value.report
        assert kept.added == [f"doc-{n}" for n in range(16)] and len(kept.batch_ids) == 1
        assert _ids(kb) == sorted(kept.added)
        assert kept.remaining == 14
    embedded = [state for state in seen if state.chunks_embedded > 0]
    assert embedded[0].eta_seconds is not None and embedded[0].batches_total is None
    with pytest.raises(InputError, match="commit seconds"):
        KnowledgeBase.open(tmp_path / "kb").ingest(documents, commit_seconds=0)


@pytest.mark.slow
def test_sigint_to_a_default_cli_ingest_keeps_the_first_batch(tmp_path: Path) -> None:
    """No batch option: the CLI commits by time, its first batch within seconds, so a
    Ctrl-C at the second batch's commit keeps the first one (the 200-document default kept
    nothing of a smaller folder)."""
    source, kb_dir = _jsonl(tmp_path, 30), tmp_path / "kb"
    process = _cli("ingest", str(source), "--kb", str(kb_dir), "--writer", "bulk",
                   "--no-guard", pause="before-commit#2")
    _wait_for(process, "FAULT-PAUSE before-commit")
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "interrupted: kept 1 committed batch(es)" in stderr
    with KnowledgeBase.open(kb_dir) as kb:
        assert _ids(kb) == sorted(f"doc-{n}" for n in range(16))


def test_a_text_the_kb_holds_is_not_embedded_again(tmp_path: Path) -> None:
    """Another writer's copy of a stored document, and a section a batch repeats, take the
    stored (or the batch's) vectors: only new text reaches the encoder, and every copy is
    stored with the same embedding as its original. Progress still counts every chunk."""
    from trishield.kb.chunking import ChunkingConfig

    originals = _documents(3)
    copies = [Document(id=f"copy-{d.id}", text=d.text) for d in originals]
    shared = " ".join(f"Returns of kind {n} are accepted within thirty days of delivery when "
                      "the tags are attached." for n in range(4))  # a section of 60 words
    manuals = [Document(id=f"manual-{n}", title="Shop manual", text=(
        f"# Returns\n\n{shared}\n\n# Opening hours\n\nShop {n} opens at {n + 8} in the "
        "morning and closes at six in the evening.")) for n in range(2)]
    with KnowledgeBase.open(tmp_path / "kb", create=True,
                            chunking=ChunkingConfig(strategy="sections")) as kb:
        kb.ingest(originals, writer="alice")
        encoder = kb.embedder
        calls: list[int] = []
        original_encode = type(encoder).encode

        def counting(self, texts, **kwargs):
            calls.append(len(texts))
            return original_encode(self, texts, **kwargs)

        seen: list[IngestProgress] = []
        type(encoder).encode = counting
        try:
            report = kb.ingest([*copies, *manuals], writer="bob", on_progress=seen.append)
            third = kb.ingest([Document(id=f"again-{d.id}", text=d.text) for d in originals],
                              writer="carol")  # a text stored twice is read once
        finally:
            type(encoder).encode = original_encode
        assert sorted(report.added) == sorted(d.id for d in [*copies, *manuals])
        vectors = {doc_id: rows for doc_id, _, rows in kb.documents_with_embeddings()}
    manual_chunks = len(vectors["manual-0"]) + len(vectors["manual-1"])
    assert manual_chunks == 4 and sum(calls) == 3  # the copies: none; the shared section: once
    assert len(third.added) == len(originals)
    for original, copy in zip(originals, copies, strict=True):
        assert (vectors[original.id] == vectors[copy.id]).all()
        assert (vectors[original.id] == vectors[f"again-{original.id}"]).all()
    assert (vectors["manual-0"][0] == vectors["manual-1"][0]).all()
    assert not (vectors["manual-0"][1] == vectors["manual-1"][1]).all()
    assert seen[-1].chunks_embedded == seen[-1].chunks_total
