"""The service's one writer: a single thread that runs every write, with a bounded backlog.

Why a thread of its own: a write holds the KB's lock while it embeds (seconds per hundred
thousand characters), and writes are serialised anyway. Run on the request thread pool, each
waiting write held one of its threads, so a writer posting in a loop could take every thread
and starve searches, asks and ``/healthz``. Here the routes that write are coroutines that hand
the work to this thread and ``await`` it, so a waiting write holds no thread at all, and:

* at most ``backlog`` writes wait behind the running one; the next is refused at once with
  :class:`~trishield.errors.BusyError` (503 + ``Retry-After``);
* a write that has waited ``wait_s`` seconds for its turn is not started (nothing written,
  503): the client has most likely given up, and the writer moves on;
* what one write may cost is bounded by the body size limit and the KB's write time limit.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from trishield.errors import BusyError

T = TypeVar("T")


class WriteQueue:
    """One writer thread; ``run`` queues a job and waits for it without holding a thread."""

    def __init__(self, *, backlog: int, wait_s: float):
        self.backlog = backlog
        self.wait_s = wait_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trishield-writer")
        self._slots = threading.BoundedSemaphore(backlog + 1)  # the running write + the backlog

    def submit(self, job: Callable[[], T]) -> Future[T]:
        """Queue ``job``; :class:`BusyError` at once when the backlog is full."""
        if not self._slots.acquire(blocking=False):
            raise BusyError(f"{self.backlog} writes are already waiting for the writer; "
                            "nothing was written", retry_after=max(1, round(self.wait_s / 3)))
        queued = time.monotonic()

        def guarded() -> T:
            waited = time.monotonic() - queued
            if waited > self.wait_s:
                raise BusyError(f"the write waited {waited:.0f} s for its turn (limit "
                                f"{self.wait_s:g} s) and was not started; nothing was written",
                                retry_after=max(1, round(self.wait_s / 3)))
            return job()

        try:
            future = self._executor.submit(guarded)
        except RuntimeError:  # shut down
            self._slots.release()
            raise BusyError("the service is shutting down; nothing was written") from None
        future.add_done_callback(lambda _: self._slots.release())  # cancelled ones too
        return future

    async def run(self, job: Callable[[], T]) -> T:
        return await asyncio.wrap_future(self.submit(job))

    def serialised(self, route: Callable[..., T]) -> Callable[..., Awaitable[T]]:
        """A FastAPI route (a plain function) as a coroutine that runs it on the writer thread.
        The signature is kept (``functools.wraps``), so FastAPI still resolves its parameters
        and dependencies (authentication runs before the write is queued)."""

        @functools.wraps(route)
        async def on_writer(*args: Any, **kwargs: Any) -> T:
            return await self.run(functools.partial(route, *args, **kwargs))

        return on_writer

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
