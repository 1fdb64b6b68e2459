"""Streamed answers (``"stream": true``) through the real app, KB and extractive reader.

The events come in pipeline order, the closing ``trace`` event is the non-streamed response,
authentication and validation fail exactly as without streaming, and a question that fails on
the way (a real remote panel member whose port is closed) ends in an ``error`` event carrying
the body the non-streamed request gets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service_support import REFUND_QUESTION, Keys, bearer, copy_kb, free_port
from trishield.service.app import create_app
from trishield.service.runtime import ServiceConfig
from trishield.settings import Settings

ASK = {"question": REFUND_QUESTION, "panel": ["extractive"]}


def parse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Server-sent events as (event, data); comment lines (keep-alives) are skipped."""
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        assert set(fields) == {"event", "data"}, block
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def without_clock(value: Any) -> Any:
    """``value`` without what the clock decides (timings, seconds per call)."""
    if isinstance(value, dict):
        return {k: without_clock(v) for k, v in value.items() if k not in ("timings_s",
                                                                          "seconds")}
    if isinstance(value, list):
        return [without_clock(v) for v in value]
    return value


@pytest.fixture(scope="module")
def served(demo_kb_template: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[TestClient, Keys]]:
    kb_dir = copy_kb(demo_kb_template, tmp_path_factory.mktemp("stream") / "kb")
    keys = Keys.create(kb_dir)
    config = ServiceConfig(kb_dir=kb_dir, allowed_members=("extractive",))
    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        yield client, keys


def _stream(client: TestClient, token: str | None, **body: object):
    headers = bearer(token) if token else {}
    return client.post("/v1/ask", headers=headers, json=ASK | {"stream": True} | body)


@pytest.mark.parametrize("defense, stages", [
    ("full", ["retrieval", "ring1", "ring2", "answer"]),
    ("ring1", ["retrieval", "ring1", "answer"]),
    ("none", ["retrieval", "answer"]),
])
def test_events_follow_the_stages_and_end_with_the_non_streamed_response(
        served, defense: str, stages: list[str]) -> None:
    client, keys = served
    streamed = _stream(client, keys.reader, defense=defense)
    assert streamed.status_code == 200, streamed.text
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.headers["cache-control"] == "no-cache"
    events = parse_events(streamed.text)
    names = [name for name, _ in events]
    assert names == ["stage"] * len(stages) + ["answer", "trace"]
    assert [data["stage"] for name, data in events if name == "stage"] == stages

    plain = client.post("/v1/ask", headers=bearer(keys.reader), json=ASK | {"defense": defense})
    assert plain.status_code == 200
    expected = plain.json()
    final = events[-1][1]
    assert without_clock(final) == without_clock(expected)
    assert set(final["trace"]["timings_s"]) == set(expected["trace"]["timings_s"])
    answer = events[-2][1]
    assert answer == {k: expected[k] for k in ("answer", "refused", "reason", "citations")}

    # each stage's part is what it wrote: together they rebuild the final trace's sections
    rebuilt: dict[str, Any] = {}
    for _, data in events[:len(stages)]:
        rebuilt.update(data["part"])
    decided = {k: v for k, v in final["trace"].items()
               if k not in ("timings_s", "calls", "llm_calls", "llm_calls_cached", "tokens")
               and not (k == "details" and v == {})}  # listed, empty, when the question ends
    initial = {"version", "question", "defense", "backend", "k", "panel", "rings"}
    assert {k: v for k, v in decided.items() if k not in initial} == rebuilt
    retrieval = events[0][1]
    assert retrieval["role"] == "retrieve" and retrieval["candidates_out"] == len(
        final["trace"]["candidates"]) > 0
    assert set(retrieval["part"]) == {"pool", "candidates"}
    if "ring1" in stages:
        ring1 = events[1][1]
        assert set(ring1["part"]) >= {"ring1"}
        assert ring1["candidates_in"] - ring1["candidates_out"] == len(
            final["trace"]["ring1"]["blocked"])


def test_the_stream_is_counted_in_the_metrics(served) -> None:
    client, keys = served

    def asks() -> float:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith('trishield_queries_total{defense="full",kind="ask"}'):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    before = asks()
    assert _stream(client, keys.reader).status_code == 200
    assert asks() == before + 1


def test_streaming_needs_the_same_key_and_validation(served) -> None:
    client, keys = served
    missing = _stream(client, None)
    assert missing.status_code == 401 and "missing API key" in missing.json()["error"]
    assert missing.headers["content-type"] == "application/json"
    wrong = _stream(client, "not-a-key")
    assert wrong.status_code == 401
    unknown_member = _stream(client, keys.reader, panel=["nobody"])
    assert unknown_member.status_code == 422
    assert "unknown panel member" in unknown_member.json()["error"]
    not_a_bool = client.post("/v1/ask", headers=bearer(keys.reader),
                             json=ASK | {"stream": "yes"})
    assert not_a_bool.status_code == 422 and not_a_bool.json()["details"][0]["field"] == "stream"
    # every role that may ask may stream (a reader is the least)
    for token in (keys.writer, keys.admin):
        assert parse_events(_stream(client, token).text)[-1][0] == "trace"


def test_a_failure_on_the_way_ends_in_an_error_event(demo_kb_template: Path,
                                                      tmp_path: Path) -> None:
    kb_dir = copy_kb(demo_kb_template, tmp_path / "kb")
    keys = Keys.create(kb_dir)
    closed = free_port()  # nothing listens here: the member's calls are refused
    down = {"kind": "ollama", "model": "absent", "name": "down", "max_retries": 0,
            "timeout": 5.0, "base_url": f"http://127.0.0.1:{closed}/v1"}
    config = ServiceConfig(kb_dir=kb_dir, settings=Settings().with_overrides(panel=[down]),
                           use_cache=False)
    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        body = {"question": REFUND_QUESTION, "defense": "ring12"}
        streamed = client.post("/v1/ask", headers=bearer(keys.reader),
                               json=body | {"stream": True})
        assert streamed.status_code == 200
        events = parse_events(streamed.text)
        assert [name for name, _ in events] == ["stage", "stage", "stage", "error"]
        assert [data["stage"] for _, data in events[:3]] == ["retrieval", "ring1", "ring2"]
        plain = client.post("/v1/ask", headers=bearer(keys.reader), json=body)
        assert plain.status_code == events[-1][1]["status"] == 503
        assert events[-1][1] == plain.json()
        assert "down" in plain.json()["error"]
        # the ask slot and the KB handle were given back: the service still answers
        assert client.get("/v1/panel", headers=bearer(keys.reader)).status_code == 200
        again = client.post("/v1/ask", headers=bearer(keys.reader), json=body | {"stream": True})
        assert parse_events(again.text)[-1][0] == "error"
