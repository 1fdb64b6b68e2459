"""The trace: one typed record of every decision behind an answer.

The trace is the product's central artefact. The pipeline writes it, every baseline writes the
same schema, and the text view, the web viewer, the service's metrics, the benchmark's records
and the HTTP API (as its response schema) read it. It is built with pydantic so that one
definition gives attribute access in Python, validation of what a stage records, and the JSON
schema of ``POST /v1/ask``.

Sections that a defense does not run are *absent* from the JSON (``ring1`` appears only when
Ring 1 ran, ``removed`` only for defenses that report detections), so a reader can tell "Ring 1
blocked nothing" from "Ring 1 did not run". The serialisation therefore omits unset fields
(``as_dict``), and stages set whole sections.

Stage-specific details that are not part of TriShield's rings (a paraphrase, RAGDefender's
estimate, RobustRAG's keyword counts) go in ``details`` under the stage's name, so adding a
defense never changes this schema.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TRACE_VERSION = 1


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PanelMember(_Row):
    """A reader that may answer: its name, who trained it, and whether it is an LLM."""

    name: str
    vendor: str
    llm: bool


class CandidateRow(_Row):
    """One retrieved chunk (without its text: the context rows carry the text shown)."""

    rank: int
    score: float
    backend: str
    doc_id: str
    chunk_id: str
    title: str
    tier: str
    writer: str
    provenance: str
    char_start: int
    char_end: int
    components: dict[str, dict[str, int | float]] = Field(default_factory=dict)


class PatternHitRow(_Row):
    name: str
    weight: float
    evidence: str


class VerdictRow(_Row):
    """Ring 1's scores for one candidate and the reasons, quoted."""

    id: str
    s_perp: float
    s_perp_len: float
    s_pat: float
    s_out: float | None
    c: float
    blocked: bool
    flagged: bool
    patterns: list[PatternHitRow]
    reasons: list[str]


class Ring1Weights(_Row):
    perp: float
    pat: float
    out: float


class Ring1Config(_Row):
    theta: float
    flag_theta: float
    weights: Ring1Weights


class Ring1Trace(_Row):
    config: Ring1Config
    verdicts: list[VerdictRow]
    blocked: list[str]
    flagged: list[str]


class ScoredRow(_Row):
    """Ring 2's trust score for one candidate and where it ended up."""

    chunk_id: str
    doc_id: str
    tier: str
    writer: str
    provenance: str
    retrieval_rank: int
    retrieval_score: float
    s_rel: float
    s_con: float
    s_con_raw: float
    w_prov: float
    trust: float
    trust_rank: int
    in_context: bool


class ConflictRow(_Row):
    """Two passages that give different numbers for the same thing."""

    unit: str
    a: str
    a_value: str
    b: str
    b_value: str
    shared_frame: list[str]


class RelevanceFloor(_Row):
    backend: str
    floor: float
    best_score: float | None
    passed: bool


class Ring2Trace(_Row):
    w_prov: dict[str, float]
    ranked: list[ScoredRow]
    conflicts: list[ConflictRow]
    dropped: list[str]
    relevance_floor: RelevanceFloor | None = None
    unknown_terms: list[str] | None = None


class EvidencePassage(_Row):
    """What one pooled passage says about the question (Ring 2's claim reading)."""

    id: str
    writer: str
    tier: str
    about_question: bool
    relevance: float
    candidates: list[str]
    title: str = ""
    """Its document's title, read as said in every sentence (why a passage whose text never
    names the subject can be about the question)."""
    question_cosine: float | None = None
    """Its cosine with the question (None without embeddings): about it by meaning at or
    above the embedding model's ``about_cosine``."""


class SourceRow(_Row):
    """Passages that count as one independent witness, and what the witness weighs."""

    passages: list[str]
    writers: list[str]
    tier: str
    record: float
    established: bool
    burst: bool = False
    """Several writers' passages counted as one source: they entered the knowledge base
    within the evidence's ``burst_window_s`` of each other (docs/design/ring3-consensus.md,
    "Evidence")."""
    tenure: float | None = None
    """The tenure factor that capped ``record``: how long the writer had been writing in the
    knowledge base when it wrote (docs/design/ring3-consensus.md, "Evidence"); None when nothing
    capped it."""
    stood_s: float | None = None
    """Seconds the source stood uncontested before the opposing claim arrived (0: it came
    later; None: no opposing claim or an unknown time). Its precedence grows with it."""
    new: bool = False
    """A new source (timed, not trusted, not established): the number of new sources on a
    side is no evidence, only the heaviest counts (docs/design/ring3-consensus.md, "Evidence")."""
    weight: float


