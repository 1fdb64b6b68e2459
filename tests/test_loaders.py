"""Loaders: JSONL, .txt/.md folders, SQuAD JSON and ``load_path``; errors name file:line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.hostile_files import pdf_bytes

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


def test_jsonl_line_longer_than_any_document_is_refused_without_reading_it_whole(
        tmp_path: Path) -> None:
    """A JSONL file is read a line at a time; a "line" past what any document may hold (a
    file without line breaks) is refused at its number instead of read whole into memory."""
    path = tmp_path / "one-line.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + b"x" * (loaders.MAX_JSONL_LINE_BYTES + 10))
    expect_input_error(path, 2, f"line is longer than {loaders.MAX_JSONL_LINE_BYTES:,} bytes")


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
    assert [(f.path, f.reason) for f in batch.skipped_files] == [
        (str(root / name), "unsupported file type")
        for name in ("README", "image.png", "sub/data.csv")]
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


# ------------------------------------------------------------ document formats: fixture makers


def make_pdf(pages: list[str], *, title: str | None = None) -> bytes:
    """A minimal valid PDF, one line of Helvetica text per page ("" = a page without text),
    written byte by byte so that no third-party file is needed."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    bodies = ["<< /Type /Catalog /Pages 2 0 R >>",
              f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
              "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        content = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET" if text else ""
        bodies.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                      f"<< /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>")
        bodies.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    info = ""
    if title is not None:
        bodies.append(f"<< /Title ({title}) >>")
        info = f" /Info {len(bodies)} 0 R"
    return pdf_bytes(bodies, info)


def encrypt_pdf(data: bytes, *, user_password: str) -> bytes:
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret",
                   algorithm="AES-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def make_docx(path: Path, *, core_title: str = "") -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = core_title
    document.add_heading("Returns Policy", 1)
    document.add_paragraph("Refunds are paid within 14 days of receipt.")
    table = document.add_table(rows=2, cols=2)
    for row, (key, value) in enumerate([("Region", "Days"), ("EU", "30")]):
        table.cell(row, 0).text, table.cell(row, 1).text = key, value
    document.add_paragraph("Contact the depot for exchanges.")
    document.save(path)
    return path


HTML_PAGE = """<!doctype html>
<html><head><title>Shipping  Guide</title><meta charset="utf-8">
<style>body { color: red }</style><script>var tracker = "script text";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">Navigation text</a></nav>
<h1>Shipping</h1><p>Parcels   leave the depot
 every Tuesday.</p><div hidden>hidden text</div><span style="DISPLAY: none">css hidden</span>
<p style="visibility:hidden">invisible paragraph</p><noscript>noscript text</noscript>
<p>Caf\u00e9 deliveries are free. Inline <b>bold</b> stays<!-- a comment --> in its line.</p>
<pre>  preformatted
    code</pre></body></html>"""

RST_PAGE = """\
Installing the Tool
===================

Run ``make install`` to build *everything*.

.. a comment the author left for editors

.. include:: {secret}

.. raw:: html

   <b>raw html text</b>

Section Two
-----------

- first item
- second item
"""


# ------------------------------------------------------------------------------------------ PDF


def test_pdf_gives_one_document_per_page_with_page_provenance(tmp_path: Path) -> None:
    path = tmp_path / "manual.pdf"
    path.write_bytes(make_pdf(["The warranty lasts two years.", "",
                               "Returns go to Depot (Seven)."], title="Owner Manual"))
    batch = load_path(path)
    assert (batch.skipped_files, batch.failed_files) == ([], [])
    # The page without text is left out; the others keep their page number everywhere.
    assert [(d.id, d.title, d.source, d.origin, d.text) for d in batch.documents] == [
        ("manual:p1", "Owner Manual (page 1)", str(path), f"{path}#page=1",
         "The warranty lasts two years."),
        ("manual:p3", "Owner Manual (page 3)", str(path), f"{path}#page=3",
         "Returns go to Depot (Seven)."),
    ]


def test_pdf_without_a_title_is_named_after_its_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.PDF"
    path.write_bytes(make_pdf(["Only page."]))
    (document,) = load_path(path).documents
    assert (document.id, document.title) == ("notes:p1", "notes (page 1)")


def test_pdf_without_any_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(make_pdf(["", ""]))
    expect_input_error(path, None, "no extractable text")


def test_encrypted_pdf_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "locked.pdf"
    path.write_bytes(encrypt_pdf(make_pdf(["Secret plans."]), user_password="s3cret"))
    expect_input_error(path, None, "encrypted and needs a password")


def test_pdf_encrypted_only_against_editing_is_read(tmp_path: Path) -> None:
    path = tmp_path / "print-protected.pdf"
    path.write_bytes(encrypt_pdf(make_pdf(["Readable by anyone."]), user_password=""))
    (document,) = load_path(path).documents
    assert document.text == "Readable by anyone."


