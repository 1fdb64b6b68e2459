"""One writer at a time: the KB's exclusive file lock, and the crash tests' pause points.

Every write of a KB handle (an ingest, a release, a delete, a repair...) holds ``kb.lock``
from its first read of what it will change to its last index file, so two processes never
interleave their writes. A reader never takes it, except to let a lagging search engine catch
up when nobody writes (:meth:`WriteLock.try_hold`).

The pause points let the crash tests stop a real process at a named phase of a write and kill
it there (:data:`FAULT_PAUSE_ENV`), and the service tests change the machine under a paused
write before letting it go on (:data:`FAULT_RESUME_ENV`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from trishield.errors import BusyError, ReadOnlyError

LOCK = "kb.lock"
FAULT_PAUSE_ENV = "TRISHIELD_FAULT_PAUSE"
"""Crash-test hook: names an ingest phase at which the process stops and waits to be killed."""
FAULT_RESUME_ENV = "TRISHIELD_FAULT_RESUME"
"""With the pause hook: a file whose appearance lets the paused process go on (to change the
machine under it, a full disk for instance, and watch what the rest of the write does)."""

_FAULT_HITS: dict[str, int] = {}


def fault_point(phase: str) -> None:
    """Pause at ``phase`` when :data:`FAULT_PAUSE_ENV` names it (``phase#N``: only the N-th
    time this process reaches it, e.g. the second batch of a batched ingest)."""
    wanted, _, nth = (os.environ.get(FAULT_PAUSE_ENV) or "").partition("#")
    if wanted != phase:
        return
    _FAULT_HITS[phase] = _FAULT_HITS.get(phase, 0) + 1
    if nth and _FAULT_HITS[phase] != int(nth):
        return
    resume = os.environ.get(FAULT_RESUME_ENV)
    if resume and Path(resume).exists():
        return
    print(f"FAULT-PAUSE {phase}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline and not (resume and Path(resume).exists()):
        time.sleep(0.05)


class WriteLock:
    """The exclusive lock on ``DIR/kb.lock`` that every write of a KB holds.

    ``read_only`` is asked at each write (a handle's store decides it when it opens);
    ``timeout`` is how long a writer waits for another one (None: as long as it takes)."""

    def __init__(self, directory: Path, read_only: Callable[[], bool],
                 timeout: float | None = None):
        self.directory = directory
        self._read_only = read_only
        self.timeout = timeout

    @property
    def path(self) -> Path:
        return self.directory / LOCK

    @contextmanager
    def hold(self) -> Iterator[None]:
        """The KB's exclusive file lock, waited for at most ``timeout`` seconds."""
        if self._read_only():
            raise ReadOnlyError(f"{self.directory} is served read-only (the directory or its "
                                "database cannot be written); writes are refused")
        try:
            handle = self.path.open("a")
        except OSError as error:
            if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise ReadOnlyError(f"{self.directory} cannot be written ({error.strerror}); "
                                    "writes are refused") from None
            raise
        with handle:
            self._acquire(handle)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _acquire(self, handle) -> None:
        if self.timeout is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
            return
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BusyError(f"another writer holds {self.path} (waited "
                                    f"{self.timeout:g} s); nothing was written",
                                    retry_after=max(1, round(self.timeout))) from None
                time.sleep(0.05)

    @contextmanager
    def try_hold(self) -> Iterator[bool]:
        """The lock only if it is free right now: yields whether it is held (a reader's
        chance to do a writer's chore; never waits, never raises for the lock)."""
        if self._read_only():
            yield False
            return
        try:
            handle = self.path.open("a")
        except OSError:
            yield False
            return
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
