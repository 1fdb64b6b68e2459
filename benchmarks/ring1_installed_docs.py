"""Ring 1 at ingest on software documentation installed on this machine that no calibration
used: the share of each source it would block, and why.

The calibration's software-docs genre is CMake's reference and npm's command docs
(``trishield.eval.genres``). This reads other documentation that ships with the tools of a
development machine, whatever of it is installed (a missing source is skipped and said so):
the AWS CLI's examples, the Google Cloud SDK's docs, Debian packages' docs under
``/usr/share/doc``, the Node packages' and the Python packages' own READMEs and docs, a JDK's
and a Rust toolchain's; and as HTML and plain text, the Rust book, reference and Cargo book,
the Node.js API reference, git's documentation and Vim's help. Each file is read by the
loader ``trishield ingest`` uses and judged as a whole document, text signals only
(``S_out`` needs the KB's other writers; a real ingest gives it, see docs/benchmarks.md).

For ``encoded_payload`` it also prints what the rule before ``patterns.reads_as_words`` would
have done: every blob that decodes to readable characters was a payload then, and a payload
alone blocks (``w_pat * 0.7 >= theta``), so a file it blocked then is one the current rule
blocks or one with a decoded blob that reads as no words.

With ``--ingest N``, the whole ring as ``trishield ingest`` runs it: up to N files of each
source (a seeded sample) are ingested into a new KB in a temporary directory, each source as
its own neutral writer, in the order listed, so every source after the first is screened
with ``S_out`` against the writers before it (once they store 20 documents).

Prints a table and every blocked file with its reasons; writes nothing that outlives the run.
A few minutes on two cores, plus about a minute of embedding per 100 files ingested.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ring1_installed_docs.py [--ingest 40] \
        [--held-out | --source NAME=GLOB ...]
"""

from __future__ import annotations

import argparse
import glob
import random
import tempfile
from collections import Counter
from pathlib import Path

from trishield.config import enforce_offline

RUST_DOCS = "/root/.rustup/toolchains/stable-*/share/doc/rust/html"
SOURCES = {
    "aws-cli examples (rST)": "/root/.pyenv/versions/*/lib/python3*/site-packages/awscli/"
                              "examples/**/*.rst",
    "google-cloud-sdk (md, rST)": "/usr/lib/google-cloud-sdk/**/*.[mr][ds]*",
    "debian /usr/share/doc (md, rST)": "/usr/share/doc/**/*.[mr][ds]*",
    "node packages (md)": "/usr/lib/node_modules/**/*.md",
    "python packages (md, rST)": "/root/.pyenv/versions/*/lib/python3*/site-packages/**/"
                                 "*.[mr][ds]*",
    "jdk (md)": "/usr/lib/jvm/**/*.md",
    "rust toolchain (md)": "/root/.rustup/toolchains/**/*.md",
    "rust book (HTML)": f"{RUST_DOCS}/book/**/*.html",
    "rust reference (HTML)": f"{RUST_DOCS}/reference/**/*.html",
    "cargo book (HTML)": f"{RUST_DOCS}/cargo/**/*.html",
    "node.js API (HTML)": "/usr/share/doc/nodejs/api/*.html",
    "git docs (text)": "/usr/share/doc/git/**/*.txt",
    "vim help (text)": "/usr/share/vim/vim*/doc/*.txt",
}
"""Where a Debian development machine with these tools keeps their documentation (globs;
Markdown, reStructuredText, HTML and plain text; a file belongs to the first source that
matches it). Replace them with ``--source NAME=GLOB``."""
HELD_OUT_SOURCES = {
    "rust by example (HTML)": f"{RUST_DOCS}/rust-by-example/**/*.html",
    "nomicon (HTML)": f"{RUST_DOCS}/nomicon/**/*.html",
    "rustc book (HTML)": f"{RUST_DOCS}/rustc/**/*.html",
    "edition guide (HTML)": f"{RUST_DOCS}/edition-guide/**/*.html",
    "embedded book (HTML)": f"{RUST_DOCS}/embedded-book/**/*.html",
    "valgrind (HTML)": "/usr/share/doc/valgrind/**/*.html",
    "debian policy (HTML)": "/usr/share/doc/debian-policy/**/*.html",
    "libxslt (HTML)": "/usr/share/doc/libxslt1-dev/**/*.html",
    "gcloud platform (HTML)": "/usr/lib/google-cloud-sdk/platform/**/*.html",
}
"""``--held-out``: sources looked at only after the detector changes that :data:`SOURCES`
led to (docs/benchmarks.md, "Ring 1 at ingest")."""
SUFFIXES = (".md", ".rst", ".html", ".txt")
MIN_BYTES = 1024
"""Smaller files are mostly stubs and licence pointers: not what a KB is built from."""
MAX_BYTES = 200 * 1024