@pytest.mark.parametrize("content", [
    b"%PDF-1.4 not really a pdf",
    b"",
    b"\x00\x01\x02 random bytes",
], ids=["garbage", "empty", "binary"])
def test_corrupt_pdf_alone_is_an_error_naming_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(content)
    expect_input_error(path, None, "cannot read this PDF file", "corrupt or not really a PDF")


def test_corrupt_and_encrypted_pdfs_in_a_folder_are_reported_and_the_rest_loads(
        tmp_path: Path) -> None:
    good = make_pdf(["Depot hours are nine to five."])
    root = make_tree(tmp_path / "corpus", {
        "a-good.pdf": good,
        "b-truncated.pdf": good[: len(good) // 3],
        "c-locked.pdf": encrypt_pdf(good, user_password="pw"),
        "d-notes.md": "# Notes\nStill ingested.",
    })
    batch = load_path(root)
    assert [d.id for d in batch.documents] == ["a-good:p1", "d-notes"]
    assert [f.path for f in batch.failed_files] == [str(root / "b-truncated.pdf"),
                                                   str(root / "c-locked.pdf")]
    truncated, locked = batch.failed_files
    assert truncated.error.startswith(f"{root / 'b-truncated.pdf'}: cannot read this PDF")
    assert locked.error == f"{root / 'c-locked.pdf'}: the PDF is encrypted and needs a " \
                           "password; save a decrypted copy to ingest it"


# ----------------------------------------------------------------------------------------- HTML


def test_html_keeps_visible_text_and_drops_script_style_nav_hidden(tmp_path: Path) -> None:
    path = tmp_path / "shipping.html"
    path.write_text(HTML_PAGE, encoding="utf-8")
    (document,) = load_path(path).documents
    assert (document.id, document.title, document.origin) == ("shipping", "Shipping Guide",
                                                             str(path))
    assert document.text == ("Shipping\n\nParcels leave the depot every Tuesday.\n\n"
                             "Caf\u00e9 deliveries are free. Inline bold stays in its line."
                             "\n\npreformatted\ncode")
    for dropped in ("script text", "color: red", "Navigation text", "hidden text",
                    "noscript text", "a comment", "css hidden", "invisible paragraph"):
        assert dropped not in document.text


def test_html_declared_encoding_and_h1_title(tmp_path: Path) -> None:
    path = tmp_path / "legacy.htm"
    path.write_bytes('<html><head><meta charset="iso-8859-1"></head><body><h1>Men\u00fc</h1>'
                     '<p>Gr\u00fc\u00dfe</p></body></html>'.encode("latin-1"))
    (document,) = load_path(path).documents
    assert (document.title, document.text) == ("Men\u00fc", "Men\u00fc\n\nGr\u00fc\u00dfe")


def test_xhtml_is_read_as_html_without_a_parser_warning(tmp_path: Path) -> None:
    """An XHTML page (libxslt's and Debian Policy's docs are) is read as the HTML it is
    served as, and bs4's advice to parse it as XML is not printed at every ingest."""
    import warnings

    path = tmp_path / "api.html"
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//'
                    'DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-'
                    'transitional.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml"><head>'
                    "<title>API</title></head><body><p>Copies a namespace list.</p></body>",
                    encoding="utf-8")  # no closing </html>: optional, and bs4's cue for HTML
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (document,) = load_path(path).documents
    assert (document.title, document.text) == ("API", "Copies a namespace list.")


def test_html_without_visible_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.html"
    path.write_text("<html><head><script>x()</script></head><body><nav>Home</nav></body>"
                    "</html>", encoding="utf-8")
    expect_input_error(path, None, "has empty text")


# ----------------------------------------------------------------------------------------- DOCX


def test_docx_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "policy.docx")
    (document,) = load_path(path).documents
    assert (document.id, document.title, document.source) == ("policy", "Returns Policy",
                                                             str(path))
    assert document.text == ("Returns Policy\n\nRefunds are paid within 14 days of receipt."
                             "\n\nRegion | Days\n\nEU | 30\n\nContact the depot for exchanges.")


def test_docx_core_properties_title_wins(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "p.docx", core_title="Official Policy")
    assert load_path(path).documents[0].title == "Official Policy"


@pytest.mark.parametrize("content", [b"PK\x03\x04 truncated zip", b"plain text, not a zip"],
                         ids=["bad-zip", "not-zip"])
def test_corrupt_docx_is_an_error_naming_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.docx"
    path.write_bytes(content)
    expect_input_error(path, None, "cannot read this DOCX file")


# ----------------------------------------------------------------------------------------- rST


