"""A clean calibration corpus across genres, from sources a machine has installed.

Ring 1 was first calibrated on Wikipedia passages only, and its detectors then fired on
software documentation. This module gathers clean text of five genres, each from public sources
that install offline from the ordinary package registries (nothing is committed to the
project), and turns it into passages the way the KB does:

============== =========================================================================
genre          sources (how to obtain them)
============== =========================================================================
wiki           HotpotQA, MuSiQue and 2WikiMultihopQA passage corpora, from the data
               directory (``trishield datasets``; SQuAD dev is left out: it is part of
               wiki5k, which the calibration reports separately)
software-docs  CMake's reference documentation (``/usr/share/cmake-*/Help/**/*.rst``,
               Debian package ``cmake-data``, installed with ``cmake``); npm's own
               command and configuration docs (``<npm root -g>/npm/docs/content/**/*.md``,
               shipped with npm)
policy-legal   the Debian Policy Manual (``debian-policy``) and the Debian Developer's
               Reference (``developers-reference``): rules and a handbook; the licence
               texts in ``/usr/share/common-licenses`` (``base-files``, on every Debian)
news           the Lee corpus: 350 news articles of the Australian Broadcasting
               Corporation (Lee, Pincombe & Welsh 2005), as gensim ships it in its wheel
               (``gensim/test/test_data/lee_background.cor`` and ``lee.cor``)
email          200 Usenet posts of the 20 Newsgroups corpus (alt.atheism, sci.space;
               1993), as gensim ships them (``gensim/test/test_data/mini_newsgroup``, a
               pickled scikit-learn ``Bunch``): headers dropped, quoted replies kept
============== =========================================================================

gensim is read, never imported: from an installed ``gensim`` package, or from a gensim wheel
in the corpora directory (``TRISHIELD_CORPORA_DIR``, default ``<cache>/corpora``), where
``make install`` puts one with ``pip download --no-deps gensim==4.4.0``. Its two files are
pinned by sha256. The pickle is read by an unpickler that only knows the five classes it
needs, so it can run no code.

Each source document is cut into 120-word windows with 20 words of overlap
(:mod:`trishield.kb.chunking`, the KB's defaults); windows shorter than :data:`MIN_WORDS`
are dropped; exact duplicates (whitespace-normalised) and near-duplicates (half or more of
the window's 8-word shingles already seen in the genre, e.g. licence texts that embed one
another) are dropped, first copy kept. Each genre is split into a training and a held-out
half by a seeded shuffle of *units* (a source document, or 10 consecutive windows of a long
one such as the Policy Manual), so overlapping windows of one text never straddle the split.

Every file read is hashed: a source's digest is the sha256 of its ``path<TAB>sha256`` lines,
a genre's the sha256 of its sources' digests, so a report can say exactly what it was
computed on. A source that is not installed is listed with the command that installs it.
"""

from __future__ import annotations

import copyreg
import glob
import gzip
import hashlib
import importlib.util
import io
import os
import pickle
import random
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _reconstruct

from trishield.config import cache_dir
from trishield.errors import DatasetError
from trishield.kb.chunking import ChunkingConfig, chunk_document
from trishield.kb.datasets import DATASETS
from trishield.kb.documents import Document, content_hash

CORPORA_DIR_ENV = "TRISHIELD_CORPORA_DIR"
GENSIM_VERSION = "4.4.0"
MIN_WORDS = 8
SHINGLE = 8
NEAR_DUPLICATE = 0.5
UNIT_WINDOWS = 10
SPLIT_SEED = 0
GENRES = ("wiki", "software-docs", "policy-legal", "news", "email")

GENSIM_FILES = {
    "gensim/test/test_data/lee_background.cor":
        "5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb",
    "gensim/test/test_data/lee.cor":
        "a878f9a58f6743c32985c56c2f2f75988386216b38a4023a01fd3bcf7884d93e",
    "gensim/test/test_data/mini_newsgroup":
        "be0084ee9aded5eeefabea86bd23f0e5e3a743d9c1875aa1e47bc0728d6a5311",
}


class GenreSourceError(DatasetError):
    """A calibration source is not installed (the message says how to install it)."""


def corpora_dir() -> Path:
    """Where downloaded corpus packages (the gensim wheel) are looked for."""
    configured = os.environ.get(CORPORA_DIR_ENV)
    return Path(configured).expanduser() if configured else cache_dir() / "corpora"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Reading:
    """What a source read: its documents (id, title, text) and each file's digest."""

    documents: list[tuple[str, str]] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)

    def add_file(self, name: str, data: bytes) -> None:
        self.files.append((name, _sha256(data)))

    @property
    def digest(self) -> str:
        lines = "".join(f"{name}\t{digest}\n" for name, digest in sorted(self.files))
        return _sha256(lines.encode())


