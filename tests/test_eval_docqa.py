"""The documentation QA set: the file's validity, its evidence in the built corpus, the scorer.

The evidence check builds the real corpus from this machine's Debian documentation (a few
seconds); it is skipped, and only it, where those files are not installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from trishield.errors import InputError
from trishield.eval import docqa
from trishield.eval.docqa import DocQuestion, ManifestEntry

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = {**os.environ, "PYTHONPATH": str(SRC)}
ABSENT = ManifestEntry(source="/usr/share/man/man1/docqa-absent.1.gz", package="docqa-absent-pkg")


def _question(answers: list[str], match: str) -> DocQuestion:
    return DocQuestion(id="docqa-999", split="dev", genre="man", question="q?",
                       answers=tuple(answers), match=match, source="man/man1/x.1.txt",
                       evidence="e")


def _sources_installed() -> list[str]:
    """The answer-bearing sources this machine lacks (with their packages)."""
    needed = docqa.answer_sources(docqa.load_questions())
    return [f"{e.source} ({e.package})" for e in docqa.load_manifest()
            if e.dest in needed and not Path(e.source).is_file()]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, docqa.CorpusReport]:
    lacking = _sources_installed()
    if lacking or not (shutil.which("man") and shutil.which("col")):
        pytest.skip("the Debian documentation the set was written from is not installed: "
                    + (", ".join(lacking[:5]) or "man/col missing"))
    out = tmp_path_factory.mktemp("docqa") / "corpus"
    return out, docqa.build_corpus(out, [*docqa.load_manifest(), ABSENT])


# --------------------------------------------------------------------------- the file


def test_set_size_ids_and_fields() -> None:
    questions = docqa.load_questions()
    assert len(questions) >= 120
    assert len({q.id for q in questions}) == len(questions)
    assert len({q.question for q in questions}) == len(questions)
    assert {q.genre for q in questions} == set(docqa.GENRES)


def test_splits_are_the_seeded_stratified_halves() -> None:
    questions = docqa.load_questions()
    assert {q.id: q.split for q in questions} == docqa.assign_splits(questions)
    per = Counter((q.genre, q.split) for q in questions)
    for genre in docqa.GENRES:
        assert per[(genre, "dev")] and per[(genre, "test")], genre
        assert abs(per[(genre, "dev")] - per[(genre, "test")]) <= 1, genre
    dev, test = docqa.load_questions("dev"), docqa.load_questions("test")
    assert len(dev) + len(test) == len(questions)
    assert {q.split for q in dev} == {"dev"}


def test_every_evidence_quote_states_an_accepted_answer() -> None:
    for q in docqa.load_questions():
        assert docqa.is_correct(q.evidence, q), q.id


def test_every_source_is_in_the_manifest() -> None:
    dests = {e.dest for e in docqa.load_manifest()}
    assert docqa.answer_sources(docqa.load_questions()) <= dests


# --------------------------------------------------------------------------- the built corpus


def test_evidence_appears_in_its_built_source(built: tuple[Path, docqa.CorpusReport]) -> None:
    root, _ = built
    texts: dict[str, str] = {}
    for q in docqa.load_questions():
        if q.source not in texts:
            texts[q.source] = docqa.document_text(root / q.source)
        assert docqa.quote_in(q.evidence, texts[q.source]), f"{q.id}: {q.evidence!r}"


def test_corpus_json_records_every_file(built: tuple[Path, docqa.CorpusReport]) -> None:
    root, report = built
    summary = json.loads((root / "corpus.json").read_text(encoding="utf-8"))
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert on_disk == {f["path"] for f in summary["files"]} | {"corpus.json"}
    for f in summary["files"]:
        assert hashlib.sha256((root / f["path"]).read_bytes()).hexdigest() == f["sha256"]
    assert summary["total_bytes"] == report.total_bytes
    assert 200 <= summary["file_count"] <= 320
    # man pages are rendered text, gzipped docs unpacked, the rest copied byte for byte
    assert (root / "man/man1/ssh.1.txt").read_text(encoding="utf-8").lstrip().startswith("SSH(1)")
    assert (root / "doc/debian-policy/policy.txt").stat().st_size > 100_000
    assert summary["missing"] == [{"source": ABSENT.source, "package": ABSENT.package}]


def test_missing_answer_source_fails_naming_its_package(tmp_path: Path) -> None:
    manifest = docqa.load_manifest()
    ssh = next(e for e in manifest if e.dest == "man/man1/ssh.1.txt")
    # same corpus path, a file no machine has
    gone = ManifestEntry(source=ssh.source.removesuffix(".gz"), package=ssh.package)
    assert gone.dest == ssh.dest
    out = tmp_path / "corpus"
    with pytest.raises(InputError, match="openssh-client"):
        docqa.build_corpus(out, [gone if e is ssh else e for e in manifest])
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_build_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "trishield.eval.docqa", "--build", str(tmp_path)],
                          capture_output=True, text=True, env=ENV,
                          timeout=120)
    assert proc.returncode == 2
    assert "not an empty folder" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_check_cli_validates_the_file() -> None:
    proc = subprocess.run([sys.executable, "-m", "trishield.eval.docqa", "--check"],
                          capture_output=True, text=True, env=ENV,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "questions valid" in proc.stdout


# --------------------------------------------------------------------------- loading errors


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


GOOD = {"id": "docqa-001", "split": "dev", "genre": "man", "question": "Which option?",
        "answers": ["-p"], "match": "option", "source": "man/man1/ssh.1.txt",
        "evidence": "-p port"}


@pytest.mark.parametrize(("change", "message"), [
    ({"answers": []}, "answers must be 1-3"),
    ({"genre": "wiki"}, "genre must be one of"),
    ({"match": "regex"}, "match must be one of"),
    ({"id": "q1"}, "is not docqa-NNN"),
    ({"source": "/etc/passwd"}, "corpus-relative"),
    ({"evidence": "x" * 201}, "longer than 200"),
    ({"extra": 1}, "unknown fields"),
])
def test_invalid_line_is_named(tmp_path: Path, change: dict[str, object], message: str) -> None:
    bad = {**GOOD, "id": "docqa-002", **change}
    path = _write(tmp_path / "q.jsonl", [GOOD, bad])
    with pytest.raises(InputError, match=f"q.jsonl line 2: .*{message}"):
        docqa.load_questions(path=path)


def test_missing_field_and_duplicate_id_are_named(tmp_path: Path) -> None:
    no_question = {k: v for k, v in GOOD.items() if k != "question"}
    with pytest.raises(InputError, match="line 1: field 'question'"):
        docqa.load_questions(path=_write(tmp_path / "a.jsonl", [no_question]))
    with pytest.raises(InputError, match="line 2: duplicate id docqa-001"):
        docqa.load_questions(path=_write(tmp_path / "b.jsonl", [GOOD, GOOD]))
    (tmp_path / "c.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1: invalid JSON"):
        docqa.load_questions(path=tmp_path / "c.jsonl")
    with pytest.raises(InputError, match="split must be one of"):
        docqa.load_questions("train")


# --------------------------------------------------------------------------- scorer


def test_token_match_needs_a_whole_token() -> None:
    q = _question(["-p"], "token")
    assert docqa.is_correct("Use -p 2222.", q)
    assert docqa.is_correct("`-p`", q)
    assert not docqa.is_correct("Use -pwd", q)
    assert not docqa.is_correct("use --p", q)
    ident = _question(["XML_ParserCreate"], "token")
    assert docqa.is_correct("Call xml_parsercreate().", ident)
    assert not docqa.is_correct("XML_ParserCreateNS", ident)
    assert not docqa.is_correct("MY_XML_ParserCreate", ident)
    assert docqa.is_correct("it is 3.", _question(["3"], "token"))
    assert not docqa.is_correct("it is 30", _question(["3"], "token"))


def test_option_match_keeps_case() -> None:
    q = _question(["-N"], "option")
    assert docqa.is_correct("ssh -N host", q)
    assert not docqa.is_correct("ssh -n host", q)
    assert not docqa.is_correct("-p", _question(["-P"], "option"))


def test_contains_match_and_normalisation() -> None:
    q = _question(["in all directories"], "contains")
    assert docqa.is_correct("It matches   IN ALL\n directories.", q)
    assert docqa.is_correct('"in all directories"', q)
    assert not docqa.is_correct("in some directories", q)
    assert docqa.is_correct("“wishlist”", _question(["wishlist"], "token"))
    assert not docqa.is_correct("", q)
