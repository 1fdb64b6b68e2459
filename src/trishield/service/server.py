"""``trishield serve``: one uvicorn process over one KB.

One process on purpose: the panel's models are loaded once per process (hundreds of MB each)
and the KB's indexes live in its memory, so horizontal scaling is by more machines, not more
workers on one. The embedder and indexes are loaded before the port opens, so ``/healthz``
answering means requests will be served at full speed.
"""

from __future__ import annotations

import uvicorn
from rich.console import Console

from trishield.service.app import create_app
from trishield.service.runtime import Runtime, ServiceConfig, freeze_startup_heap

MAX_HEADER_BYTES = 64 * 1024
"""The HTTP parser's own bound on an incomplete request head; the app refuses heads over
16 KiB with a 431 (:class:`trishield.service.http.BodyGuard`)."""


def serve(config: ServiceConfig, *, host: str, port: int, log_level: str = "info",
          console: Console | None = None) -> None:
    runtime = Runtime(config)
    runtime.warm_up()
    freeze_startup_heap()  # after start-up: no full collection walks it again
    app = create_app(config, runtime=runtime)
    if console is not None:
        keys = [k for k in runtime.keys.api_keys() if k.revoked_at is None]
        console.print(f"TriShield service over {config.kb_dir}: http://{host}:{port}/ "
                      f"(viewer /viewer/, OpenAPI /docs, metrics /metrics); "
                      f"{len(keys)} active API key(s)")
        if not keys:
            console.print("[yellow]no API keys yet:[/] every /v1 request will get 401; "
                          f"create one with `trishield keys create NAME --role admin "
                          f"--kb {config.kb_dir}`")
    uvicorn.run(app, host=host, port=port, log_level=log_level, http="h11",
                h11_max_incomplete_event_size=MAX_HEADER_BYTES, server_header=False,
                timeout_keep_alive=5, access_log=log_level == "debug")
