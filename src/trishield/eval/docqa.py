"""A documentation QA set of our own, and the corpus of real documents it was written from.

Wikipedia-style QA says little about how TriShield answers from a user's documentation folder:
man pages, reference manuals, HTML API pages, PDFs, policy texts. This module pairs a fixed set
of hand-written questions (``data/docqa.jsonl``) with a builder that gathers the documents they
were written from, plus distractors of the same families, into a folder the way a user would keep
them, from files a fresh Debian 12 machine installs from its packages (each manifest entry names
its package, so a missing file says what to install).

The questions were written by reading the documents, never from any system's output. Each has
1-3 short accepted answers (an option, an identifier, a value) that the source states inside one
~120-word passage, quoted as ``evidence``. :func:`is_correct` scores an answer by containment
after normalisation; ``match: token`` needs the accepted string as a whole token, so ``-p`` does
not match ``-pwd``; ``match: option`` is a token match that keeps case, because command-line
options differ by case alone (``ssh -N`` forwards only, ``ssh -n`` redirects stdin).

Build the corpus with ``python -m trishield.eval.docqa --build DIR``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from trishield.errors import InputError

DATA_DIR = Path(__file__).parent / "data"
QUESTIONS_FILE = DATA_DIR / "docqa.jsonl"
MANIFEST_FILE = DATA_DIR / "docqa_manifest.json"

GENRES = ("man", "cmake", "npm", "html", "pdf", "policy", "readme", "metadata")
SPLITS = ("dev", "test")
MATCHES = ("token", "option", "contains")
SPLIT_SEED = 48
"""Seed of the per-genre shuffle that assigns splits (issue 48)."""
MAX_EVIDENCE = 200
MAX_QUESTIONS_BYTES = 2_000_000
MAX_SOURCE_BYTES = 16_000_000
"""No manifest source comes near this; a bigger file means the machine holds something else."""

# Where each source family lands inside the corpus folder (first matching prefix wins).
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("/usr/share/man/", "man/"),
    ("/usr/share/cmake-3.25/Help/", "cmake/"),
    ("/usr/lib/node_modules/npm/docs/content/", "npm/"),
    ("/usr/share/developers-reference/", "doc/developers-reference/"),
    ("/usr/share/doc/", "doc/"),
)
# man renders the same bytes for the same groff on every machine only with these fixed.
_MAN_ENV = {"LC_ALL": "C.UTF-8", "MANWIDTH": "80", "MANPAGER": "cat", "PAGER": "cat"}
_TOKEN_CHARS = r"[\w-]"
_STRIP = " \t\n\"'`.,;:!?()[]{}<>\u201c\u201d\u2018\u2019"  # with typographic quotes


@dataclass(frozen=True)
class DocQuestion:
    """One question: what a user asks, the accepted short answers, and where the answer is."""

    id: str
    split: str
    genre: str
    question: str
    answers: tuple[str, ...]
    match: str
    source: str
    evidence: str


@dataclass(frozen=True)
class ManifestEntry:
    """One source file, the Debian package that installs it, and its place in the corpus."""

    source: str
    package: str

    @property
    def dest(self) -> str:
        """The corpus-relative path: man pages become ``.txt``, gzipped docs are unpacked."""
        for prefix, target in _PREFIXES:
            if self.source.startswith(prefix):
                rel = target + self.source[len(prefix) :]
                break
        else:
            raise InputError(f"docqa manifest: {self.source} is under no known source folder")
        if rel.endswith(".gz"):
            rel = rel[:-3]
        return rel + ".txt" if rel.startswith("man/") else rel


# --------------------------------------------------------------------------- manifest, corpus


def load_manifest(path: Path = MANIFEST_FILE) -> list[ManifestEntry]:
    """Read the fixed manifest (``{"package": [absolute paths]}``), checking every entry."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"docqa manifest unreadable: {exc}", path=str(path)) from exc
    if not isinstance(raw, dict) or not raw:
        raise InputError("docqa manifest must map packages to lists of paths", path=str(path))
    entries: list[ManifestEntry] = []
    for package, sources in raw.items():
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            raise InputError(f"docqa manifest: {package!r} must list paths", path=str(path))
        odd = [s for s in sources if not s.startswith("/") or ".." in s.split("/")]
        if odd:
            raise InputError(f"docqa manifest: not absolute clean paths: {odd}", path=str(path))
        entries.extend(ManifestEntry(source=s, package=package) for s in sources)
    dests = [e.dest for e in entries]
    if len(set(dests)) != len(dests):
        raise InputError("docqa manifest: two sources land on the same corpus path", path=str(path))
    return entries


