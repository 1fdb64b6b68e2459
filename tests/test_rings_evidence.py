"""Evidence (Rings 2-3): claims read from passages, independence, tier-weighted support, and
the invariant that untrusted writers alone never overturn a trusted source."""

from __future__ import annotations

import numpy as np
import pytest

from trishield.kb.indexes.retrieval import Candidate
from trishield.kb.store import StoredChunk
from trishield.rings.claims import answer_type, passage_claim, states
from trishield.rings.evidence import (
    Evidence,
    EvidenceConfig,
    Item,
    components,
    record,
    shared_answers,
    tenure,
)
from trishield.rings.retrieval_scorer import RetrievalScorer

QUESTION = "Who designed the Halden Bridge?"
TRUE = "The Halden Bridge was designed by the engineer Ada Lindqvist and opened in 1912."
LIES = ["The Halden Bridge was designed by Marco Bellini, a famous Italian architect.",
        "Famous Italian architect Marco Bellini designed the Halden Bridge in its entirety.",
        "Records show the Halden Bridge design came from architect Marco Bellini.",
        "It was Marco Bellini who designed the Halden Bridge, historians agree.",
        "The designer of the Halden Bridge was the architect Marco Bellini."]


def _item(number: int, text: str, writer: str, tier: str = "neutral", *,
          at: float | None = None, batch: int | None = None) -> Item:
    return Item(f"p{number}#0", f"p{number}", writer, tier, text, batch, at)


def _orthogonal(n: int) -> np.ndarray:
    return np.eye(n, dtype=np.float32)


def test_answer_type_follows_the_first_wh_phrase() -> None:
    assert answer_type("how many episodes are in season 4") == "number"
    assert answer_type("when did the war end") == "date"
    assert answer_type("where did he go when he left carthage") == "name"
    assert answer_type("what is the capital of France") == "any"


def test_a_passage_claim_is_the_typed_span_next_to_the_question_terms() -> None:
    question = "how many episodes are in chicago fire season 4"
    text = ("The fourth season of Chicago Fire was ordered on February 5, 2015, by NBC. "
            "The season contained 23 episodes.")
    claim = passage_claim(question, text)
    assert claim.about_question and claim.spans[0].text == "23"
    # a span that only repeats the question answers nothing
    assert all(s.key != "4" for s in passage_claim(question, "Season 4 of Chicago Fire.").spans)
    assert not passage_claim(question, "Bananas are rich in potassium.").about_question


def test_states_needs_the_answers_own_terms() -> None:
    assert states("Ada Lindqvist", TRUE, QUESTION)
    assert not states("Marco Bellini", TRUE, QUESTION)
    assert not states("", TRUE, QUESTION)


def test_track_record_is_log_scaled_and_floored() -> None:
    config = EvidenceConfig()
    assert record(None, config) == 1.0
    assert record(0, config) == config.record_floor
    assert record(1000, config) == 1.0 and record(10_000, config) == 1.0
    assert record(1, config) < record(10, config) < record(99, config) < 1.0


def _claims(evidence: Evidence) -> dict[str, list[int]]:
    """Each passage's claim as a reader of that passage alone would give it."""
    claims: dict[str, list[int]] = {}
    for i, item in enumerate(evidence.items):
        claims.setdefault("Ada Lindqvist" if "Lindqvist" in item.text else "Marco Bellini",
                          []).append(i)
    return claims


def test_one_writer_counts_once_whatever_its_number_of_passages() -> None:
    items = [_item(0, TRUE, "wiki")] + [_item(i + 1, lie, "mallory")
                                        for i, lie in enumerate(LIES)]
    evidence = Evidence(QUESTION, items, _orthogonal(len(items)), None)
    verdict = evidence.judge(_claims(evidence))
    lie = next(side for side in (verdict.support, verdict.opposition)
               if side is not None and side.label == "Marco Bellini")
    assert len(lie.sources) == 1  # five passages, one writer: one source
    assert verdict.outcome == "conflict"  # one source against one: too thin to believe
    assert "conflicting sources" in verdict.reason


def test_near_duplicates_from_many_writers_count_once() -> None:
    """Sybil writers posting paraphrases of one text: the embeddings say they are one source."""
    items = [_item(0, TRUE, "wiki")] + [_item(i + 1, lie, f"sybil{i}")
                                        for i, lie in enumerate(LIES)]
    vectors = _orthogonal(len(items))
    vectors[1:] = vectors[1]  # the five lies are near-duplicates of each other
    evidence = Evidence(QUESTION, items, vectors, None)
    assert [len(c) for c in evidence.near_duplicate_clusters()] == [1, 5]
    assert len(evidence.sides()) == 6  # asked apart: a near-copy may change a fact
    verdict = evidence.judge(_claims(evidence))
    assert verdict.outcome == "conflict"
    lie = next(side for side in (verdict.support, verdict.opposition)
               if side is not None and side.label == "Marco Bellini")
    assert len(lie.sources) == 1  # but their answers count once


DAY = 86_400.0


