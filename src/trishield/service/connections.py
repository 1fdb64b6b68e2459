"""Connections bounded in number and in time, so no client can use up the file descriptors.

What an attacker without a key did to the bare uvicorn server: opened ~21,000 connections
that sent a request head a byte at a time, or nothing at all. uvicorn's h11 protocol has a
keep-alive timeout but none for a request head, so every one of them was held for ever; the
process ran out of file descriptors, ``/healthz`` timed out and asyncio logged a traceback for
every failed ``accept()``. Here:

* **Time.** A connection must send a complete request head within ``header_timeout_s`` of
  its opening (or of the end of its previous response), and, once the head is in, its whole
  body within ``body_timeout_s``; otherwise it is closed. The clock is not reset by each byte:
  a head sent a byte a second is as late as one never sent. Idle keep-alive connections close
  after ``keep_alive_s`` (uvicorn's own timer). A request whose body is in has no time limit
  here: an ask may take minutes, and bounding it is the ask queue's job.
* **Number.** At most ``max_connections`` are open; at start the process's soft limit on
  open files is raised to its hard limit and the bound lowered, if need be, to what that
  leaves after the files the service itself needs and the listen backlog
  (:func:`connection_bound`). At the bound a new connection is kept and the one that has
  waited longest for its request head is closed (the connections a slowloris holds are
  exactly those); only when every open connection is busy with a request does the new one
  get a 503 and close. So a real client still gets through a flood of idle connections.
* **Quiet.** Connections closed for these reasons are counted in ``/metrics``
  (``trishield_connections_closed``) and summed up in one log line a minute, never one line
  (let alone a traceback) each; ``accept()`` failing for want of descriptors is counted and
  logged the same way (:func:`quiet_accept_errors`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from trishield.errors import InputError
from trishield.service.metrics import ServiceMetrics

log = logging.getLogger("trishield.service")
RESERVED_FDS = 256
"""Descriptors kept for the service's own files: SQLite databases and their journals (three
per KB handle, counted apart), model files, pipes, the log."""
MIN_CONNECTIONS = 16
SUMMARY_EVERY_S = 60.0
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_REFUSAL_BODY = (b'{"error": "the server has as many connections as it serves; retry", '
                 b'"status": 503, "details": []}')
REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
           b"retry-after: 5\r\nconnection: close\r\ncontent-length: "
           + str(len(_REFUSAL_BODY)).encode() + b"\r\n\r\n" + _REFUSAL_BODY)


def raise_descriptor_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; the new soft limit.

    The soft limit is often 1,024 where the hard one is far higher: a server that keeps the
    soft one turns away clients while it could serve them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # a platform that refuses: keep what we have
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft


def listen_backlog(descriptors: int) -> int:
    """The listen backlog: asyncio accepts up to this many connections in one go, each a
    descriptor before the bound can see it, so it is part of the headroom."""
    return max(16, min(2048, descriptors // 8))


def connection_bound(requested: int, *, descriptors: int, backlog: int, handles: int) -> int:
    """``requested``, lowered to what ``descriptors`` leave after the backlog, the service's
    own files and three per KB handle (a database, its WAL and its shared memory);
    :class:`InputError` when that leaves fewer than ``MIN_CONNECTIONS``."""
    available = descriptors - backlog - RESERVED_FDS - 3 * handles
    if available < MIN_CONNECTIONS:
        raise InputError(f"this process may open only {descriptors:,} files (ulimit -n), too "
                         f"few to serve {MIN_CONNECTIONS} connections: raise the limit to at "
                         f"least {descriptors - available + MIN_CONNECTIONS:,}")
    return min(requested, available)


class ConnectionGuard:
    """The open connections of one server, oldest waiting for a request head first."""

    def __init__(self, *, max_connections: int, header_timeout_s: float, body_timeout_s: float,
                 metrics: ServiceMetrics):
        self.max_connections = max_connections
        self.header_timeout_s, self.body_timeout_s = header_timeout_s, body_timeout_s
        self.metrics = metrics
        self.open: set[GuardedH11Protocol] = set()
        # oldest first; an OrderedDict because a dict emptied from the front makes each
        # next(iter()) skip every entry deleted before it, until the next resize
        self.waiting: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        self._closed: Counter[str] = Counter()
        self._next_summary = 0.0
        metrics.connections_limit.set(max_connections)

    def opened(self, connection: GuardedH11Protocol) -> bool:
        """Admit ``connection``; at the bound, close the oldest one waiting for a head, or,
        if none is, refuse this one with a 503 (False)."""
        self.open.add(connection)
        if len(self.open) > self.max_connections:
            victim = next(iter(self.waiting), None)
            if victim is None:
                self.open.discard(connection)
                self.closing(connection, "refused")
                connection.transport.write(REFUSAL)
                connection.transport.close()
                return False
            self.forget(victim)
            self.closing(victim, "evicted")
            victim.transport.abort()
        self.metrics.connections_open.set(len(self.open))
        return True

    def wait_for_head(self, connection: GuardedH11Protocol) -> None:
        self.waiting[connection] = None
        self.waiting.move_to_end(connection)

    def busy(self, connection: GuardedH11Protocol) -> None:
        self.waiting.pop(connection, None)

    def forget(self, connection: GuardedH11Protocol) -> None:
        self.open.discard(connection)
        self.waiting.pop(connection, None)
        self.metrics.connections_open.set(len(self.open))

    def closing(self, connection: GuardedH11Protocol, reason: str) -> None:
        """Count a connection the server closes on its own; one summary line a minute."""
        self.metrics.connections_closed.labels(reason).inc()
        self._closed[reason] += 1
        now = time.monotonic()
        if now >= self._next_summary:
            first = self._next_summary == 0.0
            self._next_summary = now + SUMMARY_EVERY_S
            why = {"header_timeout": f"no request head within {self.header_timeout_s:g} s",
                   "body_timeout": f"no whole body within {self.body_timeout_s:g} s",
                   "evicted": "the oldest idle one at the limit",
                   "refused": "503, at the limit with none idle"}
            counts = "; ".join(f"{n:,} {why[reason]}" for reason, n in
                               sorted(self._closed.items()))
            since = "" if first else " since the previous such line"
            log.warning("closed %s connection(s)%s: %s; %s open of at most %s",
                        f"{sum(self._closed.values()):,}", since, counts,
                        f"{len(self.open):,}", f"{self.max_connections:,}")
            self._closed.clear()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head and body and a share of
    :class:`ConnectionGuard`'s bound (:func:`guarded_protocol` binds the guard)."""

    guard: ClassVar[ConnectionGuard]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        self._phase = "new"
        super().connection_made(transport)
        if self.guard.opened(self):
            self._wait_for_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request
        if not self.transport.is_closing():
            self._wait_for_head()
            self._follow()

    def _wait_for_head(self) -> None:
        self._phase = "head"
        self.guard.wait_for_head(self)
        self._arm(self.guard.header_timeout_s, "header_timeout")

    def _follow(self) -> None:
        """After the parser ran: a head that arrived starts the body's clock, a body that
        arrived stops it. A partial head changes nothing: its clock runs on."""
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return
        if self.conn.their_state is h11.SEND_BODY:
            if self._phase != "body":
                self._phase = "body"
                self.guard.busy(self)
                self._arm(self.guard.body_timeout_s, "body_timeout")
        elif self._phase != "app":
            self._phase = "app"
            self.guard.busy(self)
            self._disarm()

    def _arm(self, seconds: float, reason: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expire, reason)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, reason: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self.guard.forget(self)
        self.guard.closing(self, reason)
        self.transport.abort()  # nothing worth sending: the client is not sending either


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """A protocol class bound to ``guard`` (uvicorn builds protocols from a class)."""
    return type("TriShieldH11Protocol", (GuardedH11Protocol,), {"guard": guard})


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, metrics: ServiceMetrics) -> None:
    """Count ``accept()`` failing for want of descriptors or memory, and log it one line a
    minute without a traceback (asyncio's default logs a traceback each time, thousands a
    minute under a flood); every other loop error goes to the handler there was."""
    previous = loop.get_exception_handler()
    state = {"next": 0.0, "count": 0}

    def handler(current: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, OSError) and error.errno in _OUT_OF_RESOURCES:
            metrics.accept_errors.inc()
            state["count"] += 1
            now = time.monotonic()
            if now >= state["next"]:
                state["next"] = now + SUMMARY_EVERY_S
                log.warning("could not accept %d connection(s) since the last such line: %s; "
                            "raise the open files limit (ulimit -n) or lower max_connections",
                            state["count"], error.strerror)
                state["count"] = 0
            return
        if previous is not None:
            previous(current, context)
        else:
            current.default_exception_handler(context)

    loop.set_exception_handler(handler)


class GuardedServer(uvicorn.Server):
    """uvicorn's server, with :func:`quiet_accept_errors` installed on its loop."""

    def __init__(self, config: uvicorn.Config, *, metrics: ServiceMetrics,
                 on_started: Callable[[int], None] | None = None,
                 on_stopped: Callable[[], None] | None = None):
        super().__init__(config)
        self._metrics = metrics
        self._on_started = on_started
        self._on_stopped = on_stopped

    async def startup(self, sockets: list[Any] | None = None) -> None:
        quiet_accept_errors(asyncio.get_running_loop(), self._metrics)
        await super().startup(sockets=sockets)
        if self.started and self._on_started is not None:  # the port is open: say where
            bound = [s.getsockname()[1] for server in self.servers for s in server.sockets]
            self._on_started(bound[0] if bound else self.config.port)

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        # here, not after run(): uvicorn re-raises a caught SIGTERM once run() ends, which
        # kills the process before any code after it
        try:
            await super().shutdown(sockets=sockets)
        finally:
            if self._on_stopped is not None:
                self._on_stopped()
