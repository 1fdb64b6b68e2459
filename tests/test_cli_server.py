"""``trishield ask/search --server URL``: the real CLI against a real ``trishield serve``.

The warm path prints what the local command prints (only the clock differs); every way the
server can fail the CLI (unreachable, no key, a refused key, a refused request) is one clear
line and a non-zero exit. The server runs with ``TRISHIELD_OTEL=console``, so its spans are
checked here too, and its streamed answer is read over a real socket.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from service_support import REFUND_QUESTION, Keys, ServerProcess, bearer, copy_kb, free_port
from test_service_stream import parse_events, without_clock

pytestmark = pytest.mark.slow
CLOCK = re.compile(r"\d+\.\d+s\b")


@pytest.fixture(scope="module")
def server(demo_kb_template: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[ServerProcess, Keys, Path]]:
    kb_dir = copy_kb(demo_kb_template, tmp_path_factory.mktemp("cli-server") / "kb")
    keys = Keys.create(kb_dir)
    process = ServerProcess(kb_dir, env={"TRISHIELD_OTEL": "console"})
    try:
        process.wait_ready()
        yield process, keys, kb_dir
    finally:
        process.stop()


def trishield(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "TRISHIELD_API_KEY"}
    return subprocess.run([sys.executable, "-m", "trishield.cli", *args], capture_output=True,
                          text=True, timeout=300, check=False, env=environment | (env or {}))


def test_search_prints_what_the_local_command_prints(server) -> None:
    process, keys, kb_dir = server
    for extra in ((), ("--json",)):
        args = ("search", "return an item within days", "-k", "4", *extra)
        local = trishield(*args, "--kb", str(kb_dir), "--local")
        remote = trishield(*args, "--server", process.url, "--token", keys.reader)
        assert local.returncode == remote.returncode == 0, local.stderr + remote.stderr
        assert remote.stdout == local.stdout
    assert len(json.loads(remote.stdout)["results"]) == 4


def test_ask_prints_what_the_local_command_prints(server) -> None:
    process, keys, kb_dir = server
    args = ("ask", REFUND_QUESTION, "--panel", "extractive")
    local = trishield(*args, "--kb", str(kb_dir), "--local")
    remote = trishield(*args, "--server", process.url, env={"TRISHIELD_API_KEY": keys.reader})
    assert local.returncode == remote.returncode == 0, local.stderr + remote.stderr
    assert "Answer:" in remote.stdout and "Ring 1:" in remote.stdout
    assert CLOCK.sub("", remote.stdout) == CLOCK.sub("", local.stdout)
    local_tables = trishield(*args, "--trace", "--kb", str(kb_dir), "--local")
    remote_tables = trishield(*args, "--trace", "--server", process.url, "--token", keys.reader)
    assert "Context sent:" in remote_tables.stdout
    assert CLOCK.sub("", remote_tables.stdout) == CLOCK.sub("", local_tables.stdout)

    local_json = trishield(*args, "--json", "--kb", str(kb_dir), "--local")
    remote_json = trishield(*args, "--json", "--server", process.url, "--token", keys.reader)
    assert local_json.returncode == remote_json.returncode == 0
    assert without_clock(json.loads(remote_json.stdout)) == without_clock(
        json.loads(local_json.stdout))

    # the server exported a span per ask and per stage on its stderr (batched: give it time)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and '"name": "ring2"' not in "".join(process.stderr):
        time.sleep(0.5)
    spans = "".join(process.stderr)
    for name in ("trishield.ask", "retrieval", "ring1", "ring2", "answer"):
        assert f'"name": "{name}"' in spans
    assert '"trishield.key_id"' in spans and keys.reader not in spans  # the id, never the key


def test_every_server_failure_is_one_clear_line(server) -> None:
    process, keys, kb_dir = server
    unreachable = trishield("search", "refund", "--server", f"http://127.0.0.1:{free_port()}",
                            "--token", keys.reader)
    assert unreachable.returncode == 1
    assert "cannot reach the TriShield server" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr

    no_key = trishield("ask", "refund?", "--server", process.url)
    assert no_key.returncode == 2 and "needs an API key" in no_key.stderr

    refused = trishield("search", "refund", "--server", process.url, "--token", "wrong")
    assert refused.returncode == 2
    assert "refused the API key (HTTP 401)" in refused.stderr

    bad_request = trishield("search", "refund", "-k", "500", "--server", process.url,
                            "--token", keys.reader)
    assert bad_request.returncode == 2
    assert "refused the request (HTTP 422)" in bad_request.stderr and "k:" in bad_request.stderr

    unknown_member = trishield("ask", "refund?", "--panel", "nobody", "--server", process.url,
                               "--token", keys.reader)
    assert unknown_member.returncode == 2 and "unknown panel member" in unknown_member.stderr

    for args, message in [
        (("--kb", str(kb_dir), "--server", process.url), "exactly one of --kb"),
        ((), "exactly one of --kb"),
        (("--server", process.url, "--token", keys.reader, "--local"), "--local is for --kb"),
        (("--server", "ftp://host", "--token", keys.reader), "http:// or https:// URL"),
        (("--server", process.url, "--token", keys.reader, "--no-cache"), "--no-cache is for"),
    ]:
        done = trishield("ask", "refund?", *args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)


def test_a_streamed_answer_over_a_real_socket(server) -> None:
    process, keys, _ = server
    body = {"question": REFUND_QUESTION, "panel": ["extractive"], "stream": True}
    with httpx.stream("POST", f"{process.url}/v1/ask", json=body, headers=bearer(keys.reader),
                      timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    events = parse_events(text)
    assert [name for name, _ in events] == ["stage"] * 4 + ["answer", "trace"]
    plain = httpx.post(f"{process.url}/v1/ask", json=body | {"stream": False},
                       headers=bearer(keys.reader), timeout=120).json()
    assert without_clock(events[-1][1]) == without_clock(plain)


class _NotTriShield(BaseHTTPRequestHandler):
    """A web server that is not TriShield: JSON of another shape on /v1/ask, HTML elsewhere."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        if self.path == "/v1/ask":
            body, kind, status = b'{"hello": "world"}', "application/json", 200
        else:
            body, kind, status = b"<html>not here</html>", "text/html", 404
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_a_server_that_is_not_trishield_is_named_so() -> None:
    other = ThreadingHTTPServer(("127.0.0.1", 0), _NotTriShield)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{other.server_address[1]}"
    try:
        search = trishield("search", "refund", "--server", url, "--token", "t")
        ask = trishield("ask", "refund?", "--server", url, "--token", "t")
    finally:
        other.shutdown()
    assert search.returncode == 2 and "HTTP 404 with text/html, not TriShield's JSON" in \
        search.stderr
    assert ask.returncode == 1 and "a record this CLI cannot read" in ask.stderr
    assert "Traceback" not in search.stderr + ask.stderr


