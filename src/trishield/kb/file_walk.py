"""Which files of a folder an ingest reads, and how it opens them: the folder is the boundary.

A folder handed to ``trishield ingest`` may come from someone else (a shared drive, an
unpacked archive, a repository). Followed naively, a link in it reads the host:
``passwd.txt -> /etc/passwd`` puts the password file in the knowledge base, and a named pipe
blocks the ingest forever. So the walk never follows a link out of the folder, reads a file
reached through a link inside it at most once, never opens anything but a regular file, and
reports every entry it does not read with the reason: nothing is dropped silently (hidden
files and folders, those whose name starts with a dot, are the one deliberate exception).

Entries are judged on ``lstat`` (the entry itself, never what it points to) and opened with
``O_NOFOLLOW | O_NONBLOCK`` then checked again with ``fstat``: a file swapped for a link or a
pipe between the walk and the read is refused, and opening a pipe never blocks.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from trishield.errors import InputError
from trishield.kb.read_limits import OPTION_OF, format_bytes

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a folder"))


@dataclass(frozen=True)
class SkippedFile:
    """An entry of a folder that was not read, and why (an unsupported type, a link out of
    the folder, a pipe or device, a dangling link)."""

    path: str
    reason: str


@dataclass(frozen=True)
class FolderFile:
    """A file a folder load reads: ``shown`` is its path in the folder (ids and messages
    come from it), ``real`` the regular file opened (differs from ``shown`` for a link)."""

    shown: Path
    real: Path


def kind_of(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words."""
    for check, name in _KINDS:
        if check(mode):
            return name
    return "not a regular file"


def _inside(real: Path, root: Path) -> bool:
    return real == root or root in real.parents


def walk_folder(root: Path, wanted: Callable[[Path], bool]) -> tuple[list[FolderFile],
                                                                    list[SkippedFile]]:
    """The files under ``root`` to read (sorted by relative path) and the entries skipped.

    ``wanted(path)`` says whether a regular file's type is read at all (others are skipped
    as an unsupported type). A link is followed only to a regular file inside ``root``,
    and only when that file is not read under its own name (or through an earlier link):
    so nothing outside the folder is read and nothing inside it twice. Links to folders
    are not followed (the folder is walked where it is).
    """
    real_root = root.resolve(strict=True)
    entries: list[tuple[Path, os.stat_result]] = []
    skipped: list[SkippedFile] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as scan:
                children = sorted(scan, key=lambda entry: entry.name)
        except OSError as error:
            skipped.append(SkippedFile(str(folder), f"folder cannot be listed "
                                                    f"({error.strerror or error})"))
            continue
        for child in children:
            if child.name.startswith("."):
                continue  # hidden files and folders are never read (see the module doc)
            path = Path(child.path)
            try:
                info = child.stat(follow_symlinks=False)
            except OSError as error:
                skipped.append(SkippedFile(str(path), f"cannot be examined "
                                                      f"({error.strerror or error})"))
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(path)
            else:
                entries.append((path, info))
    entries.sort(key=lambda item: item[0].relative_to(root).parts)
    direct: set[Path] = set()
    if any(stat.S_ISLNK(info.st_mode) for _, info in entries):  # only links need them
        direct = {path.resolve() for path, info in entries
                  if stat.S_ISREG(info.st_mode) and wanted(path)}
    files: list[FolderFile] = []
    linked: dict[Path, Path] = {}
    for path, info in entries:
        if stat.S_ISLNK(info.st_mode):
            outcome = _follow(path, real_root, direct, linked)
            if isinstance(outcome, str):
                skipped.append(SkippedFile(str(path), outcome))
            elif not wanted(path):
                skipped.append(SkippedFile(str(path), "unsupported file type"))
            else:
                linked[outcome] = path
                files.append(FolderFile(path, outcome))
        elif not stat.S_ISREG(info.st_mode):
            skipped.append(SkippedFile(str(path), f"{kind_of(info.st_mode)}, not a regular "
                                                  "file; never opened"))
        elif not wanted(path):
            skipped.append(SkippedFile(str(path), "unsupported file type"))
        else:
            files.append(FolderFile(path, path))
    skipped.sort(key=lambda item: item.path)
    return files, skipped


def _follow(link: Path, real_root: Path, direct: set[Path],
            linked: dict[Path, Path]) -> Path | str:
    """Where ``link`` may be read from, or why it is not read."""
    try:
        target = os.readlink(link)
    except OSError as error:
        return f"link cannot be read ({error.strerror or error})"
    try:
        real = link.resolve(strict=True)
    except FileNotFoundError:
        return f"dangling link (to {target}, which does not exist)"
    except (OSError, RuntimeError) as error:  # a loop of links: ELOOP or RuntimeError
        return f"link cannot be followed (to {target}: {getattr(error, 'strerror', error)})"
    if not _inside(real, real_root):
        return (f"link to {target}, outside the ingested folder; links are not followed out "
                "of it")
    info = real.stat()
    if stat.S_ISDIR(info.st_mode):
        return f"link to the folder {real}; links to folders are not followed"
    if not stat.S_ISREG(info.st_mode):
        return f"link to {kind_of(info.st_mode)} ({real}); never opened"
    if real in direct:
        return f"link to {real}, which is read under its own name"
    if real in linked:
        return f"link to {real}, which is read through the link {linked[real]}"
    return real


def open_regular(path: Path, *, shown: str | None = None) -> BinaryIO:
    """Open ``path`` for reading only if it is a regular file: never blocks on a pipe,
    never reads a device. ``path`` itself may not be a link (resolve links first)."""
    name = shown or str(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise InputError(f"cannot be opened ({error.strerror or error})", path=name) from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise InputError(f"{kind_of(mode)}, not a regular file; not read", path=name)
    return os.fdopen(descriptor, "rb")


def read_regular(path: Path, max_bytes: int | None, *, shown: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, refused past ``max_bytes`` (its size on disk
    is checked first, and no more than the limit is ever read, so a file that grows while
    it is read is refused too)."""
    name = shown or str(path)
    with open_regular(path, shown=name) as handle:
        size = os.fstat(handle.fileno()).st_size
        if max_bytes is not None and size > max_bytes:
            raise _too_large(size, max_bytes, name)
        data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise _too_large(len(data), max_bytes, name)
    return data


def _too_large(size: int, max_bytes: int, name: str) -> InputError:
    return InputError(f"file is {format_bytes(size)} ({size:,} bytes), over the "
                      f"{format_bytes(max_bytes)} limit per file; raise it "
                      f"({OPTION_OF['max_file_bytes']}) or split the file", path=name)
