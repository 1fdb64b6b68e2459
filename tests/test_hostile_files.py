"""Hostile files through the real ``trishield ingest`` (issue 49): links out of the folder,
pipes, and files built to exhaust a parser's time or memory are reported (skipped or failed,
with the reason and the option that raises the limit) while the ordinary files beside them
are stored. The files are written by ``tests/hostile_files.py``; the real-size bombs are in
``test_real_size_bombs_are_reported_quickly`` and the benchmark.

Runs that could hang on a reader without bounds go through a subprocess with a timeout, so
a regression fails instead of stalling the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import docx
import pytest
from click.testing import CliRunner

import hostile_files as hostile
from trishield.cli import cli

ORDINARY = {"returns.md": "---\ntitle: Returns\n---\nItems may be returned within 30 days.\n",
            "shipping.html": "<html><body><h1>Shipping</h1><p>Parcels leave on Tuesdays."
                             "</p></body></html>"}


def ordinary_files(folder: Path) -> list[str]:
    """Ordinary files of each kind next to the hostile ones; returns their ids."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in ORDINARY.items():
        (folder / name).write_text(text, encoding="utf-8")
    document = docx.Document()
    document.add_paragraph("Refunds are paid within 14 days of receipt.")
    document.save(folder / "refunds.docx")
    hostile.many_pages(folder / "manual.pdf", 2)
    return ["manual:p1", "manual:p2", "refunds", "returns", "shipping"]