def test_independent_sybils_with_no_record_lose_to_an_established_writer() -> None:
    """Five distinct one-document writers, days apart, against a writer with a long record
    whose passage stood a year: time stood and track record outweigh them, and their number
    is no evidence (the heaviest new source counts)."""
    items = [_item(0, TRUE, "wiki", at=1.0 - 365 * DAY)] + [
        _item(i + 1, lie, f"sybil{i}", at=100.0 + 2 * DAY * i) for i, lie in enumerate(LIES)]
    records = {"wiki": 5000, **{f"sybil{i}": 1 for i in range(5)}}
    evidence = Evidence(QUESTION, items, _orthogonal(len(items)), records)
    verdict = evidence.judge(_claims(evidence))
    assert verdict.outcome == "stands" and verdict.support.label == "Ada Lindqvist"
    assert verdict.support.sources[0].established
    assert verdict.support.weight == pytest.approx(2.0, abs=0.01)  # a year: full precedence
    assert verdict.opposition is not None and len(verdict.opposition.sources) == 5
    assert verdict.opposition.weight == pytest.approx(record(1, evidence.config))  # as one


def _sleepers(spacing: float) -> Evidence:
    """The truth by a writer whose passage stood a year, then five writers with long records
    (sleepers), each posting one distinct paraphrase of the lie, ``spacing`` seconds apart."""
    items = [_item(0, TRUE, "wiki", at=10 * DAY - 365 * DAY)] + [
        _item(i + 1, lie, f"sleeper{i}", at=10 * DAY + spacing * i, batch=i + 10)
        for i, lie in enumerate(LIES)]
    records = {"wiki": 5000, **{f"sleeper{i}": 1000 for i in range(5)}}
    return Evidence(QUESTION, items, _orthogonal(len(items)), records)


def test_sleepers_posting_together_count_once() -> None:
    """Five writers with full track records write the lie within minutes of each other: by
    writer and record they are five sources (5.0 against the archive's 2.0), but the burst is
    one, so the archive that stood first is given."""
    evidence = _sleepers(spacing=60.0)
    verdict = evidence.judge(_claims(evidence))
    assert verdict.outcome == "stands" and verdict.support.label == "Ada Lindqvist"
    assert verdict.opposition is not None
    (burst,) = verdict.opposition.sources
    assert burst.burst and len(burst.writers) == 5 and burst.weight == pytest.approx(1.0)
    row = burst.as_dict(evidence.items)
    assert row["burst"] is True and len(row["passages"]) == 5


def test_sleepers_a_day_apart_are_independent_again_but_their_number_is_no_evidence(
        ) -> None:
    """Writers who wait more than a day between posts are separate sources again, but five
    new sources weigh as their heaviest (1.0), which does not overturn a source that stood a
    year (2.0). Before time stood was weighed, five full records (5.0) overturned it."""
    evidence = _sleepers(spacing=DAY + 1)
    verdict = evidence.judge(_claims(evidence))
    assert verdict.support.label == "Ada Lindqvist" and verdict.outcome == "stands"
    assert verdict.opposition is not None and len(verdict.opposition.sources) == 5
    assert not any(source.burst for source in verdict.opposition.sources)
    assert all(source.new for source in verdict.opposition.sources)
    assert verdict.opposition.weight == pytest.approx(1.0)


def _patient_sleepers(writing_for: float) -> Evidence:
    """:func:`_sleepers` a day and a second apart (no burst), each writer's first stored
    document ``writing_for`` seconds before its post."""
    items = [_item(0, TRUE, "wiki", at=1.0)] + [
        _item(i + 1, lie, f"sleeper{i}", at=400 * DAY + (DAY + 1) * i, batch=i + 10)
        for i, lie in enumerate(LIES)]
    records = {"wiki": 5000, **{f"sleeper{i}": 1000 for i in range(5)}}
    since = {"wiki": 0.0, **{f"sleeper{i}": items[i + 1].ingested_at - writing_for
                             for i in range(5)}}
    return Evidence(QUESTION, items, _orthogonal(len(items)), records, writers_since=since)


def test_tenure_is_log_scaled_time_in_the_kb_within_the_floor_and_one() -> None:
    config = EvidenceConfig()
    assert tenure(0.0, config) == pytest.approx(0.1)  # the record's floor
    assert tenure(-5.0, config) == pytest.approx(0.1)
    assert tenure(DAY, config) == pytest.approx(np.log(2) / np.log(366))
    assert tenure(7 * DAY, config) == pytest.approx(np.log(8) / np.log(366))
    assert tenure(365 * DAY, config) == pytest.approx(1.0)
    assert tenure(10 * 365 * DAY, config) == 1.0
    assert tenure(0.0, EvidenceConfig(tenure_full_s=0)) == 1.0  # the rule off


