"""Loaders: JSONL, .txt/.md folders, SQuAD JSON and ``load_path``; errors name file:line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trishield.errors import InputError
from trishield.kb import loaders
from trishield.kb.documents import content_hash
from trishield.kb.loaders import (
    MAX_DOCUMENT_CHARS,
    MAX_ID_CHARS,
    LoadedBatch,
    iter_jsonl,
    iter_squad,
    load_folder,
    load_path,
    load_text_file,
)

GOOD = '{"id": "good", "text": "A valid first document."}'


def write_lines(path: Path, lines: list[str | bytes]) -> Path:
    """Write ``lines`` (text or raw bytes) joined by newlines, exactly as given."""
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode("utf-8") for x in lines)
                     + b"\n")
    return path


def record(**fields: object) -> str:
    return json.dumps(fields)


def expect_input_error(path: Path, line: int | None, *fragments: str) -> InputError:
    """load_path(path) must raise an InputError that names ``path`` (and ``line``)."""
    with pytest.raises(InputError) as caught:
        load_path(path)
    error = caught.value
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert str(error).startswith(where), str(error)
    assert error.path == str(path)
    assert error.line == line
    for fragment in fragments:
        assert fragment in str(error), (fragment, str(error))
    return error


# --------------------------------------------------------------------------------------- JSONL


def test_jsonl_valid_file_with_optional_fields_and_blank_lines(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "docs.jsonl", [
        "",
        record(id="a", text="Alpha text.", title="Alpha", source="https://example.org/a"),
        "   ",
        record(id="b", text="Beta  text\nover two lines."),
        "\t",
        record(id="c", text="Gamma.", title=None, source=None),
        "",
    ])
    batch = load_path(path)
    assert isinstance(batch, LoadedBatch)
    assert batch.skipped_files == []
    assert [d.id for d in batch.documents] == ["a", "b", "c"]
    a, b, c = batch.documents
    assert (a.title, a.source, a.text) == ("Alpha", "https://example.org/a", "Alpha text.")
    assert (b.title, b.source, b.text) == ("", "", "Beta  text\nover two lines.")
    assert (c.title, c.source) == ("", "")
    # Origins count blank lines, so they point at the real 1-based line.
    assert [d.origin for d in batch.documents] == [f"{path}:2", f"{path}:4", f"{path}:6"]
    assert b.content_hash == content_hash("Beta text over two lines.")


def test_jsonl_crlf_bom_and_uppercase_suffix(tmp_path: Path) -> None:
    path = tmp_path / "DOCS.JSONL"
    path.write_bytes(b"\xef\xbb\xbf" + record(id="a", text="one").encode() + b"\r\n"
                     + record(id="b", text="two").encode() + b"\r\n")
    documents = load_path(path).documents
    assert [(d.id, d.text) for d in documents] == [("a", "one"), ("b", "two")]


def test_jsonl_unicode_text_is_kept(tmp_path: Path) -> None:
    text = "Zürich — 東京 — emoji \U0001f600, tab\tand newline\nkept"
    path = write_lines(tmp_path / "u.jsonl", [json.dumps({"id": "ü-1", "text": text})])
    (document,) = load_path(path).documents
    assert document.id == "ü-1"
    assert document.text == text


BAD_LINES = {
    "malformed json": ('{"id": "x", "text": ', "malformed JSON"),
    "trailing garbage": ('{"id": "x", "text": "y"} extra', "malformed JSON"),
    "array": ('["x", "y"]', "expected a JSON object, got list"),
    "string": ('"just a string"', "expected a JSON object, got str"),
    "number": ("42", "expected a JSON object, got int"),
    "null": ("null", "expected a JSON object, got NoneType"),
    "missing id": (record(text="y"), "missing required field 'id'"),
    "missing text": (record(id="x"), "missing required field 'text'"),
    "id not a string": (record(id=7, text="y"), "field 'id' must be a string, got int"),
    "id null": (record(id=None, text="y"), "field 'id' must be a string, got NoneType"),
    "text not a string": (record(id="x", text=["y"]), "field 'text' must be a string, got list"),
    "title not a string": (record(id="x", text="y", title=3),
                           "field 'title' must be a string, got int"),
    "source not a string": (record(id="x", text="y", source={}),
                            "field 'source' must be a string, got dict"),
    "unknown field": (record(id="x", text="y", url="z"), "unknown field(s) url"),
    "empty text": (record(id="x", text=""), "has empty text"),
    "whitespace text": (record(id="x", text=" \n\t "), "has empty text"),
    "binary control char in text": (record(id="x", text="a\u0001b"), "binary control"),
    "empty id": (record(id="", text="y"), "empty or has surrounding whitespace"),
    "id with surrounding whitespace": (record(id=" x", text="y"), "surrounding whitespace"),
    "id too long": (record(id="x" * (MAX_ID_CHARS + 1), text="y"),
                    f"{MAX_ID_CHARS + 1} characters long"),
    "id with newline": (record(id="x\ny", text="y"), "control characters"),
    "id with NUL": (record(id="x\u0000y", text="y"), "control characters"),
    "id with tab": (record(id="x\ty", text="y"), "control characters"),
    "id with DEL": (record(id="x\u007fy", text="y"), "control characters"),
    "id with C1 control": (record(id="x\u0085y", text="y"), "control characters"),
    "lone surrogate in text": ('{"id": "x", "text": "bad \\ud800 text"}', "surrogate"),
    "lone surrogate in id": ('{"id": "x\\udfff", "text": "y"}', "surrogate"),
    "lone surrogate in title": ('{"id": "x", "text": "y", "title": "\\ud83d"}', "surrogate"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_jsonl_bad_line_names_file_and_line(tmp_path: Path, case: str) -> None:
    line, fragment = BAD_LINES[case]
    path = write_lines(tmp_path / "bad.jsonl", [GOOD, "", line, GOOD.replace("good", "later")])
    expect_input_error(path, 3, fragment)


def test_jsonl_bad_line_error_also_from_iter_jsonl(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "bad.jsonl", [GOOD, record(id="x")])
    documents = iter_jsonl(path)
    assert next(documents).id == "good"
    with pytest.raises(InputError, match=r"bad\.jsonl:2: missing required field 'text'"):
        next(documents)


def test_jsonl_non_utf8_bytes_name_the_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "latin.jsonl", [
        GOOD,
        record(id="b", text="fine"),
        b'{"id": "c", "text": "\xff\xfe broken"}',
    ])
    error = expect_input_error(path, 3, "not valid UTF-8", "0xff")
    assert "offset 21" in str(error)


def test_jsonl_text_longer_than_limit(tmp_path: Path) -> None:
    at_limit = record(id="ok", text="x" * MAX_DOCUMENT_CHARS)
    over = record(id="big", text="x" * (MAX_DOCUMENT_CHARS + 1))
    path = write_lines(tmp_path / "big.jsonl", [at_limit, over])
    expect_input_error(path, 2, "'big'", f"{MAX_DOCUMENT_CHARS + 1:,} characters long",
                       "split it")


def test_jsonl_text_limit_is_read_at_call_time(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loaders, "MAX_DOCUMENT_CHARS", 10)
    path = write_lines(tmp_path / "small.jsonl", [record(id="a", text="0123456789"),
                                                  record(id="b", text="0123456789A")])
    expect_input_error(path, 2, "11 characters long (max 10)")


def test_jsonl_duplicate_id_with_different_text_names_both_origins(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "dup.jsonl", [
        record(id="a", text="first"),
        record(id="b", text="other"),
        record(id="a", text="second"),
    ])
    with pytest.raises(InputError) as caught:
        load_path(path)
    message = str(caught.value)
    assert "duplicate document id 'a'" in message
    assert f"{path}:1" in message
    assert f"{path}:3" in message


def test_jsonl_duplicate_id_with_same_text_collapses_to_one(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "dup.jsonl", [
        record(id="a", text="same text here", title="first"),
        record(id="b", text="other"),
        record(id="a", text="same text here", title="second"),
        record(id="a", text="  same\ntext   here "),  # whitespace-only change: same content
    ])
    documents = load_path(path).documents
    assert [d.id for d in documents] == ["a", "b"]
    assert documents[0].title == "first"
    assert documents[0].origin == f"{path}:1"


def test_jsonl_same_text_under_different_ids_is_kept(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "same.jsonl", [record(id="a", text="t"),
                                                 record(id="b", text="t")])
    assert [d.id for d in load_path(path).documents] == ["a", "b"]


@pytest.mark.parametrize("content", [b"", b"\n\n", b"  \n\t\n"])
def test_jsonl_without_documents(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    expect_input_error(path, None, "holds no documents")


# -------------------------------------------------------------------------------------- folders


def make_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return root


def test_folder_loads_txt_and_md_recursively(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "corpus", {
        "a.txt": "Plain text file without heading.",
        "b.md": "# Title B\n\nBody of b.",
        "sub/c.md": "\n\n#  Spaced Title  \nbody c",
        "sub/deeper/d.txt": "deep text",
        "sub/index.md": "sub index",
        "index.md": "top index",
        "UPPER.MD": "# Upper\nupper body",
        "notes.pdf": b"%PDF-1.4 binary",
        "sub/data.csv": "a,b\n1,2\n",
        "image.png": b"\x89PNG",
        "README": "no suffix at all",
        ".hidden.md": "# Hidden\nnot loaded",
        ".git/config": "[core]",
        ".cache/inside.md": "not loaded either",
        "sub/.secret.txt": "not loaded",
    })
    batch = load_folder(root)
    assert batch == load_path(root)
    by_id = {d.id: d for d in batch.documents}
    # Sorted by path; ids are the relative path without its suffix.
    assert list(by_id) == ["UPPER", "a", "b", "index", "sub/c", "sub/deeper/d", "sub/index"]
    assert by_id["a"].title == "a"
    assert by_id["b"].title == "Title B"
    assert by_id["sub/c"].title == "Spaced Title"
    assert by_id["UPPER"].title == "Upper"
    assert by_id["b"].text == "# Title B\n\nBody of b."
    assert by_id["sub/deeper/d"].source == str(root / "sub/deeper/d.txt")
    assert by_id["sub/deeper/d"].origin == str(root / "sub/deeper/d.txt")
    assert batch.skipped_files == sorted(
        [str(root / "README"), str(root / "image.png"), str(root / "sub/data.csv")])
    # A supported type that cannot be read is reported with its error, not skipped silently.
    assert [f.path for f in batch.failed_files] == [str(root / "notes.pdf")]
    assert batch.failed_files[0].error.startswith(f"{root / 'notes.pdf'}: cannot read this PDF")


def test_folder_is_deterministic(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "c", {f"{name}.md": f"text {name}" for name in "qwertyuiop"})
    first, second = load_folder(root), load_folder(root)
    assert [d.id for d in first.documents] == [d.id for d in second.documents]
    assert [d.id for d in first.documents] == sorted("qwertyuiop")


@pytest.mark.parametrize(("first_line", "title"), [
    ("# Heading", "Heading"),
    ("## Second level", "Second level"),
    ("#\tTabbed", "Tabbed"),
    ("# Windows line\r", "Windows line"),
    ("#hashtag is not a heading", "note"),
    ("#", "note"),
    ("#!/bin/sh", "note"),
    ("Plain first line", "note"),
    ("    # indented heading", "indented heading"),
])
def test_text_file_title_from_leading_heading(tmp_path: Path, first_line: str,
                                              title: str) -> None:
    path = tmp_path / "note.md"
    path.write_bytes(f"{first_line}\nbody\n".encode())
    document = load_text_file(path)
    assert document.title == title
    assert document.id == "note"


def test_text_file_with_bom_keeps_heading_title(tmp_path: Path) -> None:
    path = tmp_path / "bom.md"
    path.write_bytes(b"\xef\xbb\xbf# Saved On Windows\nbody")
    (document,) = load_path(path).documents
    assert document.title == "Saved On Windows"
    assert document.text == "# Saved On Windows\nbody"


def test_single_text_file_via_load_path(tmp_path: Path) -> None:
    path = tmp_path / "policy.txt"
    path.write_text("Refunds within 30 days.", encoding="utf-8")
    batch = load_path(path)
    assert batch.skipped_files == []
    (document,) = batch.documents
    assert (document.id, document.title, document.source) == ("policy", "policy", str(path))


@pytest.mark.parametrize("files", [
    {},
    {"image.png": b"\x89PNG", "table.csv": "a,b"},
    {".hidden.md": "# hidden", ".dir/x.txt": "hidden too"},
], ids=["empty", "only-other-files", "only-hidden"])
def test_folder_without_text_files(tmp_path: Path, files: dict[str, str | bytes]) -> None:
    root = make_tree(tmp_path / "corpus", files)
    root.mkdir(exist_ok=True)
    with pytest.raises(InputError, match=r"no document files \(\.txt, \.md, .*\) found") \
            as caught:
        load_path(root)
    assert str(root) in str(caught.value)


def test_folder_non_utf8_file_is_named_and_the_rest_loads(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "corpus", {
        "a.md": "fine",
        "sub/latin1.txt": "caf\xe9".encode("latin-1"),
        "z.md": "fine too",
    })
    bad = root / "sub" / "latin1.txt"
    batch = load_path(root)
    assert [d.id for d in batch.documents] == ["a", "z"]
    (failed,) = batch.failed_files
    assert failed.path == str(bad)
    assert failed.error.startswith(f"{bad}: not valid UTF-8 (byte 0xe9 at offset 3)")
    with pytest.raises(InputError) as caught:  # alone, the same file is an error
        load_path(bad)
    assert str(caught.value) == failed.error


def test_folder_empty_text_file_is_named(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "corpus", {"a.md": "fine", "blank.txt": "  \n\n"})
    (failed,) = load_path(root).failed_files
    assert failed.path == str(root / "blank.txt")
    assert "has empty text" in failed.error


def test_folder_where_every_file_fails_is_an_error(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "corpus", {"blank.txt": " ", "bad.pdf": b"%PDF-1.4 junk"})
    with pytest.raises(InputError, match=r"none of the 2 document file\(s\)") as caught:
        load_path(root)
    assert caught.value.path == str(root)
    assert str(root / "bad.pdf") in str(caught.value)


def test_folder_same_id_from_txt_and_md(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "corpus", {"notes.md": "one text", "notes.txt": "another"})
    with pytest.raises(InputError, match="duplicate document id 'notes'") as caught:
        load_path(root)
    assert str(root / "notes.md") in str(caught.value)
    assert str(root / "notes.txt") in str(caught.value)

    same = make_tree(tmp_path / "same", {"notes.md": "one text", "notes.txt": "one  text"})
    assert [d.id for d in load_path(same).documents] == ["notes"]


# ---------------------------------------------------------------------------------------- SQuAD


def squad(tmp_path: Path, payload: object, name: str = "squad.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_squad_one_document_per_paragraph(tmp_path: Path) -> None:
    path = squad(tmp_path, {"version": "1.1", "data": [
        {"title": "Alpha", "paragraphs": [
            {"context": "First alpha paragraph.", "qas": [{"id": "q1", "question": "?"}]},
            {"context": "Second alpha paragraph.", "qas": []},
        ]},
        {"title": "Beta", "paragraphs": [{"context": "Only beta paragraph."}]},
        {"paragraphs": [{"context": "No title here."}]},
    ]})
    batch = load_path(path)
    assert batch.skipped_files == []
    assert [(d.id, d.title, d.text) for d in batch.documents] == [
        ("Alpha:0", "Alpha", "First alpha paragraph."),
        ("Alpha:1", "Alpha", "Second alpha paragraph."),
        ("Beta:0", "Beta", "Only beta paragraph."),
        ("untitled:0", "", "No title here."),
    ]
    assert {d.source for d in batch.documents} == {str(path)}
    assert batch.documents[1].origin == f"{path}#data[0].paragraphs[1]"


def test_squad_id_prefix(tmp_path: Path) -> None:
    path = squad(tmp_path, {"data": [{"title": "T", "paragraphs": [{"context": "c"}]}]})
    assert [d.id for d in iter_squad(path, id_prefix="set:")] == ["set:T:0"]


def test_squad_with_no_paragraphs_holds_no_documents(tmp_path: Path) -> None:
    path = squad(tmp_path, {"data": [{"title": "T", "paragraphs": []}]})
    expect_input_error(path, None, "holds no documents")


def test_squad_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "data": [\n    {"title": "T",,}\n  ]\n}\n', encoding="utf-8")
    expect_input_error(path, 3, "malformed JSON")


def test_squad_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.json"
    path.write_bytes(b'{"data": [{"title": "caf\xe9", "paragraphs": []}]}')
    expect_input_error(path, None, "not valid UTF-8", "0xe9")


@pytest.mark.parametrize(("payload", "fragment"), [
    ({"version": "1.1"}, 'expected an object with a "data" list'),
    ([{"title": "T"}], 'expected an object with a "data" list'),
    ({"data": {"title": "T"}}, 'expected an object with a "data" list'),
    ({"data": ["not an article"]}, 'data[0] has no "paragraphs" list'),
    ({"data": [{"title": "T"}]}, 'data[0] has no "paragraphs" list'),
    ({"data": [{"title": 5, "paragraphs": []}]}, "data[0].title is not a string"),
    ({"data": [{"title": "T", "paragraphs": [{"context": "ok"}, {"qas": []}]}]},
     'data[0].paragraphs[1] has no "context" string'),
    ({"data": [{"title": "T", "paragraphs": ["text"]}]},
     'data[0].paragraphs[0] has no "context" string'),
    ({"data": [{"title": "T", "paragraphs": [{"context": 3}]}]},
     'data[0].paragraphs[0] has no "context" string'),
    ({"data": [{"title": "T", "paragraphs": [{"context": "  "}]}]}, "has empty text"),
    ({"data": [{"title": "T", "paragraphs": [{"context": "bad \ud800"}]}]}, "surrogate"),
], ids=["no-data", "top-level-list", "data-not-list", "article-not-object", "no-paragraphs",
        "title-not-string", "paragraph-without-context", "paragraph-not-object",
        "context-not-string", "empty-context", "surrogate-context"])
def test_squad_bad_structure_names_the_file(tmp_path: Path, payload: object,
                                            fragment: str) -> None:
    expect_input_error(squad(tmp_path, payload), None, fragment)


# ------------------------------------------------------------------------------------ load_path


def test_load_path_nonexistent(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    expect_input_error(missing, None, "no such file or folder")


@pytest.mark.parametrize(("name", "shown"), [("data.csv", "'.csv'"), ("notes", "'(none)'"),
                                            ("docs.jsonl.gz", "'.gz'")])
def test_load_path_unsupported_suffix(tmp_path: Path, name: str, shown: str) -> None:
    path = tmp_path / name
    path.write_text("id,text\na,b\n", encoding="utf-8")
    expect_input_error(path, None, f"unsupported file type {shown}")


def test_load_path_accepts_str(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "docs.jsonl", [GOOD])
    assert [d.id for d in load_path(str(path)).documents] == ["good"]


# ------------------------------------------------------------------------------ CLI exit codes


@pytest.mark.slow
@pytest.mark.parametrize(("lines", "line"), [
    ([GOOD, record(id="b", text="fine"), '{"id": "c", "text": '], 3),
    ([GOOD, b'{"id": "b", "text": "\xff\xfe"}', record(id="c", text="fine")], 2),
    ([*(record(id=f"d{i}", text=f"document {i}") for i in range(50)), record(id="x")], 51),
], ids=["malformed-json", "non-utf8", "bad-last-line"])
def test_cli_ingest_rejects_bad_file_without_writing(tmp_path: Path, lines: list,
                                                     line: int) -> None:
    bad = write_lines(tmp_path / "bad.jsonl", lines)
    kb = tmp_path / "kb"
    env = {**os.environ, "COLUMNS": "400"}
    result = subprocess.run(
        [sys.executable, "-m", "trishield.cli", "ingest", str(bad), "--kb", str(kb)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )
    assert result.returncode == InputError.exit_code, result.stderr
    assert f"{bad}:{line}:" in result.stderr
    assert "Traceback" not in result.stderr
    if kb.exists():
        info = subprocess.run(
            [sys.executable, "-m", "trishield.cli", "info", "--kb", str(kb)],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
        )
        assert info.returncode != 0, info.stdout
