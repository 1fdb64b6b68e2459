"""Shared fixtures: a small real knowledge base built once per session with the real model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trishield.demo import DEMO_WRITER, corpus_dir
from trishield.kb import ChunkingConfig, KnowledgeBase, load_path


@pytest.fixture(scope="session")
def demo_kb_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Northwind demo corpus embedded with all-MiniLM-L6-v2 (built once, never written).

    Cut in word windows: the rings' tests were written on them, as the PoisonedRAG matrix's
    one-paragraph passages are. With sections (the default for new KBs, tested in
    test_kb_sections.py, test_chunking.py and through `trishield demo`) the minutes' proposal
    to extend the refund window to 90 days is a chunk apart from its rejection, and the
    extractive reader answers the refund question with it (docs/answers.md, "Known
    weaknesses")."""
    directory = tmp_path_factory.mktemp("template") / "demo-kb"
    with KnowledgeBase.open(directory, create=True,
                            chunking=ChunkingConfig(strategy="window")) as kb:
        kb.ingest(load_path(corpus_dir()).documents, tier="trusted", writer=DEMO_WRITER)
    return directory


@pytest.fixture
def demo_kb_dir(demo_kb_template: Path, tmp_path: Path) -> Path:
    """A private copy of the demo KB that a test may write to."""
    target = tmp_path / "demo-kb"
    shutil.copytree(demo_kb_template, target)
    return target