def _search_requests(url: str) -> float:
    """The server's count of answered /v1/search requests (its /metrics)."""
    total = 0.0
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("trishield_http_requests_total{") and '"/v1/search"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_kb_commands_find_the_server_running_over_the_kb(server) -> None:
    """The warm path by default: with a server of this user running over the KB and a key
    in the environment, `search --kb` and `ask --kb` are answered by it (same output as
    the local command); --local or a local-only option open the KB here."""
    from trishield.service.discovery import SERVER_FILE

    process, keys, kb_dir = server
    record = kb_dir / SERVER_FILE
    assert record.stat().st_mode & 0o777 == 0o600 and record.stat().st_uid == os.getuid()
    assert json.loads(record.read_text())["url"] == process.url
    args = ("search", "return an item within days", "-k", "4", "--json", "--kb", str(kb_dir))
    before = _search_requests(process.url)
    warm = trishield(*args, env={"TRISHIELD_API_KEY": keys.reader})
    assert warm.returncode == 0, warm.stderr
    assert f"answered by the server at {process.url}" in warm.stderr
    assert _search_requests(process.url) == before + 1
    local = trishield(*args, "--local", env={"TRISHIELD_API_KEY": keys.reader})
    assert local.returncode == 0 and "answered by the server" not in local.stderr
    assert local.stdout == warm.stdout and _search_requests(process.url) == before + 1

    question = ("ask", REFUND_QUESTION, "--kb", str(kb_dir), "--defense", "none", "--panel",
                "extractive", "--json")
    asked = trishield(*question, env={"TRISHIELD_API_KEY": keys.reader})
    assert asked.returncode == 0 and "answered by the server" in asked.stderr, asked.stderr
    here = trishield(*question, "--no-cache", env={"TRISHIELD_API_KEY": keys.reader})
    assert here.returncode == 0 and "answered by the server" not in here.stderr
    assert json.loads(asked.stdout)["answer"] == json.loads(here.stdout)["answer"]


