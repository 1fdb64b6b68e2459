"""Evidence: how much *independent* support a claim has, and which of two claims wins.

The principle (docs/design/ring3-consensus.md, "Evidence"): an answer is believed because of how
much independent evidence supports it, not because many passages say it. Three rules:

* **Independence.** Passages that share a writer, an ingest batch, or are near-duplicates of
  each other (embedding cosine >= ``near_duplicate``) are one source: five paraphrases of one
  lie from one writer, or five sybil writers posting one template, count once.
* **Time.** Sources of one claim that entered the knowledge base within ``burst_window_s`` of
  each other (a burst) count once, unless they stood before the opposing claim: five writers
  posting one answer within minutes look coordinated, whatever records they built first.
* **Weight.** A source weighs ``tier_weight[tier] * record * precedence(stood)``: its best
  tier; its writer's track record (``log(1+n)/log(1+record_full)`` for ``n`` documents stored,
  floored at ``record_floor``: a writer with one document is a weak witness); and a
  precedence that grows with how long it stood uncontested before the opposing claim arrived,
  on a log scale (a year for the full ``precedence``; less than ``stood_min_s`` is no time
  stood). Order alone is nothing: two sides written minutes apart are two new sides.
* **Number.** Writers are free, so the number of *new* sources on a side (timed, neither
  trusted nor established by time stood) is no evidence: only the heaviest of them counts.
  Established and trusted sources still add up.
* **Decision.** A claim whose best tier is higher than the other's wins outright (a trusted
  source is never overturned by untrusted or neutral writers alone, whatever their number);
  at equal best tier, two sides of new sources only are a conflict (refused, both shown),
  however many writers stand on each; otherwise the heavier claim wins when it weighs at
  least ``margin`` times the other, and else the sources conflict and TriShield refuses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise
from typing import Annotated, Literal

import numpy as np
from pydantic import Field
from pydantic.dataclasses import dataclass as config_dataclass

from trishield.answers import canonical_numbers, normalize_answer
from trishield.rings.claims import (
    PassageClaim,
    StoredReading,
    claim_of,
    passage_claim,
    read_question,
    states,
    subject_terms,
)
from trishield.rings.config_types import CONFIG, Tier, Unit
from trishield.rings.conflicts import NumericClaim

TIER_ORDER: dict[str, int] = {"untrusted": 0, "neutral": 1, "trusted": 2}


@config_dataclass(frozen=True, config=CONFIG)
class EvidenceConfig:
    near_duplicate: Unit = 0.80
    """Cosine at or above which two passages are one source. Measured with MiniLM: one
    target's poisons sit at median 0.84-0.92 (10th percentile 0.72-0.82), independent clean
    passages answering one question at median 0.66 (90th percentile 0.76)."""
    tier_weight: dict[Tier, Annotated[float, Field(gt=0)]] = field(default_factory=lambda: {
        "trusted": 4.0, "neutral": 1.0, "untrusted": 0.25})
    record_full: Annotated[int, Field(ge=1)] = 1000
    """A writer with this many stored documents has a full track record (log-scaled: one
    document 0.1, ten 0.35, a hundred 0.67)."""
    record_floor: Annotated[float, Field(gt=0, le=1)] = 0.1
    precedence: Annotated[float, Field(ge=1)] = 2.0
    """Weight factor for a source that stood uncontested ``stood_full_s`` (a year) before the
    opposing claim's first passage; a source that stood less has
    ``1 + (precedence - 1) * log(1 + days) / log(1 + full days)`` (a day 1.12, a week 1.35, a
    month 1.58), one that stood less than ``stood_min_s`` none (1.0). A newcomer needs
    ``margin * precedence`` times its weight to overturn a year-old source."""
    stood_full_s: Annotated[float, Field(gt=0)] = 365 * 86_400.0
    """Time stood uncontested for the full ``precedence`` (the tenure's scale: a year)."""
    stood_min_s: Annotated[float, Field(ge=0)] = 86_400.0
    """Least time a source must have stood uncontested before the opposing claim to be
    *established*: less (minutes, hours) is no time stood, and the source is as new as the
    claim that opposes it. Why a day: the burst rule's scale; an attacker who anticipates a
    question writes minutes or hours before the truth, and order alone must decide nothing.
    0 makes any earlier source established (the rule before time stood was weighed)."""
    margin: Annotated[float, Field(ge=1)] = 2.0
    per_source: Annotated[int, Field(ge=1)] = 1
    """Context documents per near-duplicate cluster: the context holds distinct evidence (a
    document's other parts are not copies of it: :meth:`RetrievalScorer._diverse
    <trishield.rings.retrieval_scorer.RetrievalScorer._diverse>`)."""
    per_writer: Annotated[int, Field(ge=1)] = 2
    """Context passages per writer while other writers' passages remain in the pool."""
    burst_window_s: Annotated[float, Field(ge=0)] = 86_400.0
    """Sources of one claim whose first passages entered the knowledge base within this many
    seconds of each other (chained: each within the window of the previous one) are one
    source, unless they are established (in the knowledge base before any passage of the
    opposing claim). Why: independence is also a matter of time. Sleeper writers who built
    track records and then post one answer together are separate writers with separate
    records, so only their timing shows the coordination; independent witnesses rarely
    write about one question on the same day. A day, not a tuned figure: an attacker must
    now space its writers a day apart, and a genuine update written by several writers in
    one day weighs as one source until it is corroborated later or by a higher tier. 0 turns
    the rule off."""
    tenure_full_s: Annotated[float, Field(ge=0)] = 365 * 86_400.0
    """How long a writer must have been writing in the knowledge base, when it wrote a
    passage, for that passage to carry its full track record (log-scaled like the record:
    a day 0.12, a week 0.35, a month 0.58, a year 1.0; never below ``record_floor``). A
    source that stood before the opposing claim keeps its record whatever its tenure: that it
    stood is already its time. Why: documents are cheap to write and time is not; a sleeper
    writer that stored hundreds of documents and posts its answer days later has the volume
    of a full record and the tenure of a newcomer. Only a newcomer to a dispute is capped
    (a source whose first passage is later than the opposing claim's first): a KB's initial
    import has no tenure at its own writing. 0 turns the rule off."""
    flagged_weight: Annotated[float, Field(gt=0, le=1)] = 0.25
    """Weight factor for a source with a passage Ring 1 flagged but let through (suspect
    form: an instruction, a pasted question): it counts as little as an untrusted writer's
    word when claims are weighed, without changing its tier."""


@dataclass(frozen=True)
class Item:
    """One pooled passage as evidence: identity, who stands behind it, and its text."""

    id: str
    doc_id: str
    writer: str
    tier: str
    text: str
    batch: int | None = None
    ingested_at: float | None = None
    reading: StoredReading | None = field(default=None, compare=False, repr=False)
    """The passage's reading stored at ingest (:mod:`trishield.rings.analysis`), when the
    KB holds a current one; else it is read from the text."""
    numbers: tuple[NumericClaim, ...] | None = field(default=None, compare=False, repr=False)
    """Its numeric claims stored at ingest, likewise (Ring 2's conflicts)."""
    title: str = ""
    """Its document's title: what the passage is about where its text leaves the subject to
    "it" (:func:`trishield.rings.claims.subject_terms`)."""


def log_share(amount: float, full: float, floor: float) -> float:
    """``log(1 + amount) / log(1 + full)`` within ``[floor, 1]``: the scale of both history
    terms (a record in documents, a tenure in days), so each step counts less than the one
    before it and neither can be outgrown."""
    return max(floor, min(1.0, math.log1p(amount) / math.log1p(full)))


def record(documents: int | None, config: EvidenceConfig) -> float:
    """A writer's track record in (0, 1]; unknown (no knowledge base to ask) is a full one."""
    if documents is None:
        return 1.0
    return log_share(documents, config.record_full, config.record_floor)


DAY_S = 86_400.0


def tenure(writing_for_s: float, config: EvidenceConfig) -> float:
    """The share of its record a writer's passage carries, given how long the writer had been
    writing in the knowledge base when it wrote it (``writing_for_s``, seconds since its
    first stored document): ``log(1 + days) / log(1 + full days)``, within
    ``[record_floor, 1]``; 1 when the rule is off (``tenure_full_s = 0``)."""
    if config.tenure_full_s <= 0:
        return 1.0
    return log_share(max(0.0, writing_for_s) / DAY_S, config.tenure_full_s / DAY_S,
                     config.record_floor)


@dataclass(frozen=True)
class Source:
    """Passages that count as one witness, and what that witness weighs against an opponent."""

    members: tuple[int, ...]
    writers: tuple[str, ...]
    tier: str
    record: float
    """The standing the weight uses: the best of its writers' records, each capped by the
    writer's tenure when it wrote if the source is a newcomer to the dispute."""
    earliest: float | None
    weight: float = 0.0
    established: bool = False
    """It stood uncontested at least ``stood_min_s`` before the opposing claim's first passage."""
    burst: bool = False
    """Several origins merged because they wrote within ``burst_window_s`` of each other."""
    tenure: float | None = None
    """The tenure factor that capped the record (:func:`tenure`), or None when none did: the
    source is no newcomer to the dispute (it is not later than the opposing claim's first
    passage), its times or its writers' first documents are unknown, the rule is off, or
    the writers' records are below their tenure."""
    stood_s: float | None = None
    """Seconds it stood uncontested before the opposing claim's first passage (0 when it came
    later), or None when there is no opposing claim or a time is unknown."""

    @property
    def new(self) -> bool:
        """A new source: its time is known, it is not trusted and did not stand
        ``stood_min_s`` before the opposing claim. Writers are free, so the number of new
        sources on a side is no evidence (:attr:`ClaimSide.weight` counts the heaviest)."""
        return (self.earliest is not None and not self.established
                and self.tier != "trusted")

    def as_dict(self, items: Sequence[Item]) -> dict[str, object]:
        return {"passages": [items[i].id for i in self.members], "writers": list(self.writers),
                "tier": self.tier, "record": round(self.record, 4),
                "established": self.established, "burst": self.burst,
                "tenure": None if self.tenure is None else round(self.tenure, 4),
                "stood_s": None if self.stood_s is None else round(self.stood_s, 1),
                "new": self.new, "weight": round(self.weight, 4)}


@dataclass(frozen=True)
class ClaimSide:
    """One side of a comparison: a claim's independent sources and their total weight."""

    label: str
    sources: tuple[Source, ...]

    @property
    def weight(self) -> float:
        """Every established, trusted or untimed source's weight, plus the heaviest new one's:
        a thousand new writers weigh as one."""
        new = [s.weight for s in self.sources if s.new]
        return sum(s.weight for s in self.sources if not s.new) + (max(new) if new else 0.0)

    @property
    def only_new(self) -> bool:
        """Every source is new (:attr:`Source.new`): nothing but writers' number stands
        behind the claim."""
        return bool(self.sources) and all(s.new for s in self.sources)

    @property
    def top_tier(self) -> str | None:
        tiers = [s.tier for s in self.sources]
        return max(tiers, key=TIER_ORDER.__getitem__) if tiers else None

    def as_dict(self, items: Sequence[Item]) -> dict[str, object]:
        return {"claim": self.label, "top_tier": self.top_tier,
                "weight": round(self.weight, 4),
                "sources": [s.as_dict(items) for s in self.sources]}


Outcome = Literal["stands", "conflict", "unopposed", "silenced"]
"""``silenced``: the claim stood or was unopposed, but a source about the question that gave
no answer outweighs it (Ring 3's silence rule); the opposition is that silent source."""


@dataclass(frozen=True)
class Verdict:
    """How the best claim fared against the runner-up: it stands (or is unopposed), or the
    two conflict."""

    outcome: Outcome
    reason: str
    support: ClaimSide
    opposition: ClaimSide | None = None

    def as_dict(self, items: Sequence[Item]) -> dict[str, object]:
        return {"outcome": self.outcome, "reason": self.reason,
                "support": self.support.as_dict(items),
                "opposition": None if self.opposition is None
                else self.opposition.as_dict(items)}


def same_origin(items: Sequence[Item]) -> np.ndarray:
    """Which passages share a writer or an ingest batch (a passage without a batch shares
    none), as a boolean matrix: compared all at once rather than pair by pair."""
    writers: dict[str, int] = {}
    batches: dict[int, int] = {}
    writer = np.array([writers.setdefault(i.writer, len(writers)) for i in items],
                      dtype=np.int64)
    batch = np.array([-1 if i.batch is None else batches.setdefault(i.batch, len(batches))
                      for i in items], dtype=np.int64)
    same_batch = (batch[:, None] == batch[None, :]) & (batch >= 0)[:, None]
    return (writer[:, None] == writer[None, :]) | same_batch


def components(members: Sequence[int],
               links: np.ndarray | Sequence[Sequence[bool]]) -> list[tuple[int, ...]]:
    """Connected components of ``members`` under ``links``, in first-member order: the first
    member not yet grouped takes every member it reaches through ``links[a][b]`` (followed
    from ``a`` to ``b``) among those not yet grouped.

    A search over the matrix's rows as Python lists: for a pool of 20 this measured 3-5x
    faster than both reading the numpy matrix cell by cell and a numpy transitive closure
    (each numpy call costs microseconds, more than the whole search)."""
    rows = links.tolist() if isinstance(links, np.ndarray) else links
    remaining = [int(m) for m in members]
    if len(set(remaining)) != len(remaining):
        repeated = next(m for m in remaining if remaining.count(m) > 1)
        raise ValueError(f"member {repeated} appears twice")
    groups = []
    while remaining:
        group = [remaining.pop(0)]
        frontier = list(group)
        while frontier:
            row = rows[frontier.pop()]
            joined = [m for m in remaining if row[m]]
            for m in joined:
                remaining.remove(m)
            group += joined
            frontier += joined
        groups.append(tuple(sorted(group)))
    return groups


def shared_answers(claims: Sequence[PassageClaim], members: Sequence[int]) -> np.ndarray:
    """Which of ``members`` share a candidate answer (span key) with which, as a boolean
    matrix over every passage (rows and columns of non-members are false): one product of
    the member-by-key incidence matrix with itself, not a set intersection per pair."""
    keys: dict[str, int] = {}
    rows, columns = [], []
    for a in members:
        for span in claims[a].spans:
            rows.append(a)
            columns.append(keys.setdefault(span.key, len(keys)))
    incidence = np.zeros((len(claims), len(keys)), dtype=np.float32)
    incidence[rows, columns] = 1.0
    return (incidence @ incidence.T) > 0


def time_stood(earliest: float | None, first_opposed: float | None) -> float | None:
    """Seconds a source whose first passage entered the KB at ``earliest`` stood uncontested
    before the opposing claim's first passage (``first_opposed``); 0 when it came later; None
    when either time is unknown (no opposing claim, passages from outside a KB)."""
    if first_opposed is None or earliest is None:
        return None
    return max(0.0, first_opposed - earliest)


def established(stood_s: float | None, config: EvidenceConfig) -> bool:
    """Whether a source stood long enough (``stood_min_s``, and more than an instant) to have
    precedence over the opposing claim."""
    return stood_s is not None and stood_s > 0 and stood_s >= config.stood_min_s


def precedence(stood_s: float | None, config: EvidenceConfig) -> float:
    """The weight factor time stood earns: 1 for a source that is not :func:`established`,
    else ``1 + (precedence - 1) * log(1 + days) / log(1 + full days)``, at most
    ``precedence`` (a year: the same log scale as tenure, so each further day counts less)."""
    if not established(stood_s, config):
        return 1.0
    assert stood_s is not None
    return 1.0 + (config.precedence - 1.0) * log_share(stood_s / DAY_S,
                                                       config.stood_full_s / DAY_S, 0.0)


class Evidence:
    """The pool as evidence for one question: each passage's claim and who is independent of
    whom. Built once per question by Ring 2 and read again by Ring 3."""

    def __init__(self, question: str, items: Sequence[Item], embeddings: np.ndarray | None,
                 documents_per_writer: Mapping[str, int] | None,
                 config: EvidenceConfig | None = None, *,
                 writers_since: Mapping[str, float] | None = None,
                 question_embedding: np.ndarray | None = None,
                 about_cosine: float | None = None):
        self.question = question
        self.items = list(items)
        self.config = config or EvidenceConfig()
        self.writers_since: Mapping[str, float] = writers_since or {}
        """Each writer's first stored document (its time), for :func:`tenure`; a writer not
        in it (or passages given from outside a knowledge base) is not capped by tenure."""
        asked = read_question(question)
        self.question_terms = len(asked.terms)
        self.claims: list[PassageClaim] = [
            claim_of(asked, i.text, i.reading, subject_terms(i.title) if i.title else "")
            for i in self.items]
        self.records = {i.writer: record(None if documents_per_writer is None
                                         else documents_per_writer.get(i.writer, 0),
                                         self.config) for i in self.items}
        n = len(self.items)
        self.duplicate = np.zeros((n, n), dtype=bool)
        if embeddings is not None and len(embeddings) != n:
            raise ValueError(f"{len(embeddings)} embeddings for {n} passages: one each")
        if embeddings is not None and n:
            similarity = embeddings @ embeddings.T
            self.duplicate = similarity >= self.config.near_duplicate
        self.question_cosine: np.ndarray | None = None
        """Each passage's cosine with the question (same embedding model), when both are
        known: :meth:`about_by_meaning`."""
        if embeddings is not None and question_embedding is not None and n:
            self.question_cosine = embeddings @ np.asarray(question_embedding,
                                                           dtype=embeddings.dtype)
        self.about_cosine = about_cosine
        self.same_origin = same_origin(self.items)
        self.linked = self.same_origin | self.duplicate
        self.suspects: frozenset[int] = frozenset()
        """Passages Ring 1 flagged (set by Ring 3 from the run's signals)."""
        self._clusters: list[tuple[int, ...]] | None = None

    @cached_property
    def position(self) -> dict[str, int]:
        """Each pooled passage's index by its id: Ring 3 maps context passages onto the pool
        (built once, when first asked; the items do not change after construction)."""
        return {item.id: i for i, item in enumerate(self.items)}

    # -- independence -----------------------------------------------------------------------
    def components(self, members: Sequence[int], links: np.ndarray) -> list[tuple[int, ...]]:
        """Connected components of ``members`` under ``links`` (in first-member order)."""
        return components(members, links)

    def near_duplicate_clusters(self) -> list[tuple[int, ...]]:
        """The pool's near-duplicate clusters; read by the context's diversity rule and by the
        trace, so computed once (the embeddings do not change after construction)."""
        if self._clusters is None:
            self._clusters = self.components(range(len(self.items)), self.duplicate)
        return list(self._clusters)

    def sources(self, members: Sequence[int], opponents: Sequence[int] = (), *,
                by_origin: bool = False) -> tuple[Source, ...]:
        """``members`` as independent sources, weighed against ``opponents``. ``by_origin``
        groups by writer and batch only: near-duplicates of *different* origins may still
        say different things (a copy with a fact changed), so they are told apart until
        each has given its answer."""
        opposed_since = [self.items[o].ingested_at for o in opponents
                         if self.items[o].ingested_at is not None]
        first_opposed = min(opposed_since) if opposed_since else None
        found_groups = self.components(members,
                                       self.same_origin if by_origin else self.linked)
        groups = (self._bursts(found_groups, first_opposed) if not by_origin
                  else [(group, False) for group in found_groups])
        found = []
        for group, burst in groups:
            writers = tuple(sorted({self.items[i].writer for i in group}))
            tier = max((self.items[i].tier for i in group), key=TIER_ORDER.__getitem__)
            earliest = self._earliest(group)
            stood = time_stood(earliest, first_opposed)
            standing, capped_by = max(
                (self._standing(writer, group, first_opposed) for writer in writers),
                key=lambda pair: pair[0])
            weight = (self.config.tier_weight.get(tier, self.config.tier_weight["untrusted"])
                      * standing * precedence(stood, self.config)
                      * (self.config.flagged_weight if self.suspects.intersection(group)
                         else 1.0))
            found.append(Source(group, writers, tier, standing, earliest, weight,
                                established(stood, self.config), burst, capped_by, stood))
        return tuple(found)

    def _standing(self, writer: str, group: Sequence[int], first_opposed: float | None
                  ) -> tuple[float, float | None]:
        """``writer``'s standing in a source of ``group``: its record, capped by its tenure
        when it wrote its first passage of the group (:func:`tenure`) if that passage came
        *after* the opposing claim's first one (a newcomer to the dispute), with the cap if
        it applied. A source as old as the dispute or older keeps its record (a KB's initial
        import, written on one day, has no tenure at its own writing and must keep its
        weight), as does a writer whose first document or passage time is unknown."""
        held = self.records[writer]
        since = self.writers_since.get(writer)
        if first_opposed is None or since is None or self.config.tenure_full_s <= 0:
            return held, None
        times = [self.items[i].ingested_at for i in group if self.items[i].writer == writer
                 and self.items[i].ingested_at is not None]
        if not times or min(times) <= first_opposed:
            return held, None
        share = tenure(min(times) - since, self.config)
        return (share, share) if share < held else (held, None)

    def _earliest(self, group: Sequence[int]) -> float | None:
        times = [self.items[i].ingested_at for i in group
                 if self.items[i].ingested_at is not None]
        return min(times) if times else None

    def _bursts(self, groups: list[tuple[int, ...]], first_opposed: float | None
                ) -> list[tuple[tuple[int, ...], bool]]:
        """``groups`` with those that are not established and whose first passages entered
        the knowledge base within ``burst_window_s`` of each other (chained in time order)
        merged, each merged group flagged as a burst. Established groups (in the KB before
        the opposing claim) and groups of unknown time stay as they are: what stood before
        the dispute was not written for it. The order is kept, a burst taking the place of
        the first of its groups."""
        window = self.config.burst_window_s
        timed = sorted((earliest, position) for position, group in enumerate(groups)
                       if (earliest := self._earliest(group)) is not None
                       and not established(time_stood(earliest, first_opposed),
                                           self.config))
        if window <= 0 or len(timed) < 2:
            return [(group, False) for group in groups]
        runs: dict[int, list[int]] = {}  # first position of a burst -> its positions
        run = [timed[0][1]]
        for (before, _), (at, position) in pairwise(timed):
            if at - before > window:
                runs[min(run)] = run
                run = []
            run.append(position)
        runs[min(run)] = run
        absorbed = {p for first, run in runs.items() for p in run if p != first}
        merged = []
        for position in range(len(groups)):
            if position in absorbed:
                continue
            run = runs.get(position, [position])
            merged.append((tuple(sorted(i for p in run for i in groups[p])), len(run) > 1))
        return merged

    # -- claims -----------------------------------------------------------------------------
    def about(self, index: int) -> bool:
        """Whether passage ``index`` is about the question enough to take part in a dispute:
        it holds half the question's terms (Ring 2's ``about_question``, its title counted)
        and at least two of them (all, for a question of one term). Why two: "What day is
        groundhog's day?" has two terms, and a Super Bowl paragraph that says "Media Day
        was held on February 1, 2016" holds one, half of them; its writer's weight then
        outweighed the new writer who answered "February 2"."""
        held = round(self.claims[index].relevance * self.question_terms)
        return (self.claims[index].about_question
                and held >= min(2, self.question_terms))

    def about_by_meaning(self, index: int) -> bool:
        """Whether passage ``index`` is about the question by meaning: its cosine with the
        question is at least the embedding model's ``about_cosine`` (calibrated on SQuAD:
        three in four answering paragraphs are that close, one in seven paragraphs of the
        same article and none of another). Words miss a true passage worded otherwise ("It's
        My Party" ... "singer Lesley Gore" for "who sings it's my party": one of three
        terms); a poison passes the words anyway, so this only keeps more of the truth.
        False when either embedding or the threshold is unknown."""
        return (self.question_cosine is not None and self.about_cosine is not None
                and float(self.question_cosine[index]) >= self.about_cosine)

    def answers(self, index: int) -> bool:
        """Whether passage ``index`` is :meth:`about` the question and gives a candidate
        answer of the asked type (Ring 2's reading): only such a passage's silence can stand
        against a claim (silence is not opposition)."""
        return self.about(index) and bool(self.claims[index].spans)

    def claim_groups(self, members: Sequence[int]) -> list[list[int]]:
        """``members`` grouped into claims by their candidate answers: two passages that share
        one state the same claim (and so does a chain of such passages). Ring 2's ``S_ev``."""
        return [list(group) for group in self.components(members,
                                                         shared_answers(self.claims, members))]

    def sides(self, include: Sequence[int] = (), answered: Sequence[int] = ()) -> list[Source]:
        """The independent sources that speak about the question (plus those of ``include``,
        the context, that share a term with it, and every passage of ``answered``: an answer
        a reader gave rests on them, so they speak about the question whatever their words),
        heaviest first: more than one means the question is *contested* and each source is
        asked for its own answer (Ring 3)."""
        members = sorted({i for i, claim in enumerate(self.claims) if claim.about_question}
                         | {i for i in include if self.claims[i].relevance > 0}
                         | set(answered))
        return sorted(self.sources(members, by_origin=True),
                      key=lambda s: (-TIER_ORDER[s.tier], -s.weight, s.members))

    def judge(self, claims: Mapping[str, Sequence[int]]) -> Verdict:
        """Which claim the evidence supports: each claim's sources are weighed against all
        the other claims' passages; the best (top tier, then weight) must beat the runner-up
        by :func:`decide`, else the sources conflict."""
        labelled = [(label, list(members)) for label, members in claims.items() if members]
        if not labelled:
            raise ValueError("no claim to judge")
        sides = []
        for label, members in labelled:
            others = [i for other, rest in labelled if other != label for i in rest]
            sides.append(ClaimSide(label, self.sources(members, others)))
        sides.sort(key=lambda side: (-TIER_ORDER[side.top_tier or "untrusted"], -side.weight))
        if len(sides) == 1:
            return Verdict("unopposed", "every source that answered gives this answer",
                           sides[0])
        return decide(sides[0], sides[1], self.config)

    def as_dict(self) -> dict[str, object]:
        return {"passages": [{"id": item.id, "writer": item.writer, "tier": item.tier,
                              "about_question": claim.about_question,
                              "relevance": round(claim.relevance, 4),
                              "candidates": [s.text for s in claim.spans],
                              "title": item.title,
                              "question_cosine": (None if self.question_cosine is None
                                                  else round(float(self.question_cosine[n]),
                                                             4))}
                             for n, (item, claim) in enumerate(zip(self.items, self.claims,
                                                                   strict=True))],
                "near_duplicate_clusters": [[self.items[i].id for i in c]
                                            for c in self.near_duplicate_clusters()
                                            if len(c) > 1],
                "writer_records": {w: round(r, 4) for w, r in sorted(self.records.items())}}


def decide(best: ClaimSide, runner_up: ClaimSide, config: EvidenceConfig) -> Verdict:
    """The best claim (ranked by top tier, then weight) against the runner-up: a higher tier
    wins outright; at the same tier two sides of new sources only conflict whatever they
    weigh (tier, signatures and time stood decide, not the number of writers), else the best
    needs ``margin`` times the runner-up's weight, else the sources conflict."""
    ours = TIER_ORDER[best.top_tier or "untrusted"]
    theirs = TIER_ORDER[runner_up.top_tier or "untrusted"]
    if theirs > ours:
        raise ValueError("decide() takes the best claim first")
    if ours > theirs:
        return Verdict("stands", f"{best.label!r} has {best.top_tier} support; "
                                 f"{runner_up.label!r} only {runner_up.top_tier}",
                       best, runner_up)
    a, b = best.weight, runner_up.weight
    if best.only_new and runner_up.only_new:
        return Verdict("conflict", f"conflicting sources: {best.label!r} (weight {a:.2f}) vs "
                                   f"{runner_up.label!r} ({b:.2f}): both sides are new (no "
                                   "trusted or signed source, none stood "
                                   f"{config.stood_min_s / 3600:g} h uncontested), and the "
                                   "number of new writers is no evidence", best, runner_up)
    if a >= config.margin * b:
        return Verdict("stands", f"{best.label!r} has independent support {a:.2f} >= "
                                 f"{config.margin:g} x {b:.2f} for {runner_up.label!r}",
                       best, runner_up)
    return Verdict("conflict", f"conflicting sources: {best.label!r} (independent support "
                               f"{a:.2f}) vs {runner_up.label!r} ({b:.2f}), margin below "
                               f"{config.margin:g}x", best, runner_up)


SHORT_ANSWER_WORDS = 6
"""A claim of at most this many words is a candidate answer ("Yunus", "malware", "a limited
period of time"); a longer one is a sentence (the extractive reader's), a candidate only
through the names, numbers or dates it holds."""


def answer_states(answer: str, text: str, question: str) -> bool:
    """Whether ``text`` states ``answer``. A short answer must appear (its core terms). A
    sentence-long answer (the extractive reader's) is stated by a text that contains every
    candidate answer the sentence gives (its names, numbers and dates), so a paraphrase counts
    and a passage that shares only the setting ("Star Wars") does not."""
    if states(answer, text, question):
        return True
    spans = passage_claim(question, answer).spans
    if not spans or len(answer.split()) <= SHORT_ANSWER_WORDS:
        return False
    haystack = f" {normalize_answer(canonical_numbers(text))} "
    return all(f" {span.key} " in haystack for span in spans)