def files_of(pattern: str) -> list[Path]:
    found = sorted({Path(p) for p in glob.glob(pattern, recursive=True)})
    return [p for p in found if p.is_file() and p.suffix in SUFFIXES
            and MIN_BYTES <= p.stat().st_size <= MAX_BYTES]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", action="append", default=None, metavar="NAME=GLOB",
                        help="a source of documents instead of the default ones")
    parser.add_argument("--held-out", action="store_true",
                        help="the sources looked at only after the changes (HELD_OUT_SOURCES)")
    parser.add_argument("--ingest", type=int, default=0, metavar="N",
                        help="also ingest up to N files of each source, each its own writer")
    arguments = parser.parse_args()
    if arguments.ingest < 0:
        parser.error("--ingest must not be negative")
    sources = dict(HELD_OUT_SOURCES if arguments.held_out else SOURCES)
    if arguments.source:
        sources = {}
        for item in arguments.source:
            name, separator, pattern = item.partition("=")
            if not separator or not name or not pattern:
                parser.error(f"--source must be NAME=GLOB, got {item!r}")
            sources[name] = pattern
    enforce_offline()

    from trishield.errors import InputError
    from trishield.kb.loaders import load_file
    from trishield.rings.ingest_guard import IngestGuard
    from trishield.rings.patterns import decoded_blobs, reads_as_words

    guard = IngestGuard()
    print(f"theta={guard.config.theta}; text signals only (no S_out)")
    print(f"{'source':<34}{'files':>7}{'blocked':>9}{'rate':>9}{'flagged':>9}"
          f"{'payload before':>16}{'payload now':>13}")
    blocked_files: list[tuple[str, str, list[str]]] = []
    totals = Counter()
    claimed: set[Path] = set()
    readable: dict[str, list[tuple[Path, str]]] = {}
    for name, pattern in sources.items():
        paths = [path for path in files_of(pattern) if path not in claimed]
        claimed.update(paths)
        readable[name] = []
        if not paths:
            print(f"{name:<34}  not installed here ({pattern})")
            continue
        row = Counter()
        for path in paths:
            try:
                text = "\n\n".join(d.text for d in load_file(path, doc_id="installed-doc"))
            except InputError as error:  # binary control characters, not UTF-8, ...
                row["unreadable"] += 1
                print(f"  skipped {path}: {error}")
                continue
            readable[name].append((path, text))
            verdict = guard.judge(path.name, text, s_out=None)
            blobs = decoded_blobs(text)
            payload_now = any(reads_as_words(blob) for blob in blobs)
            row["files"] += 1
            row["blocked"] += verdict.blocked
            row["flagged"] += verdict.flagged
            row["payload before"] += bool(blobs)
            row["payload now"] += payload_now
            row["blocked before"] += verdict.blocked or (bool(blobs) and not payload_now)
            if verdict.blocked:
                blocked_files.append((name, str(path), verdict.reasons))
        totals.update(row)
        print(f"{name:<34}{row['files']:>7}{row['blocked']:>9}"
              f"{row['blocked'] / max(1, row['files']):>9.4f}{row['flagged']:>9}"
              f"{row['payload before']:>16}{row['payload now']:>13}")
    print(f"{'all':<34}{totals['files']:>7}{totals['blocked']:>9}"
          f"{totals['blocked'] / max(1, totals['files']):>9.4f}{totals['flagged']:>9}"
          f"{totals['payload before']:>16}{totals['payload now']:>13}")
    print(f"blocked with the payload rule before reads_as_words: {totals['blocked before']} "
          f"({totals['blocked before'] / max(1, totals['files']):.4f})")
    for name, path, reasons in blocked_files:
        print(f"\n[{name}] {path}")
        for reason in reasons:
            print(f"    {reason}")
    if arguments.ingest:
        ingest_each(readable, arguments.ingest)


def ingest_each(readable: dict[str, list[tuple[Path, str]]], per_source: int) -> None:
    """Up to ``per_source`` files of each source into one new KB, each source its own
    writer; what Ring 1 quarantined, and why."""
    import trishield
    from trishield.kb import Document

    print(f"\nIngested, the whole ring (S_out against earlier writers), up to {per_source} "
          "files a source, seed 0")
    print(f"{'writer':<34}{'files':>7}{'stored':>8}{'duplicate':>11}{'quarantined':>13}")
    held: list[tuple[str, dict]] = []
    paths: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as directory, \
            trishield.open_kb(Path(directory) / "kb", create=True) as kb:
        for number, (name, files) in enumerate(readable.items()):
            if not files:
                continue
            chosen = sorted(random.Random(0).sample(files, min(per_source, len(files))))
            documents = [Document(id=f"s{number}/{index}", text=text, title=path.name,
                                  source=str(path))
                         for index, (path, text) in enumerate(chosen)]
            paths.update((document.id, document.source) for document in documents)
            report = kb.ingest(documents, writer=f"source-{number}", tier="neutral")
            held += [(name, entry) for entry in report.quarantined]
            print(f"{name:<34}{len(documents):>7}{len(report.added):>8}"
                  f"{len(report.duplicates):>11}{len(report.quarantined):>13}", flush=True)
    for name, entry in held:
        print(f"\n[{name}] {entry.get('id')} {paths.get(entry.get('id', ''), '')}")
        for reason in entry.get("reasons", []):
            print(f"    {reason}")


if __name__ == "__main__":
    main()