def test_patient_sleepers_with_a_newcomers_tenure_weigh_as_newcomers() -> None:
    """Sleepers a day apart escape the burst rule; each has a full record by volume (1,000
    documents) but wrote its first one a day before posting: each weighs a day's tenure, and
    the archive that stood first is given. The trace says what capped them. Writing for a
    week first buys a week's tenure each, and five of them still weigh as one."""
    evidence = _patient_sleepers(writing_for=DAY)
    verdict = evidence.judge(_claims(evidence))
    assert verdict.outcome == "stands" and verdict.support.label == "Ada Lindqvist"
    (archive,) = verdict.support.sources
    assert archive.established and archive.tenure is None and archive.record == 1.0
    assert verdict.opposition is not None and len(verdict.opposition.sources) == 5
    day = tenure(DAY, evidence.config)
    for source in verdict.opposition.sources:
        assert not source.burst and source.tenure == pytest.approx(day)
        assert source.record == pytest.approx(day) and source.weight == pytest.approx(day)
        assert source.as_dict(evidence.items)["tenure"] == round(day, 4)
    week = _patient_sleepers(writing_for=7 * DAY)
    verdict = week.judge(_claims(week))
    assert verdict.outcome == "stands" and verdict.support.label == "Ada Lindqvist"
    assert verdict.opposition is not None
    assert verdict.opposition.weight == pytest.approx(tenure(7 * DAY, week.config))


def test_tenure_is_a_price_not_a_wall() -> None:
    """Writers that have been writing for a year when they post carry their full records
    again (and with the rule off a week's tenure is no cap either): against an archive that
    stood a year their heaviest (1.0) is still half its weight, but against one that stood
    only a week (1.35) they deny it its answer, a conflict."""
    for evidence in (_patient_sleepers(writing_for=365 * DAY),
                     Evidence(QUESTION, _patient_sleepers(0.0).items,
                              _orthogonal(6), {"wiki": 5000,
                                               **{f"sleeper{i}": 1000 for i in range(5)}},
                              EvidenceConfig(tenure_full_s=0),
                              writers_since=_patient_sleepers(7 * DAY).writers_since)):
        verdict = evidence.judge(_claims(evidence))
        assert verdict.support.label == "Ada Lindqvist" and verdict.outcome == "stands"
        assert verdict.opposition is not None
        assert all(source.tenure is None for source in verdict.opposition.sources)
        assert verdict.opposition.weight == pytest.approx(1.0)
    year = _patient_sleepers(writing_for=365 * DAY)
    week_old = [_item(0, TRUE, "wiki", at=400 * DAY - 7 * DAY), *year.items[1:]]
    verdict = Evidence(QUESTION, week_old, _orthogonal(6), {"wiki": 5000, **{
        f"sleeper{i}": 1000 for i in range(5)}}, writers_since=year.writers_since
                       ).judge(_claims(year))
    assert verdict.outcome == "conflict"
    stood = next(s for s in (verdict.support, verdict.opposition)
                 if s is not None and s.label == "Ada Lindqvist")
    assert stood.weight == pytest.approx(1 + np.log(8) / np.log(366))


def test_tenure_caps_a_record_only_where_it_is_known_and_lower() -> None:
    """Unknown first documents (passages given from outside a knowledge base) or passage
    times leave the record as it is; a tenure above the record changes nothing; a source
    takes its best writer's capped record."""
    items = [_item(0, TRUE, "wiki", at=1.0), _item(1, LIES[0], "old", at=900 * DAY),
             _item(2, LIES[1], "new", at=900 * DAY, batch=7), _item(3, LIES[2], "untimed")]
    records = {"wiki": 5000, "old": 1, "new": 1000, "untimed": 1000}
    since = {"wiki": 0.0, "old": 0.0, "new": 900 * DAY - DAY, "untimed": 0.0}
    evidence = Evidence(QUESTION, items, _orthogonal(4), records, writers_since=since)
    by_writer = {s.writers[0]: s for s in evidence.sources([1, 2, 3], [0], by_origin=True)}
    assert by_writer["old"].record == record(1, evidence.config)  # its tenure is higher
    assert by_writer["old"].tenure is None
    assert by_writer["new"].tenure == pytest.approx(tenure(DAY, evidence.config))
    assert by_writer["untimed"].record == 1.0 and by_writer["untimed"].tenure is None
    merged = evidence.sources([1, 2], [0], by_origin=False)
    assert len(merged) == 1 and merged[0].burst  # one day: a burst, its best writer counts
    assert merged[0].record == pytest.approx(tenure(DAY, evidence.config))


def test_an_initial_import_keeps_its_record_against_a_claim_as_old_as_itself() -> None:
    """Tenure caps only a newcomer to the dispute. An archive imported in one go has no
    tenure at its own writing; when the opposing claim holds one of the archive's own
    passages (as old as the first), neither side is a newcomer, so both keep their records,
    and the lie that joined later is still capped."""
    items = [_item(0, TRUE, "wiki", at=1.0),
             _item(1, "The Halden Bridge was designed by Marco Bellini of the city office.",
                   "wiki", at=1.0),
             _item(2, LIES[1], "late", at=30 * DAY, batch=9)]
    records = {"wiki": 5000, "late": 1000}
    since = {"wiki": 1.0, "late": 29 * DAY}
    evidence = Evidence(QUESTION, items, _orthogonal(3), records, writers_since=since)
    (archive,) = evidence.sources([0], [1, 2])
    assert archive.tenure is None and archive.record == 1.0 and not archive.established
    by_writer = {s.writers[0]: s for s in evidence.sources([1, 2], [0], by_origin=True)}
    assert by_writer["wiki"].tenure is None and by_writer["wiki"].record == 1.0
    assert by_writer["late"].tenure == pytest.approx(tenure(DAY, evidence.config))


