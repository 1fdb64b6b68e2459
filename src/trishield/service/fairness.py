"""Asks shared fairly between API keys, on threads of their own.

An ask holds a CPU-bound model for seconds to minutes, so only ``slots`` run at once. Before
this gate an ask that waited for its slot waited *on a request thread*: FastAPI runs plain
routes on anyio's pool of 40 threads, so 80 asks from one reader filled the pool with waiting
asks, and every other key's cheap request (``GET /v1/whoami``: microseconds of work) queued
behind them for 25 s. Now:

* an ask waits for its slot on the event loop (a future, no thread), and runs on the gate's
  own executor of ``slots`` threads, so the request threads stay free for cheap requests;
* one key may have at most ``per_key`` asks admitted (running or waiting); more get 429 with
  ``Retry-After`` at once, so one key cannot fill the queue;
* waiting asks are granted slots key by key in turn (round robin), not first come first
  served: a key that queued one ask behind another key's four waits for at most one of them;
* at most ``queue_limit`` asks wait, all keys together, each at most ``wait_s``; beyond
  either the answer is 503 with ``Retry-After`` (:class:`~trishield.errors.BusyError`).

``Retry-After`` is the gate's estimate of when a slot frees: the running mean duration of an
ask times the asks ahead, divided by the slots, at least one second.

Searches cost milliseconds, so they need no queue, only a share: :class:`KeyShare` lets one
key have at most ``searches_per_key`` in flight and answers 429 to the next at once, so one
key's burst of searches cannot fill the request threads either.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from trishield.errors import BusyError

_T = TypeVar("_T")
_SMOOTHING = 0.2
"""Weight of the newest ask in the running mean of ask durations."""


class KeyOverShare(BusyError):
    """This key already has its share of asks admitted: HTTP 429 with ``Retry-After``."""


class Slot:
    """One admitted ask's slot; :meth:`release` (from any thread, once) gives it back."""

    def __init__(self, gate: AskGate, key: str, loop: asyncio.AbstractEventLoop):
        self._gate, self.key, self._loop = gate, key, loop
        self._released = False
        self._lock = threading.Lock()
        self.started = time.monotonic()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._gate.finished(self, time.monotonic() - self.started)
        # a closed loop (shutdown) has nobody waiting any more
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._gate._grant)


class KeyShare:
    """At most ``limit`` requests of one kind in flight per key; one more is refused at once
    (:class:`KeyOverShare`), never queued. Thread-safe: used from the request threads."""

    def __init__(self, limit: int, what: str):
        self.limit, self.what = limit, what
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}

    @contextlib.contextmanager
    def held(self, key: str) -> Iterator[None]:
        with self._lock:
            count = self._in_flight.get(key, 0)
            if count >= self.limit:
                raise KeyOverShare(f"this key already has {count} {self.what} in progress, its "
                                   f"share (the server allows {self.limit} per key); retry "
                                   "when one has answered", retry_after=1)
            self._in_flight[key] = count + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._in_flight[key] - 1
                if left:
                    self._in_flight[key] = left
                else:
                    del self._in_flight[key]


class AskGate:
    """Admission of asks: ``slots`` running, ``per_key`` per key, ``queue_limit`` waiting."""

    def __init__(self, *, slots: int, per_key: int, queue_limit: int, wait_s: float):
        self.slots, self.per_key = slots, per_key
        self.queue_limit, self.wait_s = queue_limit, wait_s
        self._lock = threading.Lock()  # releases come from executor threads
        self._running = 0
        self._admitted: dict[str, int] = {}
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._turns: deque[str] = deque()  # keys with waiters, in the order of their turns
        self._mean_s = 1.0
        self.executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="trishield-ask")

    @property
    def waiting(self) -> int:
        with self._lock:
            return sum(len(queue) for queue in self._waiting.values())

    def retry_after(self) -> int:
        """Seconds until a slot is likely free for one more ask."""
        ahead = self._running + sum(len(queue) for queue in self._waiting.values())
        return max(1, math.ceil(self._mean_s * max(1, ahead) / self.slots))

    async def admit(self, key: str) -> Slot:
        """A slot for one ask of ``key``; :class:`KeyOverShare` (429) when the key has its
        share admitted, :class:`BusyError` (503) when the queue is full or the wait ends."""
        loop = asyncio.get_running_loop()
        with self._lock:
            admitted = self._admitted.get(key, 0)
            if admitted >= self.per_key:
                raise KeyOverShare(f"this key already has {admitted} asks running or waiting, "
                                   f"its share (the server allows {self.per_key} per key); "
                                   "retry when one has answered",
                                   retry_after=self.retry_after())
            if self._running < self.slots and not self._turns:
                self._running += 1
                self._admitted[key] = admitted + 1
                return Slot(self, key, loop)
            queued = sum(len(queue) for queue in self._waiting.values())
            if queued >= self.queue_limit:
                raise BusyError(f"{self.slots} asks are running and {queued} waiting, the "
                                "most the server queues; retry later",
                                retry_after=self.retry_after())
            turn: asyncio.Future[None] = loop.create_future()
            self._waiting.setdefault(key, deque()).append(turn)
            if key not in self._turns:
                self._turns.append(key)
            self._admitted[key] = admitted + 1
        try:
            await asyncio.wait({turn}, timeout=self.wait_s)
        except BaseException:  # cancelled while waiting: give back whatever it holds
            self._abandon(key, turn, loop)
            raise
        if turn.done() and not turn.cancelled():
            return Slot(self, key, loop)
        self._abandon(key, turn, loop)
        raise BusyError(f"{self.slots} asks stayed in progress for {self.wait_s:g} s; retry "
                        "later", retry_after=self.retry_after())

    def _abandon(self, key: str, turn: asyncio.Future[None],
                 loop: asyncio.AbstractEventLoop) -> None:
        """A waiter that gives up: out of the queue, or, if its turn came meanwhile, the slot
        it was granted is released."""
        with self._lock:
            granted = turn.done() and not turn.cancelled()
            if not granted:
                turn.cancel()
                queue = self._waiting.get(key)
                if queue is not None and turn in queue:
                    queue.remove(turn)
                    if not queue:
                        del self._waiting[key]
                        self._turns.remove(key)
                self._forget(key)
        if granted:
            Slot(self, key, loop).release()

    def _forget(self, key: str) -> None:
        left = self._admitted[key] - 1
        if left:
            self._admitted[key] = left
        else:
            del self._admitted[key]

    def finished(self, slot: Slot, seconds: float) -> None:
        with self._lock:
            self._running -= 1
            self._forget(slot.key)
            self._mean_s += _SMOOTHING * (seconds - self._mean_s)

    def _grant(self) -> None:
        """On the event loop: give free slots to waiters, one key's turn after another."""
        with self._lock:
            while self._running < self.slots and self._turns:
                key = self._turns.popleft()
                queue = self._waiting[key]
                turn = queue.popleft()
                if queue:
                    self._turns.append(key)
                else:
                    del self._waiting[key]
                self._running += 1
                turn.set_result(None)

    async def run(self, slot: Slot, work: Callable[[], _T], *, keep: bool = False) -> _T:
        """``work()`` on the gate's executor; ``slot`` is released when it ends unless
        ``keep`` (a streamed answer hands the slot to its stream, which releases it)."""

        def job() -> _T:
            try:
                return work()
            except BaseException:
                slot.release()
                raise
            finally:
                if not keep:
                    slot.release()

        try:
            future = asyncio.get_running_loop().run_in_executor(self.executor, job)
        except BaseException:
            slot.release()
            raise
        return await future

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