def test_the_same_user_needs_no_key(server) -> None:
    """With no key at hand, `search --kb` and `ask --kb` use the server through its run's
    local key, read from the 0600 server file: a reader's rights only, its requests told
    apart from every API key's, and a key of the same form that is not this run's refused."""
    from trishield.service.discovery import SERVER_FILE

    process, _, kb_dir = server
    record = kb_dir / SERVER_FILE
    assert record.stat().st_mode & 0o777 == 0o600 and record.stat().st_uid == os.getuid()
    token = json.loads(record.read_text())["local_key"]
    assert re.fullmatch(r"tsl_[A-Za-z0-9_-]{43}", token)

    args = ("search", "return an item within days", "-k", "4", "--json", "--kb", str(kb_dir))
    before = _search_requests(process.url)
    keyless = trishield(*args)  # trishield() drops $TRISHIELD_API_KEY
    assert keyless.returncode == 0, keyless.stderr
    assert f"answered by the server at {process.url} with its local key" in keyless.stderr
    assert _search_requests(process.url) == before + 1
    here = trishield(*args, "--local")
    assert here.stdout == keyless.stdout and _search_requests(process.url) == before + 1
    question = ("ask", REFUND_QUESTION, "--kb", str(kb_dir), "--defense", "none", "--panel",
                "extractive", "--json")
    asked = trishield(*question)
    assert asked.returncode == 0 and "with its local key" in asked.stderr, asked.stderr
    assert json.loads(asked.stdout)["answer"] == json.loads(
        trishield(*question, "--local").stdout)["answer"]

    who = httpx.get(f"{process.url}/v1/whoami", headers=bearer(token), timeout=30).json()
    assert who["role"] == "reader" and who["name"] == f"local:uid{os.getuid()}"
    assert who["key_id"].startswith("local-")
    write = httpx.post(f"{process.url}/v1/documents", headers=bearer(token), timeout=30,
                       json={"id": "planted", "text": "Refunds take 365 days."})
    assert write.status_code == 403
    review = httpx.get(f"{process.url}/v1/quarantine", headers=bearer(token), timeout=30)
    assert review.status_code == 403
    forged = httpx.get(f"{process.url}/v1/whoami", headers=bearer("tsl_" + "A" * 43),
                       timeout=30)
    assert forged.status_code == 401 and "invalid local key" in forged.text
    counted = [line for line in httpx.get(f"{process.url}/metrics", timeout=30).text.splitlines()
               if line.startswith("trishield_local_key_requests_total ")]
    assert counted and float(counted[0].split()[1]) >= 5  # 2 CLI calls, whoami and the 403s


def test_a_stale_or_foreign_server_file_is_ignored(demo_kb_template: Path,
                                                   tmp_path: Path) -> None:
    """A file left by a killed server, or one others may write, sends nothing anywhere."""
    from trishield.service.discovery import SERVER_FILE, find

    kb_dir = copy_kb(demo_kb_template, tmp_path / "kb")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    path = kb_dir / SERVER_FILE
    path.write_text(json.dumps({"url": "http://127.0.0.1:9", "uid": os.getuid(),
                                "pid": int(dead.stdout)}))
    path.chmod(0o600)
    assert find(kb_dir) is None
    done = trishield("search", "refund", "--kb", str(kb_dir), env={"TRISHIELD_API_KEY": "k"})
    assert done.returncode == 0 and "server" not in done.stderr, done.stderr
    path.write_text(json.dumps({"url": "http://127.0.0.1:9", "uid": os.getuid(),
                                "pid": os.getpid()}))
    path.chmod(0o644)  # readable by others: not trusted, whatever it says
    assert find(kb_dir) is None


def test_the_server_file_goes_when_the_server_stops(demo_kb_template: Path,
                                                    tmp_path: Path) -> None:
    from trishield.service.discovery import SERVER_FILE, find

    kb_dir = copy_kb(demo_kb_template, tmp_path / "kb")
    process = ServerProcess(kb_dir)
    try:
        process.wait_ready()
        running = find(kb_dir)
        assert running is not None and running.url == process.url
        assert running.local_key is not None
    finally:
        process.stop()
    assert not (kb_dir / SERVER_FILE).exists()  # SIGTERM: uvicorn's shutdown removed it

    # the next run's key is its own: the last run's is refused; with --no-local-key there is
    # none, and a keyless CLI opens the KB here and says why
    again = ServerProcess(kb_dir, extra=("--no-local-key",))
    try:
        again.wait_ready()
        assert "local_key" not in json.loads((kb_dir / SERVER_FILE).read_text())
        assert find(kb_dir).local_key is None
        stale = httpx.get(f"{again.url}/v1/whoami", headers=bearer(running.local_key),
                          timeout=30)
        assert stale.status_code == 401
        keyless = trishield("search", "refund", "--kb", str(kb_dir))
        assert keyless.returncode == 0 and "without a local key" in keyless.stderr
        assert "answered by the server" not in keyless.stderr
    finally:
        again.stop()