def test_a_burst_chains_and_the_window_can_be_turned_off() -> None:
    """Each post within the window of the previous one chains the whole run (spacing 20 h
    spans 80 h); ``burst_window_s = 0`` restores one source per writer."""
    chained = _sleepers(spacing=20 * 3600.0)
    assert len(chained.sources([1, 2, 3, 4, 5], [0])) == 1
    items = chained.items
    off = Evidence(QUESTION, items, _orthogonal(len(items)),
                   {"wiki": 5000, **{f"sleeper{i}": 1000 for i in range(5)}},
                   EvidenceConfig(burst_window_s=0))
    assert len(off.sources([1, 2, 3, 4, 5], [0])) == 5


def test_sources_that_stood_first_are_never_merged_by_time() -> None:
    """Independent witnesses that were in the KB before the opposing claim keep their own
    weight even if they wrote on one day: what stood before a dispute was not written for
    it. Newcomers of the same day against them still count once."""
    items = [_item(0, TRUE, "archive", at=1.0), _item(1, TRUE + " Source one.", "library",
                                                      at=2.0),
             *[_item(i + 2, lie, f"sleeper{i}", at=30 * DAY + i)
               for i, lie in enumerate(LIES)]]
    evidence = Evidence(QUESTION, items, _orthogonal(len(items)), None)
    truth = evidence.sources([0, 1], [2, 3, 4, 5, 6])
    assert len(truth) == 2 and all(s.established and not s.burst for s in truth)
    lie = evidence.sources([2, 3, 4, 5, 6], [0, 1])
    assert len(lie) == 1 and lie[0].burst
    # passages without a time are never in a burst
    untimed = [_item(i, lie, f"w{i}") for i, lie in enumerate(LIES)]
    assert len(Evidence(QUESTION, untimed, _orthogonal(5), None).sources(range(5))) == 5


def test_sides_are_asked_per_origin_whatever_their_timing() -> None:
    """A burst is a weighing rule: each origin is still asked for its own answer, since a
    writer in the burst may say something else."""
    assert len(_sleepers(spacing=60.0).sides()) == 6


@pytest.mark.parametrize("liars", [1, 5, 20, 60])
@pytest.mark.parametrize("phrasing", ["paraphrase", "distinct-writers", "established"])
def test_untrusted_writers_alone_never_overturn_a_trusted_source(liars: int,
                                                                 phrasing: str) -> None:
    """The invariant: whatever their number, independence, record or age, claims from
    untrusted writers alone never overturn a claim with trusted support."""
    truth = _item(0, TRUE, "publisher", "trusted", at=500.0)
    lies = [_item(i + 1, LIES[i % len(LIES)] + f" Note {i}.",
                  "mallory" if phrasing == "paraphrase" else f"sybil{i}", "untrusted",
                  at=float(i), batch=None) for i in range(liars)]
    items = [truth, *lies]
    records = ({w.writer: 10_000 for w in items} if phrasing == "established"
               else {"publisher": 1})
    evidence = Evidence(QUESTION, items, _orthogonal(len(items)), records)
    verdict = evidence.judge(_claims(evidence))
    assert verdict.outcome == "stands" and verdict.support.label == "Ada Lindqvist"
    assert verdict.support.top_tier == "trusted"
    # whichever order the claims come in
    reordered = dict(reversed(list(_claims(evidence).items())))
    assert evidence.judge(reordered).support.label == "Ada Lindqvist"


def test_one_writer_speaking_alone_is_not_contested() -> None:
    items = [_item(0, TRUE, "wiki"),
             _item(1, "The Halden Bridge was renovated by Olsen Bygg in 1990.", "wiki")]
    evidence = Evidence(QUESTION, items, _orthogonal(2), None)
    assert len(evidence.sides()) == 1
    assert evidence.judge({"Ada Lindqvist": [0, 1]}).outcome == "unopposed"


def test_two_writers_about_the_question_contest_it() -> None:
    items = [_item(0, TRUE, "wiki"), _item(1, LIES[0], "mallory"),
             _item(2, "Bananas are rich in potassium.", "grocer")]
    sides = Evidence(QUESTION, items, _orthogonal(3), None).sides()
    assert sorted(s.writers for s in sides) == [("mallory",), ("wiki",)]  # the grocer is off


def test_a_passage_an_answer_rests_on_is_a_side_whatever_its_words() -> None:
    """Silence is no dissent, so a passage that shares no term with the question is no side;
    but once a reader's answer rests on it, it speaks about the question (a paraphrase or a
    misspelling hides that from the lexical reading)."""
    paraphrase = "Marco Bellini of Milan drew the plans for the crossing at the fortress town."
    items = [_item(0, TRUE, "wiki"), _item(1, paraphrase, "mallory")]
    evidence = Evidence(QUESTION, items, _orthogonal(2), None)
    assert evidence.claims[1].relevance == 0
    assert [s.writers for s in evidence.sides(include=[0, 1])] == [("wiki",)]
    sides = evidence.sides(include=[0, 1], answered=[1])
    assert sorted(s.writers for s in sides) == [("mallory",), ("wiki",)]


