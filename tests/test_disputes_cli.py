"""``trishield disputes list|show|resolve`` through the real CLI on a real KB whose
conflict was met by the real pipeline; the quarantine commands then show the side that was
withdrawn, and ``trishield --help`` still imports no KB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dispute_support import LIE, QUESTION, TRUTH, conflict_kb, side_of
from trishield.cli import cli
from trishield.defenses import build_defense
from trishield.errors import ConflictError, InputError
from trishield.kb import KnowledgeBase
from trishield.llm import ExtractiveReader


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def ok(*args: str) -> Result:
    result = run(*args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    directory = conflict_kb(tmp_path / "kb")
    with KnowledgeBase.open(directory) as kb:
        answer = build_defense("full", kb, [ExtractiveReader()]).ask(QUESTION)
    assert answer.refused and answer.trace.evidence.dispute.id == 1
    return directory


def test_list_show_and_resolve_by_quarantine(kb_dir: Path) -> None:
    kb = str(kb_dir)
    listed = ok("disputes", "list", "--kb", kb).stdout
    assert all(word in listed for word in ("Halden", "historian", "mallory", "conflict", "1x"))
    (row,) = json.loads(ok("disputes", "list", "--kb", kb, "--json").stdout)
    assert row["id"] == 1 and row["occurrences"] == 1
    shown = ok("disputes", "show", "1", "--kb", kb).stdout
    assert "Ada Lindqvist" in shown and "Marco Bellini" in shown and "[stored]" in shown
    record = json.loads(ok("disputes", "show", "1", "--kb", kb, "--json").stdout)
    assert {p["text"] for side in record["sides"] for s in side["sources"]
            for p in s["passages"]} == {TRUTH, LIE}
    side = side_of(record, "bridge/lie")
    done = ok("disputes", "resolve", "1", "--kb", kb, "--action", "quarantine", "--side",
              str(side), "--by", "ada", "--note", "a forgery").stdout
    assert "quarantined: bridge/lie" in done and "dispute 1 resolved; audited as ada" in done
    held = ok("quarantine", "list", "--kb", kb).stdout
    assert "bridge/lie" in held and "dispute 1: quarantined by ada" in " ".join(held.split())
    assert "(none)" in ok("disputes", "list", "--kb", kb).stdout
    resolved = json.loads(ok("disputes", "list", "--kb", kb, "--state", "resolved",
                             "--json").stdout)
    assert resolved[0]["closed_by"] == "ada"
    assert resolved[0]["resolution"]["documents"] == ["bridge/lie"]
    after = ok("disputes", "show", "1", "--kb", kb).stdout
    assert "[held]" in after and "resolved by ada" in after
    # the quarantine's own release path puts it back
    ok("quarantine", "release", "bridge/lie", "--kb", kb, "--by", "ada")
    with KnowledgeBase.open(kb_dir) as reopened:
        assert reopened.store.document("bridge/lie")["writer"] == "mallory"
        actions = [entry["action"] for entry in reopened.store.audit_log(10)]
    assert actions[:4] == ["ingest", "release", "dispute", "quarantine"], actions


def test_resolve_refuses_what_it_cannot_do(kb_dir: Path) -> None:
    kb = str(kb_dir)
    missing_side = run("disputes", "resolve", "1", "--kb", kb, "--action", "trust",
                       "--by", "ada")
    assert isinstance(missing_side.exception, InputError)
    assert "needs the side" in str(missing_side.exception)
    ok("disputes", "resolve", "1", "--kb", kb, "--action", "dismiss", "--by", "ada")
    again = run("disputes", "resolve", "1", "--kb", kb, "--action", "dismiss", "--by", "ada")
    assert isinstance(again.exception, ConflictError)
    unknown = run("disputes", "show", "7", "--kb", kb)
    assert "no dispute 7" in str(unknown.exception)
    assert run("disputes", "list", "--kb", kb, "--state", "closed").exit_code == 2


def test_the_real_command_exits_with_the_errors_code(kb_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "trishield.cli", "disputes", "resolve", "1",
                           "--kb", str(kb_dir), "--action", "quarantine", "--by", "ada"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == InputError.exit_code, done.stderr
    assert "needs the side" in done.stderr


def test_the_disputes_module_imports_nothing_heavy_at_module_level() -> None:
    """The CLI is to start without the model libraries (``import trishield`` itself still
    loads them: another change's business); this module's own top-level imports are the
    standard library, click and rich, and the KB is imported inside each command."""
    import ast

    import trishield.cli_disputes as module

    tree = ast.parse(Path(module.__file__).read_text())
    imported = {node.module if isinstance(node, ast.ImportFrom) else alias.name
                for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in node.names}
    assert imported <= {"__future__", "datetime", "json", "sys", "pathlib", "click",
                        "rich.console", "rich.markup", "rich.table"}, imported
    inside = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "trishield.kb" in inside


def test_the_answers_summary_points_to_the_dispute(tmp_path: Path) -> None:
    """`trishield ask` prints the summary: a recorded conflict names its dispute."""
    from rich.console import Console

    from trishield.trace_view import render_summary

    with KnowledgeBase.open(conflict_kb(tmp_path / "kb")) as kb:
        answer = build_defense("full", kb, [ExtractiveReader()]).ask(QUESTION)
    console = Console(record=True, width=200)
    render_summary(console, answer)
    assert "dispute: recorded as 1 (met 1x, open): `trishield disputes show 1`" in \
        console.export_text()