def test_rst_rendered_to_plain_text_without_includes_raw_or_comments(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET FILE CONTENT", encoding="utf-8")
    path = tmp_path / "install.rst"
    path.write_text(RST_PAGE.format(secret=secret), encoding="utf-8")
    (document,) = load_path(path).documents
    assert (document.id, document.title) == ("install", "Installing the Tool")
    assert document.text == ("Installing the Tool\n\nRun make install to build everything.\n\n"
                             "Section Two\n\nfirst item\n\nsecond item")
    for absent in ("SECRET FILE CONTENT", "raw html text", "a comment", "include", ".."):
        assert absent not in document.text


def test_rst_with_markup_errors_still_loads_without_docutils_messages(tmp_path: Path) -> None:
    path = tmp_path / "sloppy.rst"
    path.write_text("Title\n===\n\nText with *unclosed emphasis and `bad role`:x:.\n",
                    encoding="utf-8")
    (document,) = load_path(path).documents
    assert "unclosed emphasis" in document.text
    for message in ("ERROR", "WARNING", "Inline emphasis start-string", "System Message"):
        assert message not in document.text


# --------------------------------------------------------------------------------- front matter


def test_front_matter_gives_title_and_metadata_and_leaves_the_text(tmp_path: Path) -> None:
    path = tmp_path / "faq.md"
    path.write_text("---\ntitle: Frequently Asked\ntags: [billing, refunds]\n"
                    "date: 2024-05-01\ndraft: false\nweight: 3\nempty:\n---\n"
                    "# Heading Below\n\nAnswer text.\n", encoding="utf-8")
    batch = load_path(path)
    (document,) = batch.documents
    assert (document.title, document.text) == ("Frequently Asked",
                                                "# Heading Below\n\nAnswer text.\n")
    assert batch.metadata == {"faq": {"tags": ["billing", "refunds"], "date": "2024-05-01",
                                      "draft": False, "weight": 3}}


@pytest.mark.parametrize(("name", "body", "title", "text"), [
    ("a.md", "---\nauthor: x\n---\n# From Heading\nbody", "From Heading",
     "# From Heading\nbody"),
    ("b.txt", "---\r\ntitle: Windows\r\n---\r\nbody\r\n", "Windows", "body\r\n"),
    ("c.md", "---\ntitle: Dots\n...\nbody", "Dots", "body"),
    ("d.md", "---\n---\nbody only", "d", "body only"),
    ("e.md", "text first\n---\ntitle: not front matter\n---\n", "e",
     "text first\n---\ntitle: not front matter\n---\n"),
    ("f.rst", "---\ntitle: RST Front\n---\nHeading\n=======\n\nbody", "RST Front",
     "Heading\n\nbody"),
], ids=["heading-fallback", "crlf-txt", "dots-close", "empty", "not-at-start", "rst"])
def test_front_matter_variants(tmp_path: Path, name: str, body: str, title: str,
                               text: str) -> None:
    path = tmp_path / name
    path.write_bytes(body.encode("utf-8"))
    (document,) = load_path(path).documents
    assert (document.title, document.text) == (title, text)
    assert "front matter" not in document.text or name == "e.md"


@pytest.mark.parametrize(("body", "line", "fragment"), [
    ("---\ntitle: never closed\nbody", 1, "is never closed"),
    ("---\ntitle: [unclosed\n---\nbody", 3, "malformed YAML front matter"),
    ("---\n- a list\n- not a mapping\n---\nbody", 2, "got a YAML list"),
    ("---\ntitle: ok\nnested: {a: 1}\n---\nbody", None, "key 'nested' holds a dict"),
    ("---\ntags: [[a, b]]\n---\nbody", None, "key 'tags' holds a nested list"),
    ("---\ntitle: 2024\n---\nbody", None, "'title' must be text"),
    ("---\n1: one\n---\nbody", None, "key 1 is not text"),
    ("---\ntitle: x\n---\n  \n", None, "has empty text"),
], ids=["unclosed", "bad-yaml", "list", "nested-map", "nested-list", "int-title",
        "int-key", "only-front-matter"])
def test_bad_front_matter_names_file_and_line(tmp_path: Path, body: str, line: int | None,
                                              fragment: str) -> None:
    path = tmp_path / "page.md"
    path.write_text(body, encoding="utf-8")
    expect_input_error(path, line, fragment)


def test_front_matter_does_not_construct_python_objects(tmp_path: Path) -> None:
    path = tmp_path / "evil.md"
    path.write_text("---\ntitle: !!python/object/apply:os.system ['echo pwned']\n---\nbody",
                    encoding="utf-8")
    expect_input_error(path, 2, "malformed YAML front matter", "could not determine a "
                       "constructor")


# ------------------------------------------------------------------------------ a mixed folder


def make_mixed_folder(root: Path) -> Path:
    """One file of every supported kind, plus a corrupt PDF and an unsupported file."""
    root.mkdir(parents=True)
    (root / "manual.pdf").write_bytes(make_pdf(["Warranty claims need the receipt.", "",
                                                "The Northwind depot is in Harbor Street."],
                                               title="Manual"))
    (root / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog")
    (root / "shipping.html").write_text(HTML_PAGE, encoding="utf-8")
    make_docx(root / "policy.docx")
    (root / "install.rst").write_text(RST_PAGE.format(secret=root / "none.txt"),
                                      encoding="utf-8")
    (root / "faq.md").write_text("---\ntitle: Billing FAQ\nowner: finance\n---\n"
                                 "Invoices are sent on the first working day.\n",
                                 encoding="utf-8")
    (root / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    return root


def test_mixed_folder_loads_every_kind_with_provenance(tmp_path: Path) -> None:
    root = make_mixed_folder(tmp_path / "mixed")
    batch = load_path(root)
    assert [(d.id, d.title, d.origin) for d in batch.documents] == [
        ("faq", "Billing FAQ", str(root / "faq.md")),
        ("install", "Installing the Tool", str(root / "install.rst")),
        ("manual:p1", "Manual (page 1)", f"{root / 'manual.pdf'}#page=1"),
        ("manual:p3", "Manual (page 3)", f"{root / 'manual.pdf'}#page=3"),
        ("policy", "Returns Policy", str(root / "policy.docx")),
        ("shipping", "Shipping Guide", str(root / "shipping.html")),
    ]
    assert all(d.source == d.origin.split("#")[0] for d in batch.documents)
    assert [f.path for f in batch.skipped_files] == [str(root / "photo.jpg")]
    assert [f.path for f in batch.failed_files] == [str(root / "broken.pdf")]
    assert batch.metadata == {"faq": {"owner": "finance"}}
    assert "title:" not in batch.documents[0].text


@pytest.mark.slow
def test_cli_ingest_mixed_folder_reports_the_bad_file_and_cites_pages(tmp_path: Path) -> None:
    root = make_mixed_folder(tmp_path / "mixed")
    kb = tmp_path / "kb"
    env = {**os.environ, "COLUMNS": "400"}

    def trishield(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trishield.cli", *args],
                              capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=300, check=False)

    human = trishield("ingest", str(root), "--kb", str(kb), "--no-guard")
    assert human.returncode == 0, human.stderr
    assert "ingested 6 new document(s)" in human.stdout
    assert f"not ingested (unsupported file type): {root / 'photo.jpg'}" in human.stdout
    assert f"not ingested (cannot be read): {root / 'broken.pdf'}: cannot read this PDF" \
        in human.stderr
    assert "Traceback" not in human.stderr

    again = trishield("ingest", str(root), "--kb", str(kb), "--no-guard", "--json")
    assert again.returncode == 0, again.stderr
    payload = json.loads(again.stdout)
    assert payload["documents_duplicate"] == 6
    assert payload["skipped_files"] == [{"path": str(root / "photo.jpg"),
                                         "reason": "unsupported file type"}]
    assert [f["path"] for f in payload["failed_files"]] == [str(root / "broken.pdf")]

    found = trishield("search", "Where is the Northwind depot?", "--kb", str(kb), "--json",
                      "-k", "1")
    assert found.returncode == 0, found.stderr
    (top,) = json.loads(found.stdout)["results"]
    assert (top["doc_id"], top["title"]) == ("manual:p3", "Manual (page 3)")


@pytest.mark.slow
def test_a_question_answered_from_each_file_cites_that_file(tmp_path: Path) -> None:
    """Issue 18's folder: a PDF, an HTML page, a DOCX, an .rst and Markdown with front matter
    ingest (with the progress bar forced on, and past a corrupt PDF); a question whose answer
    only one file holds is answered by the full defense citing that file (the PDF's page)."""
    root = make_mixed_folder(tmp_path / "mixed")
    kb = tmp_path / "kb"

    def trishield(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trishield.cli", *args],
                              capture_output=True, text=True, cwd=tmp_path, timeout=600,
                              check=False)

    ingested = trishield("ingest", str(root), "--kb", str(kb), "--progress")
    assert ingested.returncode == 0, ingested.stderr
    assert "broken.pdf" in ingested.stderr and "Traceback" not in ingested.stderr
    asked = {"Where is the Northwind depot?": "manual:p3",
             "When do parcels leave the depot?": "shipping",
             "When are refunds paid?": "policy",
             "What do you run to build everything?": "install",
             "When are invoices sent?": "faq"}
    import trishield as library

    with library.open_kb(kb) as opened:  # one process asks all five: models load once
        shield = library.defend(opened, "full", panel=library.build_panel(["extractive"]))
        for question, doc_id in asked.items():
            answer = shield.ask(question)
            assert not answer.refused and answer.citations == [doc_id], (question, answer)