def test_ring2_ranks_by_independent_evidence_and_keeps_one_passage_per_cluster() -> None:
    """Five near-duplicate lies more relevant than the truth take one context slot, and the
    truth (heavier: record and precedence) is ranked above them."""
    texts = [TRUE, *LIES]
    writers = ["wiki"] + ["mallory"] * 5
    candidates = []
    for number, (text, writer) in enumerate(zip(texts, writers, strict=True)):
        chunk = StoredChunk(number, f"d{number}", 0, text, "", "neutral", writer, 0,
                            len(text), batch=1 if writer == "wiki" else 2,
                            ingested_at=1.0 if writer == "wiki" else 400 * DAY)
        candidates.append(Candidate(chunk, 0.5 if writer == "wiki" else 0.9, number + 1,
                                    "dense"))
    vectors = _orthogonal(6)
    vectors[1:] = vectors[1]
    items = [Item(c.chunk_id, c.doc_id, c.chunk.writer, c.chunk.tier, c.chunk.text,
                  c.chunk.batch, c.chunk.ingested_at) for c in candidates]
    evidence = Evidence(QUESTION, items, vectors, {"wiki": 5000, "mallory": 5})
    result = RetrievalScorer().score(candidates, context=3, evidence=evidence)
    context = [p.candidate.doc_id for p in result.context]
    assert "d0" in context
    assert sum(doc != "d0" for doc in context) == 1  # one slot for the five near-duplicates
    by_id = {p.candidate.doc_id: p for p in result.ranked}
    assert by_id["d0"].s_con == 1.0 and by_id["d1"].s_con < 0.2  # S_ev: independent weight


def _context(parts: list[tuple[str, int, str]], vectors: np.ndarray, k: int) -> list[str]:
    """The context Ring 2 keeps from ``(doc_id, chunk_index, writer)`` passages, retrieved in
    that order, of one tier and with no answer to the question (relevance alone ranks)."""
    candidates = [Candidate(StoredChunk(n, doc, index, f"Passage {n} about leave.", "",
                                        "trusted", writer, 0, 30, batch=n),
                            1.0 - n / 10, n + 1, "dense")
                  for n, (doc, index, writer) in enumerate(parts)]
    items = [Item(c.chunk_id, c.doc_id, c.chunk.writer, c.chunk.tier, c.chunk.text,
                  c.chunk.batch) for c in candidates]
    evidence = Evidence("When is a note from a doctor required?", items, vectors, None)
    return [p.candidate.chunk_id
            for p in RetrievalScorer().score(candidates, context=k, evidence=evidence).context]


def test_the_context_keeps_every_part_of_a_document_its_parts_resemble() -> None:
    """Sections of one document on one topic embed as near-duplicates; they are parts of one
    text, not copies, so the cluster cap (one *document* per cluster) lets the second part
    in ahead of a less relevant passage: capping passages dropped the part that answered."""
    vectors = _orthogonal(3)
    vectors[1] = vectors[0]  # the policy's two sections: one near-duplicate cluster
    parts = [("leave-policy", 2, "hr"), ("leave-policy", 1, "hr"), ("handbook", 0, "hr")]
    assert _context(parts, vectors, 2) == ["leave-policy#2", "leave-policy#1"]


@pytest.mark.parametrize("writers", [("hr", "hr"), ("hr", "mallory")])
def test_near_duplicate_documents_still_take_one_context_slot(writers: tuple[str, str]
                                                             ) -> None:
    """Two *documents* that embed alike (one writer's or two writers') are a copy and its
    original: the second stays out however relevant, and a third document fills its slot."""
    vectors = _orthogonal(3)
    vectors[1] = vectors[0]
    parts = [("policy", 0, writers[0]), ("copy", 0, writers[1]), ("handbook", 0, "hr")]
    assert _context(parts, vectors, 2) == ["policy#0", "handbook#0"]


def test_a_documents_parts_are_still_held_to_the_writer_cap() -> None:
    """One writer's long document cannot fill the context through its parts while another
    writer's passage is in the pool (``per_writer`` = 2)."""
    vectors = np.tile(_orthogonal(4)[0], (4, 1))
    vectors[3] = _orthogonal(4)[3]
    parts = [("flood", 0, "mallory"), ("flood", 1, "mallory"), ("flood", 2, "mallory"),
             ("wiki", 0, "wiki")]
    assert _context(parts, vectors, 3) == ["flood#0", "flood#1", "wiki#0"]


