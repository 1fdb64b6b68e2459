"""OpenTelemetry spans per question and stage, from the real SDK over a real pipeline.

The spans go to the SDK's in-memory exporter, or over OTLP/HTTP to a real HTTP listener on
loopback (decoded with OpenTelemetry's own protobuf classes); the pipeline runs over the demo
KB with the refund-window poisons and the extractive reader. Off (the default), the SDK is not
even imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from trishield.defenses import build_defense
from trishield.demo import ATTACKER, attacks
from trishield.errors import InputError
from trishield.kb import Document, KnowledgeBase
from trishield.llm import ExtractiveReader
from trishield.llm.panel import build_reader
from trishield.telemetry import OTEL_ENV, Telemetry, exporter_setting

SOURCE = Path(__file__).parents[1] / "src"
REFUND = next(a for a in attacks() if a.id == "refund-window")


@pytest.fixture
def poisoned_kb(demo_kb_dir: Path) -> Iterator[KnowledgeBase]:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.ingest([Document(id=d["id"], text=d["text"]) for d in REFUND.documents],
                  tier="untrusted", writer=ATTACKER)
        yield kb


def test_one_span_per_stage_under_the_question(poisoned_kb: KnowledgeBase) -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(exporter, batch=False)
    pipeline = build_defense("full", poisoned_kb, [ExtractiveReader()])
    answer = pipeline.ask(REFUND.question, observer=telemetry.observer(**{"trishield.key_id":
                                                                          "k1"}))
    telemetry.shutdown()
    spans = exporter.get_finished_spans()
    by_name = {span.name: span for span in spans}
    assert [s.name for s in spans] == ["retrieval", "ring1", "ring2", "answer", "trishield.ask"]
    root = by_name["trishield.ask"]
    assert root.parent is None
    for name in ("retrieval", "ring1", "ring2", "answer"):
        span = by_name[name]
        assert span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
    trace = answer.trace
    assert root.attributes["trishield.defense"] == "full"
    assert root.attributes["trishield.key_id"] == "k1"
    assert root.attributes["trishield.decision"] == ("refused" if answer.refused else "answered")
    assert root.attributes["trishield.llm_calls"] == 0
    assert list(root.attributes["trishield.citations"]) == answer.citations
    retrieval = by_name["retrieval"].attributes
    assert retrieval["trishield.candidates.out"] == len(trace.candidates) == 20
    assert retrieval["trishield.retrieval.score.max"] == round(
        max(c.score for c in trace.candidates), 4)
    ring1 = by_name["ring1"].attributes
    assert ring1["trishield.ring1.blocked"] == len(trace.ring1.blocked) > 0  # the poisons
    assert list(ring1["trishield.ring1.blocked_ids"]) == trace.ring1.blocked
    assert ring1["trishield.candidates.in"] - ring1["trishield.candidates.out"] == len(
        trace.ring1.blocked)
    ring2 = by_name["ring2"].attributes
    assert list(ring2["trishield.ring2.context_ids"]) == [p.id for p in trace.context]
    assert ring2["trishield.ring2.trust.max"] == round(max(r.trust for r in trace.ring2.ranked), 4)
    final = by_name["answer"]
    assert final.attributes["trishield.decision"] == root.attributes["trishield.decision"]
    assert final.attributes["trishield.ring3.rounds"] == len(trace.ring3.rounds)
    # one event per model call, with what the trace records of it
    assert [e.attributes["trishield.call.model"] for e in final.events] == [
        c.model for c in trace.calls]
    assert all(s.status.status_code != StatusCode.ERROR for s in spans)


def test_a_failed_question_marks_its_spans(demo_kb_dir: Path) -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(exporter, batch=False)
    with socket_closed() as port, KnowledgeBase.open(demo_kb_dir) as kb:
        down = build_reader({"kind": "ollama", "model": "absent", "name": "down",
                             "max_retries": 0, "base_url": f"http://127.0.0.1:{port}/v1"},
                            cache=None)
        pipeline = build_defense("ring12", kb, [down])
        with pytest.raises(Exception, match="down"):
            pipeline.ask(REFUND.question, observer=telemetry.observer())
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"retrieval", "ring1", "ring2", "answer", "trishield.ask"}
    for name in ("answer", "trishield.ask"):
        assert spans[name].status.status_code == StatusCode.ERROR
        assert "down" in spans[name].status.description
        assert spans[name].events[-1].name == "exception"
    assert spans["ring2"].status.status_code != StatusCode.ERROR


class socket_closed:
    """A loopback port that nothing listens on, held by a bound, never-listening socket."""

    def __enter__(self) -> int:
        import socket

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        return self.socket.getsockname()[1]

    def __exit__(self, *_: object) -> None:
        self.socket.close()


def test_the_setting_is_validated_and_off_by_default() -> None:
    for off in ("", "off", "none", " OFF "):
        assert exporter_setting(environ={OTEL_ENV: off}) is None
    assert exporter_setting(environ={}) is None
    assert exporter_setting(environ={OTEL_ENV: "Console"}) == "console"
    assert exporter_setting("otlp", environ={OTEL_ENV: "off"}) == "otlp"  # an option wins
    with pytest.raises(InputError, match=f"{OTEL_ENV}='jaeger' is not a telemetry exporter"):
        exporter_setting(environ={OTEL_ENV: "jaeger"})


PROBE = """
import json, sys
import trishield.telemetry, trishield.service.app
print(json.dumps({"telemetry": trishield.telemetry.Telemetry.from_setting() is not None,
                  "sdk": sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk"))}))
"""


@pytest.mark.parametrize("setting, on", [("", False), ("console", True)])
def test_off_means_no_sdk_import(setting: str, on: bool) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SOURCE),
           "HF_HUB_OFFLINE": "1", OTEL_ENV: setting}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["telemetry"] is on
    assert bool(result["sdk"]) is on


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).received.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *_: object) -> None:
        pass


def test_otlp_goes_to_the_standard_endpoint(poisoned_kb: KnowledgeBase,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT",
                           f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv(OTEL_ENV, "otlp")
        telemetry = Telemetry.from_setting()
        assert telemetry is not None
        answer = build_defense("full", poisoned_kb, [ExtractiveReader()]).ask(
            REFUND.question, observer=telemetry.observer())
        telemetry.shutdown()  # flushes the batch
    finally:
        server.shutdown()
    assert _Collector.received and {path for path, _ in _Collector.received} == {"/v1/traces"}
    names, attributes = [], {}
    for _, body in _Collector.received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert service["service.name"] == "trishield"
            for scope in resource.scope_spans:
                for span in scope.spans:
                    names.append(span.name)
                    attributes[span.name] = {a.key: a.value for a in span.attributes}
    assert sorted(names) == sorted(["retrieval", "ring1", "ring2", "answer", "trishield.ask"])
    assert attributes["ring1"]["trishield.ring1.blocked"].int_value == len(
        answer.trace.ring1.blocked)