@dataclass(frozen=True)
class Source:
    """One public source of clean text of a genre, and how a user obtains it."""

    name: str
    genre: str
    description: str
    obtain: str
    read: Callable[[], Reading | None]
    """The documents, or None when the source is not installed on this machine."""


# -- readers ---------------------------------------------------------------------------------


def _files(patterns: Sequence[str]) -> list[Path]:
    found: dict[str, Path] = {}
    for pattern in patterns:
        for name in sorted(glob.glob(pattern, recursive=True)):
            path = Path(name)
            if path.is_file():
                found.setdefault(name, path)
    return [found[name] for name in sorted(found)]


def _text_files(patterns: Sequence[str], prefix: str) -> Callable[[], Reading | None]:
    def read() -> Reading | None:
        paths = _files(patterns)
        if not paths:
            return None
        reading = Reading()
        for path in paths:
            data = path.read_bytes()
            reading.add_file(str(path), data)
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            reading.documents.append((f"{prefix}:{path}", data.decode("utf-8", "replace")))
        return reading
    return read


def _dataset(name: str) -> Callable[[], Reading | None]:
    def read() -> Reading | None:
        dataset = DATASETS[name]
        if not dataset.location().is_file():
            return None
        reading = Reading()
        reading.files.append((f"<data>/{dataset.path}", dataset.sha256))
        reading.documents = [(document.id, document.text) for document in dataset.documents()]
        return reading
    return read


def _npm_docs() -> list[str]:
    roots = ["/usr/lib/node_modules/npm", "/usr/local/lib/node_modules/npm",
             "/usr/share/nodejs/npm"]
    return [f"{root}/docs/content/**/*.md" for root in roots]


def _gensim_member(member: str) -> tuple[str, bytes] | None:
    """A gensim test-data file: from an installed gensim, else from a gensim wheel in
    :func:`corpora_dir`; checked against its pinned sha256."""
    relative = member.removeprefix("gensim/")
    spec = importlib.util.find_spec("gensim")
    found: tuple[str, bytes] | None = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            path = Path(location) / relative
            if path.is_file():
                found = (str(path), path.read_bytes())
                break
    if found is None:
        for wheel in sorted(corpora_dir().glob("gensim-*.whl"), reverse=True):
            with zipfile.ZipFile(wheel) as archive:
                if member in archive.namelist():
                    found = (f"{wheel}!{member}", archive.read(member))
                    break
    if found is None:
        return None
    actual = _sha256(found[1])
    if actual != GENSIM_FILES[member]:
        raise GenreSourceError(f"{found[0]} has sha256 {actual}, expected "
                               f"{GENSIM_FILES[member]}: not gensim {GENSIM_VERSION}'s file")
    return found


def _lee_news() -> Reading | None:
    reading = Reading()
    for member in ("gensim/test/test_data/lee_background.cor", "gensim/test/test_data/lee.cor"):
        found = _gensim_member(member)
        if found is None:
            return None
        name, data = found
        reading.add_file(name, data)
        text = data.decode("latin-1")
        stem = Path(member).stem
        reading.documents += [(f"lee:{stem}:{number}", line)
                              for number, line in enumerate(text.splitlines()) if line.strip()]
    return reading


class _Bunch(dict):
    """scikit-learn's ``Bunch`` as the pickle names it: a dict is all that is needed."""


_PICKLE_CLASSES: dict[tuple[str, str], object] = {
    ("copy_reg", "_reconstructor"): copyreg._reconstructor,
    ("__builtin__", "dict"): dict,
    ("__builtin__", "object"): object,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("sklearn.datasets.base", "Bunch"): _Bunch,
}