def ingest_subprocess(folder: Path, kb: Path, *options: str,
                      timeout: float = 240) -> tuple[dict, float]:
    """``trishield ingest FOLDER --json`` in its own process; the parsed summary and the
    run's wall time. A run past ``timeout`` fails the test (the bound is the point)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "trishield.cli", "ingest", str(folder),
                           "--kb", str(kb), "--no-guard", "--json", *options],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout), time.monotonic() - started


def ingest(folder: Path, kb: Path, *options: str) -> dict:
    result = CliRunner().invoke(cli, ["ingest", str(folder), "--kb", str(kb), "--no-guard",
                                      "--json", *options], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def failures(summary: dict) -> dict[str, str]:
    return {Path(item["path"]).name: item["error"] for item in summary["failed_files"]}


def skips(summary: dict) -> dict[str, str]:
    return {Path(item["path"]).name: item["reason"] for item in summary["skipped_files"]}


def test_links_out_of_the_folder_pipes_and_dangling_links_are_skipped_with_reasons(
        tmp_path: Path) -> None:
    """Issue 49 #3 and #9: /etc/passwd, /proc and /dev through links are never read; a pipe
    is never opened (the run would block); a link inside the folder is read once."""
    folder = tmp_path / "docs"
    ids = ordinary_files(folder)
    hostile.host_links(folder)
    hostile.odd_entries(folder)
    (folder / ".hidden").mkdir()
    (folder / ".hidden" / "notes.md").write_text("Hidden notes on the depot.\n")
    (folder / "notes.md").symlink_to(folder / ".hidden" / "notes.md")  # read once, here
    (folder / "again.md").symlink_to(folder / "returns.md")  # read under its own name
    summary, _ = ingest_subprocess(folder, tmp_path / "kb", timeout=180)
    assert summary["added"] == sorted([*ids, "notes"])
    skipped = skips(summary)
    for name, target in (("passwd.txt", "/etc/passwd"), ("status.txt", "/proc/self/status"),
                         ("mounts.md", "/proc/self/mountinfo"), ("null.txt", "/dev/null"),
                         ("etc", "/etc")):
        assert skipped.pop(name) == (f"link to {target}, outside the ingested folder; links "
                                     "are not followed out of it")
    assert skipped.pop("pipe.txt") == "a named pipe (FIFO), not a regular file; never opened"
    assert skipped.pop("socket.md") == "a socket, not a regular file; never opened"
    assert skipped.pop("gone.md").startswith("dangling link (to ")
    assert skipped.pop("loop-a.md").startswith("link cannot be followed")
    assert skipped.pop("loop-b.md").startswith("link cannot be followed")
    assert skipped.pop("again.md") == (f"link to {(folder / 'returns.md').resolve()}, which "
                                       "is read under its own name")
    assert skipped == {}
    listed = CliRunner().invoke(cli, ["documents", "list", "--kb", str(tmp_path / "kb"),
                                      "--json"])
    assert sorted(row["id"] for row in json.loads(listed.stdout)) == sorted([*ids, "notes"])


def test_a_pipe_named_on_the_command_line_is_refused_without_blocking(tmp_path: Path) -> None:
    pipe = tmp_path / "feed.txt"
    os.mkfifo(pipe)
    done = subprocess.run([sys.executable, "-m", "trishield.cli", "ingest", str(pipe), "--kb",
                           str(tmp_path / "kb"), "--no-guard"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"{pipe}: a named pipe (FIFO), not a regular file; not read" in done.stderr
    assert not (tmp_path / "kb").exists()


def test_real_size_bombs_are_reported_quickly(tmp_path: Path) -> None:
    """Issue 49 #4 and #5 at the issue's sizes, with the default limits: a DOCX of 100 MB of
    XML, 20,000 nested divs, a 1 KB PDF tree of 65,536 pages, a 1.4 KB one of 1,024 and a
    front matter of 60 KB that aliases expand to 200 MB. Each is refused by its own check
    (no time limit reached), so the whole run is quick."""
    folder = tmp_path / "docs"
    ids = ordinary_files(folder)
    hostile.docx_bomb(folder / "bomb.docx", 100_000_000)
    hostile.nested_divs(folder / "nested.html", 20_000)
    hostile.shared_page_tree(folder / "claims.pdf", 4, 16)
    hostile.shared_page_tree(folder / "shared.pdf", 10, 2)
    hostile.looping_page_tree(folder / "loop.pdf")
    hostile.yaml_alias_bomb(folder / "aliases.md", 20_000, 10_000)
    summary, seconds = ingest_subprocess(folder, tmp_path / "kb", timeout=180)
    assert summary["added"] == ids
    failed = failures(summary)
    assert "unpacks to 96.2 MiB (word/document.xml alone is 95.4 MiB), over the 64.0 MiB " \
           "limit" in failed.pop("bomb.docx")
    assert "nests elements more than 256 deep, the limit; raise it (--max-depth)" in \
        failed.pop("nested.html")
    for name in ("claims.pdf", "shared.pdf"):
        assert "the PDF's page tree reaches object 5 more than once" in failed.pop(name)
    assert "the PDF's page tree reaches object 3 more than once" in failed.pop("loop.pdf")
    assert "front matter expands (through YAML aliases) to over 64.0 KiB, the limit; raise " \
           "it (--max-front-matter)" in failed.pop("aliases.md")
    assert failed == {}
    assert seconds < 120  # model load and embedding included; reading the bombs is ~1 s


def test_each_limit_is_configurable_and_named_in_the_report(tmp_path: Path) -> None:
    """Small variants of each mechanism under low limits set on the command line."""
    folder = tmp_path / "docs"
    ids = ordinary_files(folder)
    hostile.docx_bomb(folder / "bomb.docx", 3_000_000)
    hostile.nested_divs(folder / "nested.html", 40)
    hostile.many_pages(folder / "long.pdf", 30)
    hostile.yaml_alias_bomb(folder / "aliases.md", 100, 30)
    (folder / "big-front.md").write_text("---\ntitle: " + "t" * 3000 + "\n---\nBody.\n")
    summary = ingest(folder, tmp_path / "kb", "--max-expanded-size", "2MB", "--max-depth",
                     "20", "--max-pages", "10", "--max-front-matter", "2KiB")
    assert summary["added"] == ids
    failed = failures(summary)
    assert "over the 1.9 MiB limit on what one file expands to; raise it " \
           "(--max-expanded-size)" in failed.pop("bomb.docx")
    assert "more than 20 deep" in failed.pop("nested.html")
    assert "the PDF has more than 10 pages, the limit per file; raise it (--max-pages)" in \
        failed.pop("long.pdf")
    assert "front matter expands (through YAML aliases) to over 2.0 KiB" in \
        failed.pop("aliases.md")
    assert "front matter is over 2.0 KiB" in failed.pop("big-front.md")
    assert failed == {}
    raised = ingest(folder, tmp_path / "kb2", "--max-depth", "none", "--max-pages", "40",
                    "--max-front-matter", "64KiB")
    assert {"nested", "long:p30", "aliases", "big-front"} <= set(raised["added"])
    bad = CliRunner().invoke(cli, ["ingest", str(folder), "--kb", str(tmp_path / "kb3"),
                                   "--max-pages", "0"])
    assert bad.exit_code != 0 and "--max-pages: '0' is not a positive whole number" in \
        str(bad.exception)


def test_a_parser_past_its_time_or_memory_is_stopped_and_the_next_file_is_read(
        tmp_path: Path) -> None:
    """The bounds that hold whatever a parser does: a page that keeps the parser busy past
    --parse-time is killed, one that needs more than --parse-memory fails in its process,
    and in both cases the files after it are read by a fresh process."""
    folder = tmp_path / "docs"
    ids = ordinary_files(folder)
    hostile.flat_html(folder / "a-slow.html", 6_000_000)  # about 5 s to read
    summary = ingest(folder, tmp_path / "kb", "--parse-time", "1")
    assert summary["added"] == ids
    assert "reading it took longer than 1 s, the limit per file; raise it (--parse-time)" \
        in failures(summary)["a-slow.html"]
    (folder / "a-slow.html").unlink()
    hostile.element_flood(folder / "a-flood.html", 150_000)  # about 200 MB as a tree
    summary = ingest(folder, tmp_path / "kb2", "--parse-memory", "120MiB", "--parse-time",
                     "60")
    assert summary["added"] == ids
    assert "reading it needs more than 120.0 MiB of memory, the limit of the parser process; " \
           "raise it (--parse-memory)" in failures(summary)["a-flood.html"]


def test_form_feeds_are_whitespace_and_a_doctype_subset_is_not_text(tmp_path: Path) -> None:
    """Issue 49 #9: a form feed or vertical tab no longer refuses a text file; a DOCTYPE
    internal subset no longer leaves ``]>`` in an HTML page's text."""
    folder = tmp_path / "docs"
    folder.mkdir()
    hostile.form_feeds(folder / "invoices.txt")
    hostile.doctype_subset(folder / "depot.html")
    (folder / "open.html").write_text("<!DOCTYPE html [ <!ENTITY x 'y'>\n<p>never closed</p>")
    summary = ingest(folder, tmp_path / "kb")
    assert summary["added"] == ["depot", "invoices"]
    assert "internal subset ('[') that never ends" in failures(summary)["open.html"]
    shown = {}
    for doc_id in ("depot", "invoices"):
        result = CliRunner().invoke(cli, ["documents", "show", doc_id, "--kb",
                                          str(tmp_path / "kb"), "--json"])
        shown[doc_id] = json.loads(result.stdout)
    assert shown["depot"]["text"] == "The depot opens at eight."
    assert shown["depot"]["title"] == "Depot hours"
    assert shown["invoices"]["text"] == ("Invoices are sent on the first day of the month.\n\n"
                                         "\nPayment is due within thirty days.\nLate payments "
                                         "pay a fee.\n")


@pytest.mark.parametrize("shape", ["nested-8000", "flat-1MB"])
def test_html_reading_time_grows_linearly(tmp_path: Path, shape: str) -> None:
    """Nested and flat pages read in time linear in their size (the tree is walked once,
    never edited): 8,000 nested levels (depth limit lifted) or 1 MB of paragraphs in about
    a second, where editing the tree took 35 s and more than a minute."""
    from trishield.kb import ReadLimits, load_path

    if shape == "nested-8000":
        page, words = hostile.nested_divs(tmp_path / "page.html", 8000), 8000
    else:
        page = hostile.flat_html(tmp_path / "page.html", 1_000_000)
        words = 8 * page.read_text().count("<p>")
    started = time.monotonic()
    (document,) = load_path(page, limits=ReadLimits(max_depth=None)).documents
    assert len(document.text.split()) == words
    assert time.monotonic() - started < 10