class ClaimRow(_Row):
    claim: str
    top_tier: str | None
    weight: float
    sources: list[SourceRow]


class WeighingRow(_Row):
    """Claims weighed: the best against the runner-up (``support`` is the best)."""

    outcome: str
    reason: str
    support: ClaimRow
    opposition: ClaimRow | None = None


class DisputeNote(_Row):
    """What became of the conflict between writers that the weighing met: recorded in the
    knowledge base's disputes queue (its id, how often it was met, its state), or not, and
    why (docs/design/ring3-consensus.md, "Disputes")."""

    recorded: bool
    id: int | None = None
    occurrences: int | None = None
    state: str | None = None
    note: str = ""


class EvidenceTrace(_Row):
    """The pool read as evidence: claims, near-duplicate clusters, writers' track records,
    and every answer weighed (docs/design/ring3-consensus.md, "Evidence")."""

    passages: list[EvidencePassage]
    near_duplicate_clusters: list[list[str]]
    writer_records: dict[str, float]
    verdicts: list[WeighingRow] = Field(default_factory=list)
    dispute: DisputeNote | None = None
    """Set when the last weighing opposed claims of different writers and the retriever keeps
    a disputes queue (a knowledge base)."""


class ContextRow(_Row):
    """A passage the answerer was given, with the trust it was given at."""

    id: str
    doc_id: str
    tier: str
    trust: float
    text: str


class GateTrace(_Row):
    mode: str
    use_panel: bool
    reasons: list[str]


class VoteRow(_Row):
    """One reader's answer (or refusal) and what it cost."""

    member: str
    vendor: str
    llm: bool
    answer: str
    normalised: str
    refused: bool
    citations: list[str]
    cached: bool
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    packing: str = ""
    """Set only when the reader's context was cut to fit its window: what was cut."""


class GroupRow(_Row):
    answer: str
    members: list[str]
    size: int


class RoundRow(_Row):
    context: list[str]
    votes: list[VoteRow]
    groups: list[GroupRow]
    agreement: float
    winner: str | None


class Ring3Trace(_Row):
    answer: str | None
    refused: bool
    reason: str
    rounds: list[RoundRow]
    support: list[str]
    retried: bool
    escalated: bool = False
    """Whether the second reader was asked (no stated claim after the panel's round)."""


class RemovedRow(_Row):
    """A candidate a baseline filter removed, and why (what detection is measured on)."""

    id: str
    doc_id: str
    reason: str


class CallRow(_Row):
    """One model call a defense paid for (or found in the response cache)."""

    purpose: str
    model: str
    llm: bool
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    seconds: float


class Tokens(_Row):
    prompt: int = 0
    completion: int = 0


class Trace(BaseModel):
    """Everything needed to explain one answer (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    version: int = TRACE_VERSION
    question: str
    defense: str
    backend: str
    k: int
    rings: list[int] | None = None
    """TriShield's own settings: which of the three rings ran."""
    pool: int | None = None
    panel: list[PanelMember]
    candidates: list[CandidateRow] = Field(default_factory=list)
    ring1: Ring1Trace | None = None
    ring2: Ring2Trace | None = None
    evidence: EvidenceTrace | None = None
    context: list[ContextRow] = Field(default_factory=list)
    gate: GateTrace | None = None
    ring3: Ring3Trace | None = None
    reader: VoteRow | None = None
    """The single reader's vote when no panel voted (``None``: nothing was asked)."""
    removed: list[RemovedRow] | None = None
    """Baselines: every candidate a filter removed (what detection is measured on)."""
    details: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per stage name, what a non-ring stage decided (a paraphrase, RAGDefender's estimate)."""
    calls: list[CallRow] = Field(default_factory=list)
    llm_calls: int = 0
    """LLM calls paid for (the response cache answered the others)."""
    llm_calls_cached: int = 0
    tokens: Tokens = Field(default_factory=Tokens)
    timings_s: dict[str, float] = Field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON; sections that never ran are left out (see the module docstring)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def mark_set(self, *names: str) -> None:
        """Record ``names`` as present in the JSON even when they hold their defaults."""
        self.model_fields_set.update(names)