class _DataUnpickler(pickle.Unpickler):
    """Loads data only: any class outside :data:`_PICKLE_CLASSES` is refused."""

    def find_class(self, module: str, name: str) -> object:
        try:
            return _PICKLE_CLASSES[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing {module}.{name} in a data pickle") from None


_HEADER_END = re.compile(r"\n\s*\n")


def _newsgroup_email() -> Reading | None:
    found = _gensim_member("gensim/test/test_data/mini_newsgroup")
    if found is None:
        return None
    name, data = found
    reading = Reading()
    reading.add_file(name, data)
    bunch = _DataUnpickler(io.BytesIO(zlib.decompress(data)), encoding="latin1").load()
    for number, post in enumerate(bunch["data"]):
        split = _HEADER_END.search(post)
        body = post[split.end():] if split else post
        reading.documents.append((f"20ng:{number}", body))
    return reading


_GENSIM = (f"`pip download --no-deps gensim=={GENSIM_VERSION} -d <corpora dir>` (`make "
           f"install` does it; <corpora dir> is ${CORPORA_DIR_ENV} or ~/.cache/trishield/"
           f"corpora), or `pip install gensim=={GENSIM_VERSION}`")

SOURCES: tuple[Source, ...] = (
    *(Source(name, "wiki", DATASETS[name].description,
             f"the data set {name!r}: {DATASETS[name].source} into the data directory "
             f"(`trishield datasets`)", _dataset(name))
      for name in ("hotpotqa", "musique", "2wikimultihopqa")),
    Source("cmake-help", "software-docs", "CMake's reference documentation (reStructuredText)",
           "`apt-get install cmake-data` (Debian; comes with `cmake`)",
           _text_files(["/usr/share/cmake-*/Help/**/*.rst"], "cmake")),
    Source("npm-docs", "software-docs", "npm's command, configuration and usage docs (Markdown)",
           "npm ships them: install Node.js with npm (`apt-get install npm`, or nodejs.org)",
           _text_files(_npm_docs(), "npm")),
    Source("debian-policy", "policy-legal", "the Debian Policy Manual (plain text)",
           "`apt-get install debian-policy`",
           _text_files(["/usr/share/doc/debian-policy/policy.txt.gz"], "policy")),
    Source("developers-reference", "policy-legal", "the Debian Developer's Reference",
           "`apt-get install developers-reference`",
           _text_files(["/usr/share/developers-reference/developers-reference.txt.gz"],
                       "devref")),
    Source("common-licenses", "policy-legal", "licence texts (GPL, Apache, MPL, CC0, ...)",
           "Debian's `base-files` package (on every Debian system)",
           _text_files(["/usr/share/common-licenses/*"], "licence")),
    Source("lee-news", "news", "the Lee corpus: 350 ABC news articles", _GENSIM, _lee_news),
    Source("20newsgroups-mini", "email", "200 Usenet posts of 20 Newsgroups (bodies)", _GENSIM,
           _newsgroup_email),
)


# -- passages --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Passage:
    """One clean window of a genre's source text."""

    id: str
    genre: str
    source: str
    unit: str
    text: str


@dataclass
class Genre:
    """A genre's passages, split, with what was read to make them."""

    name: str
    train: list[Passage]
    held_out: list[Passage]
    sources: dict[str, dict[str, object]]
    digest: str
    dropped: dict[str, int]

    def summary(self) -> dict[str, object]:
        return {"train": len(self.train), "held_out": len(self.held_out),
                "sha256": self.digest, "dropped": self.dropped, "sources": self.sources}


def _shingles(text: str) -> set[bytes]:
    """The window's 8-word shingles, each as a stable 8-byte digest."""
    tokens = text.lower().split()
    return {hashlib.blake2b(" ".join(tokens[i:i + SHINGLE]).encode(), digest_size=8).digest()
            for i in range(max(1, len(tokens) - SHINGLE + 1))}


def passages_of(genre: str, documents: Sequence[tuple[str, str, str]],
                chunking: ChunkingConfig | None = None) -> tuple[list[Passage], dict[str, int]]:
    """Windows of ``(source, id, text)`` documents, short ones and duplicates dropped."""
    chunking = chunking or ChunkingConfig(strategy="window")  # the calibration's windows
    passages: list[Passage] = []
    seen_text: set[str] = set()
    seen_shingles: set[bytes] = set()
    dropped = {"short": 0, "duplicate": 0, "near_duplicate": 0}
    for source, doc_id, text in documents:
        chunks = chunk_document(Document(id=doc_id, text=text), chunking)
        for chunk in chunks:
            if len(chunk.text.split()) < MIN_WORDS:
                dropped["short"] += 1
                continue
            key = content_hash(chunk.text)
            if key in seen_text:
                dropped["duplicate"] += 1
                continue
            shingles = _shingles(chunk.text)
            if len(shingles & seen_shingles) >= NEAR_DUPLICATE * len(shingles):
                dropped["near_duplicate"] += 1
                continue
            seen_text.add(key)
            seen_shingles |= shingles
            unit = f"{doc_id}@{chunk.index // UNIT_WINDOWS}"
            passages.append(Passage(chunk.id, genre, source, unit, chunk.text))
    return passages, dropped


def split_units(passages: Sequence[Passage], seed: int = SPLIT_SEED,
                cap: int | None = None) -> tuple[list[Passage], list[Passage]]:
    """(training, held-out): a seeded shuffle of units, alternately to each half (so both
    halves draw from every part of the genre), each half capped at ``cap`` passages."""
    units = sorted({p.unit for p in passages})
    random.Random(f"{seed}:{passages[0].genre if passages else ''}").shuffle(units)
    half = {unit: number % 2 for number, unit in enumerate(units)}
    order = {unit: number for number, unit in enumerate(units)}
    train = sorted((p for p in passages if half[p.unit] == 0), key=lambda p: order[p.unit])
    held = sorted((p for p in passages if half[p.unit] == 1), key=lambda p: order[p.unit])
    if cap:
        train, held = train[:cap], held[:cap]
    return train, held


def source_status() -> list[dict[str, object]]:
    """Each source: its genre, whether it is installed here, and how to obtain it."""
    rows = []
    for source in SOURCES:
        try:
            reading = source.read()
            error = None
        except DatasetError as problem:
            reading, error = None, str(problem)
        rows.append({"source": source.name, "genre": source.genre, "found": reading is not None,
                     "files": len(reading.files) if reading else 0, "error": error,
                     "obtain": source.obtain})
    return rows


def load_genre(name: str, *, seed: int = SPLIT_SEED, cap: int | None = None,
               require_all: bool = False) -> Genre:
    """A genre from every source of it installed here.

    Raises :class:`GenreSourceError` (saying how to install them) when none of its sources is
    installed, or any is missing and ``require_all`` is set.
    """
    sources = [source for source in SOURCES if source.genre == name]
    if not sources:
        raise GenreSourceError(f"unknown genre {name!r}; known: {', '.join(GENRES)}")
    documents: list[tuple[str, str, str]] = []
    summary: dict[str, dict[str, object]] = {}
    missing = []
    for source in sources:
        reading = source.read()
        if reading is None:
            missing.append(f"{source.name} ({source.obtain})")
            summary[source.name] = {"found": False, "obtain": source.obtain}
            continue
        documents += [(source.name, doc_id, text) for doc_id, text in reading.documents]
        summary[source.name] = {"found": True, "files": len(reading.files),
                                "documents": len(reading.documents), "sha256": reading.digest}
    if missing and (require_all or len(missing) == len(sources)):
        raise GenreSourceError(f"genre {name!r}: not installed here: " + "; ".join(missing))
    passages, dropped = passages_of(name, documents)
    train, held = split_units(passages, seed, cap)
    for source_name, row in summary.items():
        if row["found"]:
            row["train"] = sum(p.source == source_name for p in train)
            row["held_out"] = sum(p.source == source_name for p in held)
    digests = "".join(f"{source}\t{row.get('sha256', 'missing')}\n"
                      for source, row in sorted(summary.items()))
    return Genre(name, train, held, summary, _sha256(digests.encode()), dropped)


def iter_genres(names: Sequence[str] = GENRES, **options) -> Iterator[Genre]:
    for name in names:
        yield load_genre(name, **options)




def fetch_gensim() -> Path:
    """Download gensim's wheel (no dependencies, nothing installed) into the corpora dir."""
    import subprocess
    import sys

    target = corpora_dir()
    existing = sorted(target.glob(f"gensim-{GENSIM_VERSION}-*.whl"))
    if existing:
        return existing[-1]
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--disable-pip-version-check", f"gensim=={GENSIM_VERSION}", "-d",
                    str(target)], check=True)
    return sorted(target.glob(f"gensim-{GENSIM_VERSION}-*.whl"))[-1]


def main(argv: Sequence[str] | None = None) -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Ring 1's calibration genres: which sources "
                                                 "are installed here, and how to get the rest")
    parser.add_argument("--fetch", action="store_true",
                        help=f"download gensim {GENSIM_VERSION}'s wheel (news, email) into "
                             f"the corpora directory (${CORPORA_DIR_ENV})")
    arguments = parser.parse_args(argv)
    if arguments.fetch:
        print(f"gensim wheel: {fetch_gensim()}")
    print(json.dumps(source_status(), indent=2))


__all__ = ["GENRES", "SOURCES", "Genre", "GenreSourceError", "Passage", "corpora_dir",
           "fetch_gensim", "load_genre", "passages_of", "source_status", "split_units"]


if __name__ == "__main__":
    main()
