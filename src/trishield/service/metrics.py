"""Prometheus metrics of one service instance: what the defense did, and how fast.

Each app gets its own :class:`CollectorRegistry` (not the process-global one), so two apps in
one process (the tests start several) never share or double-register counters.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from trishield.pipeline import Answer

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ServiceMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("trishield_http_requests", "HTTP requests by route and status",
                                ["method", "route", "status"], registry=r)
        self.latency = Histogram("trishield_http_request_duration_seconds",
                                 "HTTP request latency by route", ["method", "route"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.queries = Counter("trishield_queries", "Questions and searches answered",
                               ["kind", "defense"], registry=r)
        self.blocks = Counter("trishield_ring_blocks",
                              "What each ring removed: ring1 blocked candidates, ring2 "
                              "dropped candidates, ring3 refused answers, ingest quarantined "
                              "documents", ["ring"], registry=r)
        self.panel_calls = Counter("trishield_panel_calls",
                                   "Panel member answers (llm calls not served from cache)",
                                   ["member", "cached"], registry=r)
        self.refusals = Counter("trishield_refusals", "Asks answered with a refusal",
                                ["defense"], registry=r)
        self.ask_latency = Histogram("trishield_ask_duration_seconds",
                                     "Time inside the pipeline per ask", ["defense"],
                                     buckets=LATENCY_BUCKETS, registry=r)
        self.documents = Counter("trishield_documents_ingested",
                                 "Documents written through the API by outcome and tier",
                                 ["outcome", "tier"], registry=r)
        self.unverified = Counter("trishield_provenance_unverified",
                                  "Documents whose provenance tag did not verify", registry=r)
        self.auth_failures = Counter("trishield_auth_failures",
                                     "Requests refused for credentials (401) or role (403)",
                                     ["status"], registry=r)
        self.local_key_requests = Counter(
            "trishield_local_key_requests", "Requests authenticated with the run's local key "
            "(the same user's `ask`/`search --kb` through the server file)", registry=r)
        self.asks_in_flight = Gauge("trishield_asks_in_flight",
                                    "Asks inside the pipeline now", registry=r)
        self.asks_refused = Counter("trishield_asks_refused",
                                    "Asks refused before they ran: key_share (429, the key "
                                    "had its share admitted), busy (503, queue full or wait "
                                    "over)", ["reason"], registry=r)
        self.searches_refused = Counter("trishield_searches_refused",
                                        "Searches refused (429) because the key had its "
                                        "share in progress", registry=r)
        self.connections_open = Gauge("trishield_connections_open",
                                      "HTTP connections open now", registry=r)
        self.connections_limit = Gauge("trishield_connections_limit",
                                       "The most HTTP connections held open at once",
                                       registry=r)
        self.connections_closed = Counter(
            "trishield_connections_closed", "Connections the server closed on its own: "
            "header_timeout, body_timeout, evicted (oldest idle one, at the limit), refused "
            "(503: at the limit and none idle)", ["reason"], registry=r)
        self.accept_errors = Counter("trishield_accept_errors",
                                     "Connections the operating system could not accept "
                                     "(out of file descriptors or memory)", registry=r)

    def record_answer(self, defense: str, answer: Answer) -> None:
        """Count one ask's outcome from its trace."""
        trace = answer.trace
        self.queries.labels("ask", defense).inc()
        if trace.ring1 is not None:
            self.blocks.labels("ring1").inc(len(trace.ring1.blocked))
        if trace.ring2 is not None:
            self.blocks.labels("ring2").inc(len(trace.ring2.dropped))
        votes = [v for r in trace.ring3.rounds for v in r.votes] if trace.ring3 else []
        if trace.reader is not None:
            votes.append(trace.reader)
        for vote in votes:
            self.panel_calls.labels(vote.member, "yes" if vote.cached else "no").inc()
        if answer.refused:
            self.refusals.labels(defense).inc()
            if trace.ring3 is not None:
                self.blocks.labels("ring3").inc()
        self.ask_latency.labels(defense).observe(trace.timings_s["total"])

    def render(self) -> bytes:
        return generate_latest(self.registry)
