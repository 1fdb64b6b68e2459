"""``trishield serve``: one uvicorn process over one KB.

One process on purpose: the panel's models are loaded once per process (hundreds of MB each)
and the KB's indexes live in its memory, so horizontal scaling is by more machines, not more
workers on one. The embedder and indexes are loaded before the port opens, so ``/healthz``
answering means requests will be served at full speed. Connections are bounded in number and
time (:mod:`trishield.service.connections`), before the file descriptors run out.
"""

from __future__ import annotations

import contextlib

import uvicorn
from rich.console import Console

from trishield.service.app import create_app
from trishield.service.connections import (
    ConnectionGuard,
    GuardedServer,
    connection_bound,
    guarded_protocol,
    listen_backlog,
    raise_descriptor_limit,
)
from trishield.service.discovery import announce, url_for, withdraw
from trishield.service.local_key import LocalKey
from trishield.service.runtime import Runtime, ServiceConfig, freeze_startup_heap

STARTUP_FAILURE = 3
"""The exit status when the port cannot be opened (uvicorn's own)."""
MAX_HEADER_BYTES = 64 * 1024
"""The HTTP parser's own bound on an incomplete request head; the app refuses heads over
16 KiB with a 431 (:class:`trishield.service.http.BodyGuard`)."""


def serve(config: ServiceConfig, *, host: str, port: int, log_level: str = "info",
          console: Console | None = None, local_key: bool = True) -> None:
    """Serve ``config`` until stopped. The connection bound is worked out from the open-files
    limit before anything is loaded, so a limit too small fails at once. ``local_key``: issue
    this run's local key (a reader's, in the 0600 server file: :mod:`.local_key`), so that
    the same user's ``ask``/``search --kb`` need no API key."""
    descriptors = raise_descriptor_limit()
    backlog = listen_backlog(descriptors)
    limits = config.settings.service
    max_connections = connection_bound(limits.max_connections, descriptors=descriptors,
                                       backlog=backlog, handles=config.workers + 2)
    runtime = Runtime(config)
    token = None
    if local_key:
        runtime.local_key, token = LocalKey.issue()
    runtime.warm_up()
    freeze_startup_heap()  # after start-up: no full collection walks it again
    app = create_app(config, runtime=runtime)
    guard = ConnectionGuard(max_connections=max_connections,
                            header_timeout_s=limits.header_timeout_s,
                            body_timeout_s=limits.body_timeout_s, metrics=runtime.metrics)
    if console is not None:
        keys = [k for k in runtime.keys.api_keys() if k.revoked_at is None]
        console.print(f"TriShield service over {config.kb_dir}: http://{host}:{port}/ "
                      f"(viewer /viewer/, OpenAPI /docs, metrics /metrics); "
                      f"{len(keys)} active API key(s)")
        bounded = ("" if max_connections == limits.max_connections else
                   f" (lowered from {limits.max_connections:,}: the process may open "
                   f"{descriptors:,} files)")
        console.print(f"limits: {max_connections:,} connections{bounded}, request head "
                      f"within {limits.header_timeout_s:g} s, body within "
                      f"{limits.body_timeout_s:g} s; {config.max_concurrent_asks} asks at "
                      f"once, {limits.asks_per_key} per key, {limits.ask_queue} waiting")
        if runtime.local_key is not None:
            console.print(f"local key {runtime.local_key.identity.key_id} (reader, this user "
                          f"only, loopback only): `trishield ask/search --kb "
                          f"{config.kb_dir}` use this server without an API key")
        if not keys:
            console.print("[yellow]no API keys yet:[/] other /v1 requests will get 401; "
                          f"create one with `trishield keys create NAME --role admin "
                          f"--kb {config.kb_dir}`")
    server_config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, http=guarded_protocol(guard),
        loop="auto",  # uvloop where installed (a dependency on Linux and macOS)
        ws="none",  # no WebSocket routes: an upgrade would leave the connection guard's count
        h11_max_incomplete_event_size=MAX_HEADER_BYTES, server_header=False,
        timeout_keep_alive=limits.keep_alive_s,  # type: ignore[arg-type]  # seconds, float
        backlog=backlog, access_log=log_level == "debug")
    # once the port is open, the KB directory says where: `trishield ask/search --kb` then
    # uses this server (trishield.service.discovery); the file goes when the server stops
    def announce_here(bound: int) -> None:
        # a KB served read-only (a read-only mount, another user's directory) still serves:
        # only the warm path of `trishield ask/search --kb` is off, and the operator is told
        try:
            announce(config.kb_dir, url_for(host, bound), token)
        except OSError as error:
            console.print(f"[yellow]cannot write the server file in {config.kb_dir}[/] "
                          f"({error.strerror or error}): `trishield ask/search --kb` will not "
                          "find this server; use --server")

    server = GuardedServer(server_config, metrics=runtime.metrics, on_started=announce_here,
                           on_stopped=lambda: withdraw(config.kb_dir))
    try:
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises Ctrl-C again at its end
            server.run()
    finally:
        withdraw(config.kb_dir)
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)
