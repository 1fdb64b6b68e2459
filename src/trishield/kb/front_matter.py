"""YAML front matter (``---`` / ``key: value`` / ``---``) at the top of a text file.

Static-site generators and note tools put a document's title and tags there. Left in place it
is chunked with the body and shows up in answers, so loaders split it off: the title becomes
the document's title and the other keys are returned as metadata. Parsed with PyYAML's safe
loader (no object construction from untrusted files); anything that is not a flat mapping of
scalars or lists of scalars is refused with the file and line, never guessed at.

Front matter is small (a title, tags, a date), so it is capped (``max_bytes``, 64 KiB by
default) twice: as written, before YAML reads it, and as expanded, after. YAML aliases repeat
a value by reference (``b: [*a, *a, ...]``), so 200 KB of YAML can stand for 200 MB of
metadata that would be stored, shown and served with the document; the expanded size is
counted value by value and refused past the cap.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from trishield.errors import InputError
from trishield.kb.read_limits import OPTION_OF, format_bytes

_OPEN = re.compile(r"---[ \t]*\r?\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)
MetadataValue = str | int | float | bool | list[str | int | float | bool]
_SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class FrontMatter:
    """What a file's front matter said and the body that follows it."""

    body: str
    title: str = ""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)


def _scalar(value: object) -> object:
    """Dates are the one non-JSON scalar YAML produces for ordinary values: keep them as ISO
    text so metadata stays printable and JSON-serialisable."""
    return value.isoformat() if isinstance(value, dt.date | dt.datetime) else value


def _too_large(what: str, max_bytes: int, path: str) -> InputError:
    return InputError(f"front matter {what} over {format_bytes(max_bytes)}, the limit; raise "
                      f"it ({OPTION_OF['max_front_matter_bytes']}) if it is genuine",
                      path=path, line=1)


def _expanded_size(key: str, value: object) -> int:
    """Characters ``key: value`` stands for once aliases are expanded (flat values only)."""
    items = value if isinstance(value, list) else [value]
    return len(key) + sum(len(str(item)) + 2 for item in items)


def split_front_matter(text: str, *, path: str, max_bytes: int | None = 64 * 1024) \
        -> FrontMatter:
    """Split ``text`` into front matter and body; a text without front matter is all body.

    Front matter must start on the very first line with ``---`` and end with a ``---`` or
    ``...`` line. An opening line with no closing one is an error rather than body text: it
    almost always means a mistyped delimiter, and guessing would ingest the metadata.
    """
    import yaml

    opening = _OPEN.match(text)
    if opening is None:
        return FrontMatter(body=text)
    closing = _CLOSE.search(text, opening.end())
    if closing is None:
        raise InputError("front matter opened with '---' on line 1 is never closed (expected "
                         "a '---' line after it)", path=path, line=1)
    raw = text[opening.end():closing.start()]
    if max_bytes is not None and len(raw.encode("utf-8")) > max_bytes:
        raise _too_large("is", max_bytes, path)
    try:
        parsed = yaml.safe_load(raw) if raw.strip() else {}
    except RecursionError:
        raise InputError("malformed YAML front matter: nested too deeply", path=path,
                         line=1) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1  # +1 for 1-based, +1 for the '---'
        problem = getattr(error, "problem", None) or str(error)
        raise InputError(f"malformed YAML front matter: {problem}", path=path,
                         line=line) from None
    if not isinstance(parsed, dict):
        raise InputError(f"front matter must be 'key: value' lines, got a YAML "
                         f"{type(parsed).__name__}", path=path, line=2)
    metadata: dict[str, MetadataValue] = {}
    expanded = 0
    for key, value in parsed.items():
        if not isinstance(key, str):
            raise InputError(f"front matter key {key!r} is not text", path=path)
        value = _scalar(value)
        if isinstance(value, list):
            value = [_scalar(item) for item in value]
            if not all(isinstance(item, _SCALARS) for item in value):
                raise InputError(f"front matter key {key!r} holds a nested list or mapping; "
                                 "only text, numbers, booleans and flat lists are kept",
                                 path=path)
        elif value is None:
            continue
        elif not isinstance(value, _SCALARS):
            raise InputError(f"front matter key {key!r} holds a {type(value).__name__}; only "
                             "text, numbers, booleans and flat lists are kept",
                             path=path)
        expanded += _expanded_size(key, value)
        if max_bytes is not None and expanded > max_bytes:
            raise _too_large("expands (through YAML aliases) to", max_bytes, path)
        metadata[key] = value
    title = metadata.pop("title", "")
    if not isinstance(title, str):
        raise InputError(f"front matter 'title' must be text, got {title!r}", path=path)
    body_start = text.find("\n", closing.start())
    body = "" if body_start < 0 else text[body_start + 1:]
    return FrontMatter(body=body, title=title.strip(), metadata=metadata)
