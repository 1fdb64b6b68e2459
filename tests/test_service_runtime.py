"""The service's start-up heap freeze (``trishield.service.runtime.freeze_startup_heap``):
what is alive at start-up leaves the collector's view, what requests allocate later does not,
and ``trishield serve`` freezes after its warm-up and before the port opens."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service_support import copy_kb
from trishield.service import server
from trishield.service.runtime import ServiceConfig, freeze_startup_heap


def _collector_sees(target: object) -> bool:
    return any(found is target for found in gc.get_objects())


def test_the_freeze_hides_what_lives_now_and_not_what_comes_later() -> None:
    started = [[] for _ in range(100)]  # tracked containers alive at "start-up"
    assert _collector_sees(started[0])
    try:
        frozen = freeze_startup_heap()
        later: list[object] = []
        # Frozen objects may still die (a thread another test left running frees its own),
        # but none joins the frozen set until the next freeze: the count can only fall.
        assert len(started) <= gc.get_freeze_count() <= frozen
        assert not _collector_sees(started[0])  # never traversed by a collection again
        assert _collector_sees(later)  # a request's objects are collected as before
    finally:
        gc.unfreeze()


def test_serve_freezes_after_warm_up_and_before_the_port_opens(
        demo_kb_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb_dir = copy_kb(demo_kb_template, tmp_path / "kb")
    seen: dict[str, int] = {}

    def listen(self: server.GuardedServer, sockets: object = None) -> None:
        """Where the port would open; start-up and shut-down close the runtime's handles."""
        seen["frozen"] = gc.get_freeze_count()
        with TestClient(self.config.app):
            pass
        self.started = True

    monkeypatch.setattr(server.GuardedServer, "run", listen)
    gc.unfreeze()
    try:
        server.serve(ServiceConfig(kb_dir=kb_dir), host="127.0.0.1", port=0)
    finally:
        gc.unfreeze()
    assert seen["frozen"] > 0
