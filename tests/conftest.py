"""Shared fixtures: a small real knowledge base built once per session with the real model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trishield.demo import DEMO_WRITER, corpus_dir
from trishield.kb import KnowledgeBase, load_path


@pytest.fixture(scope="session")
def demo_kb_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Northwind demo corpus embedded with all-MiniLM-L6-v2 (built once, never written)."""
    directory = tmp_path_factory.mktemp("template") / "demo-kb"
    with KnowledgeBase.open(directory, create=True) as kb:
        kb.ingest(load_path(corpus_dir()).documents, tier="trusted", writer=DEMO_WRITER)
    return directory


@pytest.fixture
def demo_kb_dir(demo_kb_template: Path, tmp_path: Path) -> Path:
    """A private copy of the demo KB that a test may write to."""
    target = tmp_path / "demo-kb"
    shutil.copytree(demo_kb_template, target)
    return target
