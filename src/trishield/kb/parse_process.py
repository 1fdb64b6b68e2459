"""The parser process: third-party parsers run on untrusted files under a time and a memory
limit that hold whatever the parser does.

pypdf, python-docx, BeautifulSoup and docutils check some sizes themselves, not all: a DOCX
of 800 MB of XML took 6 GB, nested ``<div>`` s and shared PDF page trees ran for minutes.
Checks of our own (:mod:`trishield.kb.file_formats`) refuse the shapes we know; the process
bounds the ones we do not. :class:`ParserProcess` keeps one child process
(:func:`trishield.kb.parse_worker.serve`) for a whole load and hands it one file at a time,
so a folder of many small files pays the start (about 0.5 s) once, not per file. A file that
runs past ``max_seconds`` has its process killed (a fresh one reads the next file); one that
needs more than ``max_memory_bytes`` of address space fails inside it (``RLIMIT_AS``).

The child is started with ``python -P -c`` (the current folder, which may be the folder
being ingested, is not on its import path) and imports the reader modules without
TriShield's package ``__init__`` files (see :mod:`trishield.kb.parse_worker`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType

from trishield.errors import InputError, TriShieldError
from trishield.kb.parse_worker import Parsed
from trishield.kb.read_limits import OPTION_OF, ReadLimits

_START_SECONDS = 60.0
"""How long a starting parser process may take to import its parsers (a cold disk)."""

_BOOTSTRAP = """\
import os, sys, types
kb = sys.argv[1]
for name, path in (("trishield", os.path.dirname(kb)), ("trishield.kb", kb)):
    shell = types.ModuleType(name)
    shell.__path__ = [path]
    sys.modules[name] = shell
from trishield.kb.parse_worker import serve
serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) or None)
"""


class ParserProcess:
    """One reusable child process that parses files under ``limits``; a context manager
    (its exit stops the child). Started on the first :meth:`parse`, never before: a folder
    of Markdown files never starts one."""

    def __init__(self, limits: ReadLimits):
        self.limits = limits
        self._process: subprocess.Popen | None = None
        self._requests: Connection | None = None
        self._replies: Connection | None = None
        self.started = 0
        """Processes started so far (the first, and one after each kill or crash)."""

    def __enter__(self) -> ParserProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is not None:  # Ctrl-C or an error mid-file: do not wait for the parser
            self._kill()
        else:
            self.close()

    def parse(self, kind: str, data: bytes, name: str) -> Parsed:
        """``data`` (the bytes of the file ``name``) read as ``kind`` in the child process;
        :class:`InputError` naming ``name`` when the file is refused, over a limit, or
        stops the parser."""
        if self._process is None or self._process.poll() is not None:
            self._start()
        header = json.dumps({"kind": kind, "name": name,
                             "limits": self.limits.as_dict()}).encode("utf-8")
        assert self._replies is not None
        started = time.monotonic()
        if not self._send(header, data):
            # the child ended between two files (killed from outside): one fresh try
            self._kill()
            self._start()
            started = time.monotonic()
            if not self._send(header, data):
                raise self._stopped(name)
        remaining = None
        if self.limits.max_seconds is not None:
            remaining = max(0.0, self.limits.max_seconds - (time.monotonic() - started))
        if not self._replies.poll(remaining):
            self._kill()
            raise InputError(f"reading it took longer than {self.limits.max_seconds:g} s, the "
                             f"limit per file; raise it ({OPTION_OF['max_seconds']}) if the "
                             "file is genuine", path=name)
        try:
            reply = json.loads(self._replies.recv_bytes())
        except (EOFError, OSError):
            raise self._stopped(name) from None
        if reply.get("exiting"):
            self._kill()  # it is on its way out: the next file gets a fresh process
        if "error" in reply:
            raise InputError(reply["error"], path=name)
        return Parsed.from_json(reply)

    def _send(self, header: bytes, data: bytes) -> bool:
        """Hand the child one request; False when its pipe is closed (it has ended)."""
        assert self._requests is not None
        try:
            self._requests.send_bytes(header)
            self._requests.send_bytes(data)
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Stop the child (closing its pipe ends its loop; a stuck one is killed)."""
        if self._process is None:
            return
        self._close_pipes()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def _start(self) -> None:
        self.close()
        from_parent, to_child = os.pipe()  # (read end, write end)
        from_child, to_parent = os.pipe()
        kb = str(Path(__file__).resolve().parent)
        memory = self.limits.max_memory_bytes or 0
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-P", "-c", _BOOTSTRAP, kb, str(from_parent),
                 str(to_parent), str(memory)],
                pass_fds=(from_parent, to_parent), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self._requests = Connection(to_child, readable=False)
        self._replies = Connection(from_child, writable=False)
        self.started += 1
        ready = False
        try:
            ready = self._replies.poll(_START_SECONDS) and \
                json.loads(self._replies.recv_bytes()).get("ready") is True
        except (EOFError, OSError, ValueError):
            ready = False
        if not ready:
            status = self._describe_exit()
            self._kill()
            raise TriShieldError(f"the document parser process did not start ({status}); "
                                 f"is {sys.executable} able to import pypdf, python-docx, "
                                 "beautifulsoup4, lxml, docutils and PyYAML?")

    def _stopped(self, name: str) -> InputError:
        """The child ended while it read ``name``: its exit says why, as far as it can."""
        status = self._describe_exit()
        self._kill()
        return InputError(f"the parser process stopped while reading it ({status}); most "
                          "often the file needs more memory than the limit of the parser "
                          f"process (raise it: {OPTION_OF['max_memory_bytes']}) or it crashes "
                          "the parser", path=name)

    def _describe_exit(self) -> str:
        if self._process is None:
            return "not running"
        try:
            code = self._process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        if self._process is not None:
            self._process.wait()
        self._close_pipes()
        self._process = None

    def _close_pipes(self) -> None:
        for connection in (self._requests, self._replies):
            if connection is not None:
                connection.close()
        self._requests = self._replies = None