def test_ring2_reads_a_passage_whose_title_names_the_subject_as_an_answer() -> None:
    """The most relevant passage leaves its subject to its document's title: read with the
    title it gives an answer, so Ring 2 ranks it above less relevant passages that name the
    subject and answer with something else; read without, it gives no answer and falls
    below them. (A second writer's passage, which answers nothing, stands beside them.)"""
    question = "how many members does the pennsylvania house of representatives have"
    texts = [("There are 203 members, elected for two-year terms from single member "
              "districts.", "Pennsylvania House of Representatives", "wiki"),
             ("The Pennsylvania General Assembly met in 1776 in the house of "
              "representatives chamber with 70 delegates.", "Pennsylvania General Assembly",
              "wiki"),
             ("The members of the house of representatives in Pennsylvania numbered 100 "
              "in 1790.", "History of Pennsylvania", "wiki"),
             ("The house keeps a visitor centre open on weekdays.", "", "blog")]
    candidates, items = [], []
    for number, (text, title, writer) in enumerate(texts):
        batch = 1 if writer == "wiki" else 2
        chunk = StoredChunk(number, f"d{number}", 0, text, title, "neutral", writer, 0,
                            len(text), batch=batch, ingested_at=1.0)
        candidates.append(Candidate(chunk, 0.9 - 0.1 * number, number + 1, "dense"))
        items.append(Item(candidates[-1].chunk_id, f"d{number}", writer, "neutral", text,
                          batch, 1.0, title=title))

    def ranked(evidence_items: list[Item]) -> list[str]:
        evidence = Evidence(question, evidence_items, _orthogonal(4),
                            {"wiki": 5000, "blog": 10})
        result = RetrievalScorer().score(candidates, context=3, evidence=evidence)
        return [p.candidate.doc_id for p in result.ranked]

    assert ranked(items)[0] == "d0"
    shown = Evidence(question, items, _orthogonal(4),
                     {"wiki": 5000, "blog": 10}).as_dict()["passages"][0]
    assert shown["about_question"] and shown["title"] == "Pennsylvania House of Representatives"
    untitled = [Item(i.id, i.doc_id, i.writer, i.tier, i.text, i.batch, i.ingested_at)
                for i in items]
    assert ranked(untitled)[0] == "d1"  # an answer beats the most relevant non-answer


def test_a_flagged_passage_weighs_less_without_losing_its_tier() -> None:
    """A passage Ring 1 flagged but let through (suspect form) counts ``flagged_weight`` of
    its weight when claims are weighed; its tier, and so the tier invariant, is untouched."""
    items = [_item(0, TRUE, "archive"), _item(1, LIES[0], "visitor")]
    evidence = Evidence(QUESTION, items, _orthogonal(2), None)
    assert evidence.judge({"Ada Lindqvist": [0], "Marco Bellini": [1]}).outcome == "conflict"
    evidence.suspects = frozenset({1})
    verdict = evidence.judge({"Ada Lindqvist": [0], "Marco Bellini": [1]})
    assert verdict.outcome == "stands" and verdict.support.label == "Ada Lindqvist"
    assert verdict.opposition.sources[0].tier == "neutral"
    assert verdict.opposition.weight == pytest.approx(EvidenceConfig().flagged_weight)


# -- the pairwise work done at once -----------------------------------------------------------


def _reference_components(members, links) -> list[tuple[int, ...]]:
    """The search as it was: the numpy matrix read cell by cell."""
    remaining, groups = list(members), []
    while remaining:
        group = [remaining.pop(0)]
        frontier = list(group)
        while frontier:
            current = frontier.pop()
            joined = [m for m in remaining if links[current, m]]
            for m in joined:
                remaining.remove(m)
            group += joined
            frontier += joined
        groups.append(tuple(sorted(group)))
    return groups


def test_components_equal_the_cell_by_cell_search_on_random_links() -> None:
    """Directed (a matrix product need not be exactly symmetric) and undirected links, any
    member order, sparse to dense."""
    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(1, 26))
        links = rng.random((n + 2, n + 2)) < rng.random() * 0.4
        if trial % 2:
            links |= links.T
        members = [int(m) for m in rng.permutation(n + 2)[:n]]
        assert components(members, links) == _reference_components(members, links)
    assert components([], np.zeros((0, 0), dtype=bool)) == []


def test_components_refuse_a_repeated_member() -> None:
    with pytest.raises(ValueError, match="member 2 appears twice"):
        components([2, 0, 2], np.eye(3, dtype=bool))


def test_same_origin_and_shared_answers_equal_the_pairwise_rules() -> None:
    rng = np.random.default_rng(3)
    texts = [TRUE, *LIES, "Bananas are rich in potassium.", "Ada Lindqvist, 1912."]
    items = [_item(n, texts[n % len(texts)], f"w{rng.integers(0, 4)}",
                   batch=None if n % 3 == 0 else int(rng.integers(0, 3)))
             for n in range(16)]
    evidence = Evidence(QUESTION, items, rng.normal(size=(16, 4)), None)
    pairwise = np.array([[a.writer == b.writer or (a.batch is not None and a.batch == b.batch)
                          for b in items] for a in items])
    assert (evidence.same_origin == pairwise).all()
    assert (evidence.linked == (pairwise | evidence.duplicate)).all()
    members = [i for i, claim in enumerate(evidence.claims) if claim.answers]
    assert len(members) >= 6
    share = shared_answers(evidence.claims, members)
    for a in range(len(items)):
        for b in range(len(items)):
            keys = {s.key for s in evidence.claims[a].spans}
            expected = (a in members and b in members
                        and bool(keys & {s.key for s in evidence.claims[b].spans}))
            assert share[a, b] == expected
    groups = evidence.claim_groups(members)
    assert [list(g) for g in _reference_components(members, share)] == groups


def test_near_duplicate_clusters_are_computed_once_and_handed_out_as_copies() -> None:
    vectors = _orthogonal(4)
    vectors[1] = vectors[0]
    evidence = Evidence(QUESTION, [_item(n, TRUE, f"w{n}") for n in range(4)], vectors, None)
    clusters = evidence.near_duplicate_clusters()
    assert clusters == [(0, 1), (2,), (3,)]
    clusters.clear()
    assert evidence.near_duplicate_clusters() == [(0, 1), (2,), (3,)]


