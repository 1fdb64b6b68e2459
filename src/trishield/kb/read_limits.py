"""The limits every input file is read under (``trishield ingest --max-...``).

A file's size on disk says little about what reading it costs: a 400 KB DOCX can unpack to
800 MB of XML, a 1 KB PDF can claim 64,000 pages, 100 KB of nested ``<div>`` s can keep an
HTML parser busy for minutes and a 200 KB front matter can expand (through YAML aliases) to
200 MB of metadata. So each file is read under limits on what it *expands* to, its pages,
its nesting depth, and the time and memory its parser may use; a file over one is reported
(with the limit and the option that raises it) and the rest of a folder is still read.

It imports nothing of TriShield but :mod:`trishield.errors`: the parser process
(:mod:`trishield.kb.parse_worker`) imports it without the rest of the library.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields

from trishield.errors import InputError

MIB = 1024 * 1024
MAX_FILE_BYTES = 50 * MIB
"""Default size limit of one input file (JSONL excepted), checked before it is parsed."""


@dataclass(frozen=True)
class ReadLimits:
    """Limits on reading one file; ``None`` means no limit (there is always a default).

    ``max_file_bytes``: the file on disk (checked before it is opened for parsing; JSONL,
    read a line at a time, excepted). ``max_expanded_bytes``: what a file unpacks to: the
    members of a DOCX (as its zip directory declares them, which is also all Python's zip
    reader will ever produce) and the text extracted from any document. ``max_pages``: pages
    of a PDF (its page tree is walked, and refused if it visits one node twice, before any
    page is read). ``max_depth``: element nesting of an HTML page. ``max_seconds`` and
    ``max_memory_bytes``: wall time and address space of the parser process that reads PDF,
    DOCX, HTML and reStructuredText files (a parser that checks none of the limits above
    still stops here). ``max_front_matter_bytes``: the YAML front matter of a text file, both
    as written and as expanded (aliases repeat a value without repeating its bytes).
    """

    max_file_bytes: int | None = MAX_FILE_BYTES
    max_expanded_bytes: int | None = 64 * MIB
    max_pages: int | None = 2000
    max_depth: int | None = 256
    max_seconds: float | None = 30.0
    max_memory_bytes: int | None = 1024 * MIB
    max_front_matter_bytes: int | None = 64 * 1024

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"read limit {item.name} must be a number or None, got "
                                 f"{value!r}")
            if value <= 0:
                raise ValueError(f"read limit {item.name} must be positive, got {value!r}")

    def as_dict(self) -> dict[str, int | float | None]:
        """The limits as JSON values (what the parser process is sent)."""
        return asdict(self)


OPTION_OF = {
    "max_file_bytes": "--max-file-size",
    "max_expanded_bytes": "--max-expanded-size",
    "max_pages": "--max-pages",
    "max_depth": "--max-depth",
    "max_seconds": "--parse-time",
    "max_memory_bytes": "--parse-memory",
    "max_front_matter_bytes": "--max-front-matter",
}
"""The ``trishield ingest`` option that raises each limit: every refusal names it."""


def format_bytes(size: int) -> str:
    """``52428800`` -> ``50.0 MiB``: sizes in errors and summaries."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b|bytes)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "bytes": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2,
          "mb": 1000**2, "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3}


def parse_size(text: str) -> int:
    """``"20MB"``, ``"512KiB"``, ``"1000000"`` -> bytes; :class:`InputError` otherwise."""
    found = _SIZE.fullmatch(text)
    unit = (found.group(2) or "").lower() if found else ""
    if found is None or unit not in _UNITS:
        raise InputError(f"size {text!r} is not a size such as 20MB, 512KiB or 1000000")
    size = int(float(found.group(1)) * _UNITS[unit])
    if size < 1:
        raise InputError(f"size {text!r} must be at least 1 byte")
    return size


_KINDS = {"max_pages": "count", "max_depth": "count", "max_seconds": "seconds"}


def parse_limit(name: str, text: str) -> int | float | None:
    """The value of limit ``name`` (a :class:`ReadLimits` field) from its option's text: a
    size for the byte limits (20MB, 512KiB, 1000000), a whole number of pages or levels,
    seconds; ``none`` for no limit. Bad text is an :class:`InputError` naming the option."""
    option = OPTION_OF[name]
    if text.strip().lower() in ("none", "unlimited"):
        return None
    kind = _KINDS.get(name, "size")
    if kind == "size":
        try:
            return parse_size(text)
        except InputError as error:
            raise InputError(f"{option}: {error}") from None
    try:
        value: float = float(text) if kind == "seconds" else int(text)
    except ValueError:
        value = 0
    if not value > 0:
        raise InputError(f"{option}: {text!r} is not a positive "
                         f"{'number of seconds' if kind == 'seconds' else 'whole number'} "
                         "(or 'none')")
    return value


def limits_from_text(values: dict[str, str]) -> ReadLimits:
    """:class:`ReadLimits` from option texts (each limit's field name to its text)."""
    return ReadLimits(**{name: parse_limit(name, text) for name, text in values.items()})