def render_man(path: Path) -> bytes:
    """Render a man page to plain text as ``MANWIDTH=80 man --nh --nj -l FILE | col -bx`` saves it.

    No hyphenation and no justification: words stay whole, so the text reads (and tokenises)
    the same whatever the line breaks."""
    env = {**os.environ, **_MAN_ENV}
    env.pop("MAN_KEEP_FORMATTING", None)
    try:
        man = subprocess.run(["man", "--nh", "--nj", "-l", str(path)], env=env,
                             capture_output=True, check=True, timeout=120)
        col = subprocess.run(
            ["col", "-bx"], input=man.stdout, env=env, capture_output=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        needs = "man-db, groff-base and bsdextrautils"
        raise InputError(f"cannot render man page {path} (needs {needs}): {exc}") from exc
    if not col.stdout.strip():
        raise InputError(f"man page {path} rendered to nothing")
    return col.stdout


def _file_bytes(entry: ManifestEntry) -> bytes:
    """The bytes a user's folder holds for this entry: rendered, unpacked or copied as is."""
    source = Path(entry.source)
    if entry.dest.startswith("man/"):
        return render_man(source)
    data = source.read_bytes()
    return gzip.decompress(data) if source.suffix == ".gz" else data


def answer_sources(questions: Iterable[DocQuestion]) -> set[str]:
    """Corpus paths some question's answer is in: these must exist for a build to succeed."""
    return {q.source for q in questions}


@dataclass(frozen=True)
class CorpusReport:
    """What a build wrote (``corpus.json`` holds the same) and which distractors it skipped."""

    files: list[dict[str, str | int]]
    missing: list[ManifestEntry]

    @property
    def total_bytes(self) -> int:
        return sum(int(f["bytes"]) for f in self.files)


def build_corpus(out_dir: Path, manifest: list[ManifestEntry] | None = None) -> CorpusReport:
    """Gather the corpus into ``out_dir`` (new or empty) and write ``corpus.json`` there.

    A missing distractor is reported and skipped (a machine may lack one package); a missing
    answer-bearing source fails the build naming its package, before anything is written. The
    folder is filled in a sibling temporary directory and moved into place, so a failed build
    leaves no partial corpus.
    """
    entries = manifest if manifest is not None else load_manifest()
    needed = answer_sources(load_questions())
    unlisted = sorted(needed - {e.dest for e in entries})
    if unlisted:
        raise InputError(f"docqa: answer sources missing from the manifest: {', '.join(unlisted)}")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InputError(f"docqa: {out_dir} exists and is not an empty folder")
    missing = [e for e in entries if not Path(e.source).is_file()]
    fatal = [e for e in missing if e.dest in needed]
    if fatal:
        lines = [f"  {e.source} (Debian package {e.package})" for e in fatal]
        raise InputError("docqa: answer-bearing sources are missing; install:\n" + "\n".join(lines))
    too_big = [e.source for e in entries if e not in missing
               and Path(e.source).stat().st_size > MAX_SOURCE_BYTES]
    if too_big:
        raise InputError(f"docqa: sources over {MAX_SOURCE_BYTES} bytes: {', '.join(too_big)}")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".docqa-", dir=out_dir.parent))
    try:
        files: list[dict[str, str | int]] = []
        for entry in entries:
            if entry in missing:
                continue
            data = _file_bytes(entry)
            target = tmp / entry.dest
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            files.append({"path": entry.dest, "source": entry.source, "package": entry.package,
                          "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        report = CorpusReport(files=files, missing=missing)
        summary = {
            "files": files,
            "file_count": len(files),
            "total_bytes": report.total_bytes,
            "missing": [{"source": e.source, "package": e.package} for e in missing],
            "man_rendering": "MANWIDTH=80 LC_ALL=C.UTF-8 man --nh --nj -l FILE | col -bx",
        }
        (tmp / "corpus.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        if out_dir.exists():
            out_dir.rmdir()
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


def document_text(path: Path) -> str:
    """The plain text of a corpus file, whitespace collapsed, for checking evidence quotes.

    Independent of TriShield's own loaders, so the set checks itself without the system under
    test: HTML through BeautifulSoup, PDF through pypdf, everything else as UTF-8.
    """
    if path.suffix == ".html":
        import warnings

        from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

        with warnings.catch_warnings():  # some manuals are XHTML; lxml's HTML parser reads them
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            text = BeautifulSoup(path.read_bytes(), "lxml").get_text(" ")
    elif path.suffix == ".pdf":
        from pypdf import PdfReader

        text = " ".join(page.extract_text() or "" for page in PdfReader(str(path)).pages)
    else:
        text = path.read_text(encoding="utf-8", errors="replace")
    return " ".join(text.split())


def quote_in(quote: str, text: str) -> bool:
    """Whether ``quote`` occurs in ``text`` with all whitespace removed from both.

    Removing whitespace (not only collapsing it) is what makes one check fit every format:
    HTML text extraction puts spaces around inline markup, and man pages wrap lines.
    """
    return "".join(quote.split()) in "".join(text.split())


# --------------------------------------------------------------------------- questions


def _field(obj: dict[str, object], name: str, where: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: field {name!r} must be a non-empty string")
    return value


def _parse_line(obj: object, where: str) -> DocQuestion:
    """Check one JSON object field by field; the error names the line and the field."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: not a JSON object")
    extra = set(obj) - {f for f in DocQuestion.__dataclass_fields__}
    if extra:
        raise InputError(f"{where}: unknown fields {sorted(extra)}")
    qid = _field(obj, "id", where)
    if not re.fullmatch(r"docqa-\d{3}", qid):
        raise InputError(f"{where}: id {qid!r} is not docqa-NNN")
    for name, allowed in (("split", SPLITS), ("genre", GENRES), ("match", MATCHES)):
        if _field(obj, name, where) not in allowed:
            raise InputError(f"{where}: {name} must be one of {allowed}")
    answers = obj.get("answers")
    if (not isinstance(answers, list) or not 1 <= len(answers) <= 3
            or not all(isinstance(a, str) and normalise(a) for a in answers)):
        raise InputError(f"{where}: answers must be 1-3 non-empty strings")
    evidence = _field(obj, "evidence", where)
    if len(evidence) > MAX_EVIDENCE:
        raise InputError(f"{where}: evidence is longer than {MAX_EVIDENCE} characters")
    source = _field(obj, "source", where)
    if source.startswith("/") or ".." in source.split("/"):
        raise InputError(f"{where}: source must be a corpus-relative path")
    return DocQuestion(id=qid, split=str(obj["split"]), genre=str(obj["genre"]),
                       question=_field(obj, "question", where), answers=tuple(answers),
                       match=str(obj["match"]), source=source, evidence=evidence)


def load_questions(split: str | None = None, path: Path = QUESTIONS_FILE) -> list[DocQuestion]:
    """Load and validate the set; ``split`` keeps one half ("dev" or "test")."""
    if split is not None and split not in SPLITS:
        raise InputError(f"docqa: split must be one of {SPLITS}, not {split!r}")
    try:
        if path.stat().st_size > MAX_QUESTIONS_BYTES:
            raise InputError("docqa question file is too large", path=str(path))
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"docqa question file unreadable: {exc}", path=str(path)) from exc
    questions: list[DocQuestion] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path.name} line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: invalid JSON ({exc.msg})") from exc
        question = _parse_line(obj, where)
        if question.id in seen:
            raise InputError(f"{where}: duplicate id {question.id}")
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise InputError("docqa question file holds no questions", path=str(path))
    return [q for q in questions if split is None or q.split == split]


def assign_splits(questions: Iterable[DocQuestion], seed: int = SPLIT_SEED) -> dict[str, str]:
    """The split each id belongs to: per genre, ids sorted, shuffled by a seeded RNG, the first
    half (rounded up) dev. Written into the file's ``split`` field; the tests check they agree."""
    by_genre: dict[str, list[str]] = {}
    for q in questions:
        by_genre.setdefault(q.genre, []).append(q.id)
    splits: dict[str, str] = {}
    for genre, ids in sorted(by_genre.items()):
        ids = sorted(ids)
        random.Random(f"{seed}:{genre}").shuffle(ids)
        half = (len(ids) + 1) // 2
        splits.update({qid: ("dev" if i < half else "test") for i, qid in enumerate(ids)})
    return splits


# --------------------------------------------------------------------------- scoring


def normalise(text: str, fold_case: bool = True) -> str:
    """Case-folded (unless ``fold_case`` is false), whitespace collapsed, surrounding
    quotes/backticks/punctuation stripped."""
    text = text.lower() if fold_case else text
    return " ".join(text.split()).strip(_STRIP)


def is_correct(answer: str, question: DocQuestion) -> bool:
    """Whether ``answer`` contains one of the accepted answers.

    ``token`` needs the accepted string bounded by anything but a word character, ``-`` or
    ``_`` on both sides, so options and identifiers do not match longer neighbours; ``option``
    is the same with case kept (``-S`` is not ``-s``).
    """
    fold = question.match != "option"
    text = normalise(answer, fold)
    for accepted in question.answers:
        want = normalise(accepted, fold)
        if not want:
            continue
        if question.match == "contains":
            if want in text:
                return True
        elif re.search(rf"(?<!{_TOKEN_CHARS}){re.escape(want)}(?!{_TOKEN_CHARS})", text):
            return True
    return False


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """``--build DIR`` gathers the corpus; ``--check`` validates the question file."""
    parser = argparse.ArgumentParser(prog="python -m trishield.eval.docqa", description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--build", type=Path, metavar="DIR", help="gather the corpus into DIR")
    group.add_argument("--check", action="store_true", help="validate the question file")
    args = parser.parse_args(argv)
    try:
        if args.check:
            questions = load_questions()
            print(f"docqa: {len(questions)} questions valid")
            return 0
        report = build_corpus(args.build)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for entry in report.missing:
        print(f"missing distractor {entry.source} (Debian package {entry.package})",
              file=sys.stderr)
    print(f"docqa corpus: {len(report.files)} files, {report.total_bytes} bytes in {args.build}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