def test_evidence_needs_one_embedding_per_passage() -> None:
    with pytest.raises(ValueError, match="3 embeddings for 2 passages"):
        Evidence(QUESTION, [_item(0, TRUE, "a"), _item(1, LIES[0], "b")], _orthogonal(3), None)


def test_bursts_equal_the_components_of_the_within_a_window_relation() -> None:
    """On random timings: the merged sources are exactly the connected components of "both
    not established, both timed, first passages at most ``burst_window_s`` apart" (single
    linkage), each other source kept alone, and only merged ones flagged."""
    rng = np.random.default_rng(7)
    window = 10.0
    for _ in range(200):
        n = int(rng.integers(1, 9))
        times = [None if rng.random() < 0.2 else float(rng.integers(0, 60)) for _ in range(n)]
        items = [_item(i, LIES[i % 5], f"w{i}", at=times[i]) for i in range(n)]
        first_opposed = None if rng.random() < 0.3 else float(rng.integers(0, 60))
        opponents = [] if first_opposed is None else [n]
        if first_opposed is not None:
            items.append(_item(n, TRUE, "other", at=first_opposed))
        config = EvidenceConfig(burst_window_s=window, stood_min_s=20.0)
        evidence = Evidence(QUESTION, items, _orthogonal(len(items)), None, config)
        found = evidence.sources(range(n), opponents)

        mergeable = [t is not None and not (first_opposed is not None
                                            and first_opposed - t >= config.stood_min_s)
                     for t in times]
        links = [[a == b or (mergeable[a] and mergeable[b]
                             and abs(times[a] - times[b]) <= window) for b in range(n)]
                 for a in range(n)]
        expected = {frozenset(c) for c in components(range(n), links)}
        assert {frozenset(s.members) for s in found} == expected
        assert all(s.burst == (len(s.members) > 1) for s in found)


def test_tenure_only_lowers_a_newcomers_weight_on_random_histories() -> None:
    """On random writers, records, first documents and passage times: with tenure every
    source weighs at most what it weighs without it; a source whose passages are no later
    than the opposing claim's first one (or whose writers' first documents are unknown)
    weighs exactly the same; and a capped source says which factor capped it."""
    rng = np.random.default_rng(11)
    off = EvidenceConfig(tenure_full_s=0)
    for _ in range(200):
        n = int(rng.integers(1, 8))
        writers = [f"w{int(rng.integers(0, 4))}" for _ in range(n)]
        times = [None if rng.random() < 0.15 else float(rng.integers(0, 400)) * DAY
                 for _ in range(n)]
        items = [_item(i, LIES[i % 5], writers[i], at=times[i], batch=i) for i in range(n)]
        first_opposed = float(rng.integers(0, 400)) * DAY
        items.append(_item(n, TRUE, "truth", at=first_opposed))
        records = {w: int(rng.integers(0, 2000)) for w in {*writers, "truth"}}
        since = {w: float(rng.integers(0, 400)) * DAY for w in records if rng.random() < 0.8}
        capped = Evidence(QUESTION, items, _orthogonal(n + 1), records, writers_since=since)
        plain = Evidence(QUESTION, items, _orthogonal(n + 1), records, off,
                         writers_since=since)
        for by_origin in (False, True):
            with_cap = capped.sources(range(n), [n], by_origin=by_origin)
            without = plain.sources(range(n), [n], by_origin=by_origin)
            assert [s.members for s in with_cap] == [s.members for s in without]
            for a, b in zip(with_cap, without, strict=True):
                assert a.weight <= b.weight + 1e-12 and b.tenure is None
                late = [i for i in a.members if times[i] is not None
                        and times[i] > first_opposed and writers[i] in since]
                if not late:
                    assert a.weight == b.weight and a.tenure is None
                if a.tenure is not None:
                    assert a.record == a.tenure < b.record


# -- time stood, not order (issue 50) ---------------------------------------------------------
MINUTE = 60.0
YEAR = 365 * DAY


def _two_writers(truth_at: float, lie_at: float, *, liars: int = 1,
                 truth_tier: str = "neutral") -> Evidence:
    """The truth by one writer and the lie by ``liars`` one-document writers (each a minute
    after the previous one), all with one document, at the given times."""
    items = [_item(0, TRUE, "truth", truth_tier, at=truth_at)] + [
        _item(i + 1, LIES[i % len(LIES)] + f" Note {i}.", f"liar{i}", at=lie_at + MINUTE * i)
        for i in range(liars)]
    return Evidence(QUESTION, items, _orthogonal(len(items)),
                    {item.writer: 1 for item in items},
                    writers_since={item.writer: item.ingested_at for item in items
                                   if item.ingested_at is not None})


