"""Streamed answers: ``POST /v1/ask`` with ``"stream": true`` answers in server-sent events.

An ask through the full panel takes seconds to minutes; a client that shows progress wants
each ring's decision as it is made. The events, in order (``data`` is one line of JSON):

* ``stage``, once per stage as it ends (``retrieval``, ``ring1``, ``ring2``, ``answer``...):
  its name and role, seconds, candidates in and out, model calls, the refusal if it ended the
  question, and ``part``: the trace sections the stage wrote, as they will appear in the
  final trace;
* ``answer``: the answer or refusal, its reason and citations;
* ``trace``: last, the same JSON as the non-streamed response (answer and whole trace);
* ``error`` instead of ``answer`` and ``trace`` when the question fails on the way, with the
  body and status the non-streamed request would have got (:class:`ErrorBody`).

Comment lines (``: keep-alive``) go out every ``KEEPALIVE_S`` while a stage runs, so proxies
do not close a quiet connection in the middle of a long panel vote.

Everything that can fail before the first stage (authentication, validation, the panel's
names, a busy ask slot or KB handle) fails as the non-streamed request does, with a JSON
status, because the stream has not started yet.

Starlette's :class:`StreamingResponse` is enough here (no ``sse-starlette`` dependency): the
events are few and each is written once; what an SSE library adds (pings, disconnect
polling) is the keep-alive above, and a client that goes away only stops the reading: the
question runs to its end on its own thread, which holds the ask slot and the KB handle and
releases them when it ends, so a dropped connection can never leak either.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import ExitStack
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from trishield.errors import TriShieldError
from trishield.pipeline import Answer, Pipeline, PipelineObserver, StageReport, StageRole
from trishield.service import models as m
from trishield.service.http import trishield_error_response
from trishield.trace import Trace

log = logging.getLogger("trishield.service")
KEEPALIVE_S = 15.0
EVENTS = ("stage", "answer", "trace", "error")
MEDIA_TYPE = "text/event-stream"
_UNWRITTEN = ("timings_s", "calls", "llm_calls", "llm_calls_cached", "tokens")
"""Trace fields the pipeline fills in at the end, never a stage's own decision."""


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One server-sent event; ``json.dumps`` escapes newlines, so ``data`` is one line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def response_body(answer: Answer) -> dict[str, Any]:
    """The non-streamed response's JSON (the ``AskResponse`` model, unset sections left out)."""
    return m.AskResponse.model_validate(answer.as_dict()).model_dump(mode="json",
                                                                     exclude_unset=True)


def error_data(error: BaseException) -> dict[str, Any]:
    """The ``error`` event's data: the body the non-streamed request would have got."""
    if isinstance(error, TriShieldError):
        return json.loads(trishield_error_response(error).body)
    log.error("unexpected error in a streamed ask", exc_info=error)
    return {"error": "internal error; the server log has the details", "status": 500,
            "details": []}


class Fanout:
    """Several observers as one, told in order."""

    def __init__(self, observers: Sequence[PipelineObserver]):
        self.observers = list(observers)

    def question_started(self, trace: Trace) -> None:
        for observer in self.observers:
            observer.question_started(trace)

    def stage_started(self, stage: str, role: StageRole) -> None:
        for observer in self.observers:
            observer.stage_started(stage, role)

    def stage_finished(self, report: StageReport) -> None:
        for observer in self.observers:
            observer.stage_finished(report)

    def question_finished(self, answer: Answer | None, error: BaseException | None) -> None:
        for observer in self.observers:
            observer.question_finished(answer, error)


class StageEvents:
    """Puts a ``stage`` event on ``events`` as each stage ends, with the trace sections it
    wrote (found by comparing the trace before and after the stage: the pipeline does not
    know which section a stage writes, and need not)."""

    def __init__(self, events: queue.Queue[bytes | None]):
        self.events = events
        self._before: dict[str, Any] = {}

    @staticmethod
    def _sections(trace: Trace) -> dict[str, Any]:
        return {name: value for name, value in trace.as_dict().items()
                if name not in _UNWRITTEN}

    def question_started(self, trace: Trace) -> None:
        self._before = self._sections(trace)

    def stage_started(self, stage: str, role: StageRole) -> None:
        pass

    def stage_finished(self, report: StageReport) -> None:
        after = self._sections(report.trace)
        part = {name: value for name, value in after.items()
                if self._before.get(name) != value}
        self._before = after
        self.events.put(sse("stage", {
            "stage": report.stage, "role": report.role, "seconds": round(report.seconds, 4),
            "candidates_in": report.inputs, "candidates_out": report.outputs,
            "llm_calls": sum(1 for c in report.calls if c.llm and not c.cached),
            "llm_calls_cached": sum(1 for c in report.calls if c.llm and c.cached),
            "refusal": report.refusal, "part": part}))

    def question_finished(self, answer: Answer | None, error: BaseException | None) -> None:
        pass


def stream_answer(pipeline: Pipeline, question: str, resources: ExitStack, *,
                  observers: Sequence[PipelineObserver] = (),
                  on_answer: Callable[[Answer], None] = lambda _: None) -> StreamingResponse:
    """Run ``pipeline`` on a thread of its own and stream its events.

    ``resources`` (the ask slot, the KB handle) now belong to that thread, which closes them
    when the question ends, whether or not anyone is still reading. ``on_answer`` counts a
    finished answer in the metrics."""
    events: queue.Queue[bytes | None] = queue.Queue()
    observer = Fanout([StageEvents(events), *observers])

    def run() -> None:
        try:
            with resources:
                try:
                    answer = pipeline.ask(question, observer=observer)
                except Exception as error:
                    events.put(sse("error", error_data(error)))
                    return
                on_answer(answer)
                events.put(sse("answer", {"answer": answer.answer, "refused": answer.refused,
                                          "reason": answer.reason,
                                          "citations": answer.citations}))
                events.put(sse("trace", response_body(answer)))
        except Exception as error:  # releasing the resources failed: still end the stream
            events.put(sse("error", error_data(error)))
        finally:
            events.put(None)

    threading.Thread(target=run, name="trishield-stream", daemon=True).start()
    return StreamingResponse(_read(events), media_type=MEDIA_TYPE,
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _read(events: queue.Queue[bytes | None]) -> AsyncIterator[bytes]:
    while True:
        try:
            event = await run_in_threadpool(events.get, True, KEEPALIVE_S)
        except queue.Empty:
            yield b": keep-alive\n\n"
            continue
        if event is None:
            return
        yield event
