"""Shared helpers of the service tests: keys, a served KB, real server processes."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from trishield.kb import content_hash
from trishield.kb.locking import FAULT_PAUSE_ENV
from trishield.provenance.keys import KeyStore
from trishield.provenance.signing import SignedRecord, sign_record

REFUND_QUESTION = "How many days do customers have to return an item?"


@dataclass(frozen=True)
class Keys:
    admin: str
    writer: str
    reader: str
    untrusted_writer: str

    @staticmethod
    def create(kb_dir: Path) -> Keys:
        store = KeyStore(kb_dir)
        return Keys(admin=store.create_key("ada", "admin", "trusted")[1],
                    writer=store.create_key("wes", "writer", "neutral")[1],
                    reader=store.create_key("rita", "reader", "neutral")[1],
                    untrusted_writer=store.create_key("mallory", "writer", "untrusted")[1])


def signed(private: Ed25519PrivateKey, publisher: str, doc_id: str, text: str, *,
           version: int = 1, issued_at: int = 1_780_000_000) -> dict[str, object]:
    """The ``provenance`` of a document whose record ``publisher`` signed (as `keys sign`)."""
    record = SignedRecord(doc_id, content_hash(text), version, issued_at)
    return {"publisher": publisher, "signature": sign_record(private, record),
            "version": version, "issued_at": issued_at}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def copy_kb(template: Path, target: Path) -> Path:
    shutil.copytree(template, target)
    return target


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _open_files_limit(limit: int) -> Callable[[], None]:
    """Run in the child before ``exec``: its soft and hard limits on open files."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


class SlowOpenAIServer:
    """Test double of a paid chat API: a real HTTP server on 127.0.0.1 that speaks OpenAI's
    chat-completions protocol and answers every request with ``text`` after ``delay``
    seconds, the way a busy remote model keeps an ask waiting."""

    def __init__(self, text: str = "30 days", delay: float = 1.0):
        self.calls = 0
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                double.calls += 1
                time.sleep(delay)
                body = json.dumps({
                    "id": "chatcmpl-1", "object": "chat.completion", "model": "slow",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 2,
                              "total_tokens": 12}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def config(self) -> str:
        """A config file whose whole panel is this server (no second reader, Ring 3 always
        asks it)."""
        return ("[ring3]\ngate = \"always\"\n[panel]\nmembers = []\nsecond_reader = \"none\"\n"
                f"[[panel.remote]]\nkind = \"openai\"\nname = \"slow\"\nmodel = \"slow\"\n"
                f"base_url = \"{self.url}\"\nmax_retries = 0\ntimeout = 120\n")

    def __enter__(self) -> SlowOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class ServerProcess:
    """``trishield serve`` as a real subprocess on a free loopback port."""

    def __init__(self, kb_dir: Path, *, fault: str | None = None, extra: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, max_open_files: int | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = dict(os.environ)
        environment.pop(FAULT_PAUSE_ENV, None)
        if fault:
            environment[FAULT_PAUSE_ENV] = fault
        environment.update(env or {})
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trishield.cli", "serve", "--kb", str(kb_dir), "--port",
             str(self.port), "--log-level", "warning", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment, text=True,
            preexec_fn=None if max_open_files is None else _open_files_limit(max_open_files))
        self.stderr: list[str] = []
        self._fault_seen = threading.Event()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line)
            if "FAULT-PAUSE" in line:
                self._fault_seen.set()

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited rc={self.process.returncode}: "
                                     f"{''.join(self.stderr)[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        self.kill()
        raise AssertionError("server did not become ready")

    def wait_for_fault(self, timeout: float = 120.0) -> None:
        assert self._fault_seen.wait(timeout), f"no FAULT-PAUSE: {''.join(self.stderr)[-2000:]}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def policy_batch(prefix: str, size: int) -> list[dict[str, str]]:
    """Distinct, plausible policy paragraphs (Ring 1 lets them through)."""
    items = ["tents", "stoves", "kayaks", "boots", "jackets", "lanterns", "ropes", "maps"]
    return [{"id": f"{prefix}-{n}",
             "text": " ".join(f"{prefix} store {n} note {line}: {items[n % len(items)]} bought in "
                              f"branch {n} may be exchanged within {10 + line} days when "
                              "unused and with a receipt." for line in range(5))}
            for n in range(size)]


def dumps(value: object) -> str:
    return json.dumps(value)