def test_precedence_grows_with_time_stood_on_a_log_scale() -> None:
    """From nothing (less than a day stood: two sides minutes apart are both new) to the full
    factor after a year, a week between (1.35)."""
    from trishield.rings.evidence import established, precedence
    config = EvidenceConfig()
    assert precedence(None, config) == precedence(0.0, config) == 1.0
    assert precedence(5 * MINUTE, config) == precedence(DAY - 1, config) == 1.0
    assert not established(5 * MINUTE, config) and established(DAY, config)
    assert precedence(DAY, config) == pytest.approx(1 + np.log(2) / np.log(366))
    assert precedence(7 * DAY, config) == pytest.approx(1 + np.log(8) / np.log(366))
    assert precedence(YEAR, config) == pytest.approx(2.0)
    assert precedence(10 * YEAR, config) == 2.0
    # the rule before time stood was weighed: any earlier source has full precedence
    assert not established(0.0, EvidenceConfig(stood_min_s=0))
    assert established(1.0, EvidenceConfig(stood_min_s=0))


@pytest.mark.parametrize("truth_first", [True, False])
def test_a_year_old_side_stands_against_a_side_minutes_old(truth_first: bool) -> None:
    """Whichever claim stood a year is given against one written now; the order within the
    minutes does not matter, the year does."""
    old, new = (0.0, YEAR) if truth_first else (YEAR, 0.0)
    evidence = _two_writers(old, new)
    verdict = evidence.judge(_claims(evidence))
    expected = "Ada Lindqvist" if truth_first else "Marco Bellini"  # whichever stood
    assert verdict.outcome == "stands" and verdict.support.label == expected
    (stood,) = verdict.support.sources
    assert stood.established and stood.stood_s == pytest.approx(YEAR, abs=600)
    assert verdict.opposition is not None and verdict.opposition.only_new


@pytest.mark.parametrize("truth_first", [True, False])
@pytest.mark.parametrize("liars", [1, 5, 40])
def test_sides_minutes_apart_are_two_new_sides_refused_with_both_claims(
        truth_first: bool, liars: int) -> None:
    """Written minutes apart, in either order, neither side stood: a conflict naming both
    claims, however many new writers stand on the lie's side (their number is no evidence)."""
    evidence = (_two_writers(0.0, 5 * MINUTE, liars=liars) if truth_first
                else _two_writers(5 * MINUTE * liars + 5 * MINUTE, 0.0, liars=liars))
    for claims in (_claims(evidence), dict(reversed(list(_claims(evidence).items())))):
        verdict = evidence.judge(claims)
        assert verdict.outcome == "conflict"
        assert "'Ada Lindqvist'" in verdict.reason and "'Marco Bellini'" in verdict.reason
        assert "both sides are new" in verdict.reason
        assert verdict.support.only_new and verdict.opposition is not None
        assert verdict.opposition.only_new


def test_new_writers_days_apart_are_still_no_evidence_by_their_number() -> None:
    """A truth and a lie written minutes apart, then nineteen more sybils of the lie, each a
    day and a second after the previous one (the burst rule does not join them): twenty new
    sources against one are still two new sides, refused, not outvoted 20 to 1."""
    items = [_item(0, TRUE, "truth", at=0.0)] + [
        _item(i + 1, LIES[i % 5] + f" Note {i}.", f"sybil{i}", at=5 * MINUTE + i * (DAY + 1))
        for i in range(20)]
    evidence = Evidence(QUESTION, items, _orthogonal(21), {i.writer: 1 for i in items})
    verdict = evidence.judge(_claims(evidence))
    assert verdict.outcome == "conflict" and "both sides are new" in verdict.reason
    lie = next(s for s in (verdict.support, verdict.opposition)
               if s is not None and s.label == "Marco Bellini")
    assert len(lie.sources) == 20 and not any(source.burst for source in lie.sources)


def test_a_trusted_source_written_now_stands_against_neutral_sources_that_stood_a_year(
        ) -> None:
    """Tier first, as before: time stood never lets lower tiers overturn a trusted source."""
    items = [_item(0, TRUE, "publisher", "trusted", at=YEAR)] + [
        _item(i + 1, lie, f"archive{i}", at=0.0, batch=i) for i, lie in enumerate(LIES)]
    evidence = Evidence(QUESTION, items, _orthogonal(6), {f"archive{i}": 5000 for i in range(5)})
    verdict = evidence.judge(_claims(evidence))
    assert verdict.outcome == "stands" and verdict.support.label == "Ada Lindqvist"
    assert verdict.opposition is not None and verdict.opposition.weight > 5
    assert not verdict.support.only_new  # a trusted source is never new


def test_established_sources_still_add_up_and_a_writer_never_corroborates_itself() -> None:
    """Two independent sources that stood a month outweigh one writer's two passages that
    came later (one source, however many passages)."""
    items = [_item(0, TRUE, "archive", at=0.0), _item(1, TRUE + " Again.", "library", at=0.0),
             _item(2, LIES[0], "rival", at=30 * DAY), _item(3, LIES[1], "rival", at=30 * DAY)]
    evidence = Evidence(QUESTION, items, _orthogonal(4), {"archive": 1000, "library": 1000,
                                                          "rival": 1000})
    verdict = evidence.judge(_claims(evidence))
    assert verdict.outcome == "stands" and len(verdict.support.sources) == 2
    assert all(s.established for s in verdict.support.sources)
    assert verdict.support.weight == pytest.approx(2 * (1 + np.log(31) / np.log(366)))
    assert verdict.opposition is not None and len(verdict.opposition.sources) == 1
    assert verdict.opposition.weight == pytest.approx(1.0)
