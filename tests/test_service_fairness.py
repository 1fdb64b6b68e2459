"""The ask gate on its own (:mod:`trishield.service.fairness`): shares, turns, waits, and that
no slot is lost when a waiter gives up. ``test_service_limits.py`` checks the same through the
real server."""

from __future__ import annotations

import asyncio
import threading

import pytest

from trishield.errors import BusyError
from trishield.service.fairness import AskGate, KeyOverShare, KeyShare


def _gate(**overrides: float) -> AskGate:
    options = {"slots": 1, "per_key": 3, "queue_limit": 10, "wait_s": 5.0} | overrides
    return AskGate(**options)  # type: ignore[arg-type]


def test_a_key_beyond_its_share_gets_429_with_retry_after() -> None:
    async def scenario() -> None:
        gate = _gate(slots=2, per_key=2)
        first, second = await gate.admit("a"), await gate.admit("a")
        with pytest.raises(KeyOverShare) as refused:
            await gate.admit("a")
        assert refused.value.retry_after >= 1 and "share" in str(refused.value)
        other = asyncio.create_task(gate.admit("b"))  # another key is not refused: it waits
        await asyncio.sleep(0.05)
        assert not other.done()
        first.release()
        (await other).release()
        second.release()

    asyncio.run(scenario())


def test_waiting_asks_take_turns_key_by_key() -> None:
    """Key a queues four asks before key b queues one: b's ask runs second, not fifth."""

    async def scenario() -> list[str]:
        gate = _gate(per_key=5)
        order: list[str] = []
        running = await gate.admit("a")

        async def ask(key: str) -> None:
            slot = await gate.admit(key)
            order.append(key)
            await asyncio.sleep(0.01)
            slot.release()

        tasks = [asyncio.create_task(ask("a")) for _ in range(4)]
        await asyncio.sleep(0.05)
        tasks.append(asyncio.create_task(ask("b")))
        await asyncio.sleep(0.05)
        running.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["a", "b", "a", "a", "a"]


def test_a_full_queue_and_a_long_wait_are_503() -> None:
    async def scenario() -> None:
        gate = _gate(queue_limit=1, wait_s=0.2)
        held = await gate.admit("a")
        waiting = asyncio.create_task(gate.admit("b"))
        await asyncio.sleep(0.05)
        with pytest.raises(BusyError) as full:
            await gate.admit("c")
        assert not isinstance(full.value, KeyOverShare) and "waiting" in str(full.value)
        with pytest.raises(BusyError) as late:
            await waiting
        assert "0.2 s" in str(late.value)
        held.release()
        (await gate.admit("c")).release()  # the slot and the queue place came back

    asyncio.run(scenario())


def test_a_waiter_that_is_cancelled_gives_back_its_place() -> None:
    async def scenario() -> None:
        gate = _gate()
        held = await gate.admit("a")
        waiter = asyncio.create_task(gate.admit("b"))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert gate.waiting == 0
        held.release()
        await asyncio.sleep(0)
        slot = await asyncio.wait_for(gate.admit("b"), 1.0)  # b's share is whole again
        slot.release()

    asyncio.run(scenario())


def test_work_runs_on_the_gate_threads_and_releases_its_slot() -> None:
    async def scenario() -> tuple[str, str]:
        gate = _gate()
        slot = await gate.admit("a")
        name = await gate.run(slot, lambda: threading.current_thread().name)
        again = await asyncio.wait_for(gate.admit("a"), 1.0)  # released after the work
        with pytest.raises(ValueError):
            await gate.run(again, lambda: int("not a number"))
        last = await asyncio.wait_for(gate.admit("a"), 1.0)  # released after a failure too
        kept = await gate.run(last, lambda: "kept", keep=True)
        assert gate.retry_after() >= 1
        blocked = asyncio.create_task(gate.admit("b"))
        await asyncio.sleep(0.05)
        assert not blocked.done()  # kept: the slot is still held
        last.release()
        (await blocked).release()
        gate.close()
        return name, kept

    name, kept = asyncio.run(scenario())
    assert name.startswith("trishield-ask") and kept == "kept"


def test_a_share_refuses_the_key_beyond_it_at_once_and_frees_on_exit() -> None:
    share = KeyShare(2, "searches")
    with share.held("a"), share.held("a"):
        with pytest.raises(KeyOverShare) as refused, share.held("a"):
            pass
        assert "2 searches" in str(refused.value) and refused.value.retry_after >= 1
        with share.held("b"):  # another key has its own share
            pass
    with share.held("a"), share.held("a"):  # both came back, after an error too
        pass
    with pytest.raises(ValueError), share.held("a"):
        raise ValueError("the search failed")
    with share.held("a"), share.held("a"):
        pass
