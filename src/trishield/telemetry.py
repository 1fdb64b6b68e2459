"""OpenTelemetry spans for every question: one per question, one per stage, off by default.

NeMo Guardrails and LLM Guard emit OpenTelemetry; an operator running TriShield next to them
wants one view of where a request spent its time and what each ring decided. A question
becomes a ``trishield.ask`` span with a child per stage (``retrieval``, ``ring1``, ``ring2``,
``answer``...) carrying what the stage decided as attributes (candidates in and out, blocked
and flagged counts, score ranges, the decision, the model calls, one span event per call).

It is switched on by ``TRISHIELD_OTEL`` (``console``: JSON spans on stderr, so stdout stays
the command's output; ``otlp``: OTLP over HTTP, to ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and the other standard ``OTEL_*`` variables, which the
exporter reads itself). Unset, empty or ``off``: nothing is built and the OpenTelemetry SDK is
never imported, so a plain ``trishield ask`` pays nothing for it. The spans come from a
tracer provider of TriShield's own (not the process-global one), so a host application's
OpenTelemetry set-up is neither replaced nor required.

The spans are made by a :class:`~trishield.pipeline.PipelineObserver`, the same hook the
service streams its progress through, so there is no second copy of the pipeline.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trishield.errors import InputError
from trishield.pipeline import Answer, StageReport, StageRole
from trishield.trace import Trace

if TYPE_CHECKING:  # the SDK is imported only when telemetry is switched on
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

OTEL_ENV = "TRISHIELD_OTEL"
EXPORTERS = ("console", "otlp")
OFF = ("", "off", "none")
SERVICE_NAME = "trishield"
ATTRIBUTE_LIMIT = 20
"""Ids listed in one attribute at most (blocked candidates, context): a span is a summary;
the whole record is the trace."""


def exporter_setting(value: str | None = None, *,
                     environ: Mapping[str, str] | None = None) -> str | None:
    """The exporter asked for (``console`` or ``otlp``), or ``None`` when telemetry is off:
    ``value`` if given (a command-line option), else ``TRISHIELD_OTEL``."""
    if value is None:
        value = (os.environ if environ is None else environ).get(OTEL_ENV, "")
    setting = value.strip().lower()
    if setting in OFF:
        return None
    if setting not in EXPORTERS:
        raise InputError(f"{OTEL_ENV}={value!r} is not a telemetry exporter; use one of "
                         f"{', '.join(EXPORTERS)} (or 'off')")
    return setting


def _exporter(kind: str) -> SpanExporter:
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, headers, timeout


class Telemetry:
    """A tracer over TriShield's own provider and one exporter; ``observer()`` for each
    question, ``shutdown()`` before the process exits (flushes what is batched)."""

    def __init__(self, exporter: SpanExporter, *, batch: bool = True):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        self.provider: TracerProvider = TracerProvider(resource=Resource.create(
            {"service.name": SERVICE_NAME}))
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self.provider.add_span_processor(processor)
        self.tracer: Tracer = self.provider.get_tracer("trishield")

    @classmethod
    def from_setting(cls, value: str | None = None) -> Telemetry | None:
        """Telemetry as ``value`` or ``TRISHIELD_OTEL`` asks, or ``None`` when it is off."""
        kind = exporter_setting(value)
        if kind is None:
            return None
        try:
            return cls(_exporter(kind))
        except ImportError as error:
            raise InputError(f"telemetry ({OTEL_ENV}={kind}) needs OpenTelemetry: pip install "
                             f"'trishield[otel]' ({error})") from None

    def observer(self, **attributes: str | int | bool) -> SpanObserver:
        """An observer for one question; ``attributes`` go on its root span (the service
        adds the caller's key id, never the key)."""
        return SpanObserver(self.tracer, attributes)

    def shutdown(self) -> None:
        self.provider.shutdown()


def _score_range(prefix: str, values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    return {f"{prefix}.min": round(min(values), 4), f"{prefix}.max": round(max(values), 4)}


def _ids(values: Sequence[str]) -> list[str]:
    return list(values[:ATTRIBUTE_LIMIT])


def stage_attributes(report: StageReport) -> dict[str, Any]:
    """What a stage decided, as span attributes (OpenTelemetry's primitive types only)."""
    trace = report.trace
    attributes: dict[str, Any] = {
        "trishield.stage": report.stage, "trishield.stage.role": report.role,
        "trishield.candidates.in": report.inputs, "trishield.candidates.out": report.outputs,
        "trishield.llm_calls": sum(1 for c in report.calls if c.llm and not c.cached),
        "trishield.llm_calls_cached": sum(1 for c in report.calls if c.llm and c.cached),
        "trishield.model_calls": len(report.calls),
    }
    if report.refusal is not None:
        attributes["trishield.refusal"] = report.refusal
    if report.role == "retrieve" and trace.candidates is not None:
        attributes["trishield.retrieval.backend"] = trace.backend
        attributes.update(_score_range("trishield.retrieval.score",
                                       [c.score for c in trace.candidates]))
    if report.stage == "ring1" and trace.ring1 is not None:
        attributes["trishield.ring1.blocked"] = len(trace.ring1.blocked)
        attributes["trishield.ring1.flagged"] = len(trace.ring1.flagged)
        attributes["trishield.ring1.blocked_ids"] = _ids(trace.ring1.blocked)
        attributes.update(_score_range("trishield.ring1.c", [v.c for v in trace.ring1.verdicts]))
    if report.stage == "ring2" and trace.ring2 is not None:
        attributes["trishield.ring2.dropped"] = len(trace.ring2.dropped)
        attributes["trishield.ring2.conflicts"] = len(trace.ring2.conflicts)
        attributes["trishield.ring2.context_ids"] = _ids(
            [r.chunk_id for r in trace.ring2.ranked if r.in_context])
        attributes.update(_score_range("trishield.ring2.trust",
                                       [r.trust for r in trace.ring2.ranked]))
    if report.role == "answer":
        attributes["trishield.decision"] = "refused" if report.refusal is not None \
            else "answered"
        if trace.gate is not None:
            attributes["trishield.ring3.gate.use_panel"] = trace.gate.use_panel
        if trace.ring3 is not None:
            attributes["trishield.ring3.rounds"] = len(trace.ring3.rounds)
            if trace.ring3.rounds:
                attributes["trishield.ring3.agreement"] = trace.ring3.rounds[-1].agreement
    return attributes


class SpanObserver:
    """One question's spans: a ``trishield.ask`` root and a child span per stage."""

    def __init__(self, tracer: Tracer, attributes: Mapping[str, str | int | bool] = ()):
        self.tracer = tracer
        self.attributes = dict(attributes)
        self.root: Span | None = None
        self.stage: Span | None = None

    def question_started(self, trace: Trace) -> None:
        self.root = self.tracer.start_span("trishield.ask", attributes={
            "trishield.defense": trace.defense, "trishield.backend": trace.backend,
            "trishield.k": trace.k, "trishield.panel": [m.name for m in trace.panel],
            "trishield.question.chars": len(trace.question), **self.attributes})

    def stage_started(self, stage: str, role: StageRole) -> None:
        from opentelemetry import trace as otel

        parent = otel.set_span_in_context(self.root) if self.root is not None else None
        self.stage = self.tracer.start_span(stage, context=parent)

    def stage_finished(self, report: StageReport) -> None:
        span, self.stage = self.stage, None
        if span is None:
            return
        span.set_attributes(stage_attributes(report))
        for call in report.calls:
            span.add_event("model_call", {
                "trishield.call.purpose": call.purpose, "trishield.call.model": call.model,
                "trishield.call.llm": call.llm, "trishield.call.cached": call.cached,
                "trishield.call.prompt_tokens": call.prompt_tokens,
                "trishield.call.completion_tokens": call.completion_tokens,
                "trishield.call.seconds": call.seconds})
        span.end()

    def question_finished(self, answer: Answer | None, error: BaseException | None) -> None:
        from opentelemetry.trace import Status, StatusCode

        for span in (self.stage, self.root):
            if span is None:
                continue
            if error is not None:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            elif span is self.root and answer is not None:
                trace = answer.trace
                span.set_attributes({
                    "trishield.decision": "refused" if answer.refused else "answered",
                    "trishield.citations": _ids(answer.citations),
                    "trishield.llm_calls": trace.llm_calls,
                    "trishield.llm_calls_cached": trace.llm_calls_cached,
                    "trishield.tokens.prompt": trace.tokens.prompt,
                    "trishield.tokens.completion": trace.tokens.completion})
            span.end()
        self.stage = self.root = None
