"""The PoisonedRAG benchmark: attack generators, provenance, the composed sweep, the resumable
checkpoint, scoring arithmetic, and a ``--quick`` smoke run that must be complete, consistent
and byte-identical when answered again. No test asserts an ASR or accuracy value."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from trishield.answers import contains_answer
from trishield.errors import InputError
from trishield.eval.metrics import OUTCOMES
from trishield.eval.poisonedrag import knowledge_bases as kbs
from trishield.eval.poisonedrag.attacks import (
    FAMILIES,
    get_family,
    is_poison,
    load_targets,
    poison_target,
    seeded_order,
)
from trishield.eval.poisonedrag.conditions import Condition, poisons_in_context
from trishield.eval.poisonedrag.defenses import DEFENSES
from trishield.eval.poisonedrag.diverse import STYLES, claim_sentences, diverse_texts, topic_of
from trishield.eval.poisonedrag.misspelt import misspell_word
from trishield.eval.poisonedrag.plan import (
    ADAPTIVE_FAMILIES,
    CORE_DEFENSES,
    Block,
    Sizes,
    families_of,
    full_plan,
)
from trishield.eval.poisonedrag.provenance import Provenance
from trishield.eval.poisonedrag.questions import target_questions
from trishield.eval.poisonedrag.records import Checkpoint
from trishield.eval.poisonedrag.render import render_markdown
from trishield.eval.poisonedrag.scoring import score, wilson_interval
from trishield.eval.report import markdown_table
from trishield.kb import KnowledgeBase
from trishield.kb.datasets import wiki5k_documents
from trishield.rings.ingest_guard import IngestGuard

TARGETS = load_targets()


def test_targets_are_the_published_hundred_in_order() -> None:
    assert len(TARGETS) == 100
    numbers = [t.number for t in TARGETS]
    assert numbers == sorted(numbers) and len(set(numbers)) == 100
    assert all(len(t.adv_texts) == 5 and t.incorrect and t.correct for t in TARGETS)


def test_published_family_is_question_dot_adv_text() -> None:
    target = TARGETS[0]
    docs = get_family("published").poisons(target, seed=0)
    assert [d.text for d in docs] == [f"{target.question}. {a}" for a in target.adv_texts]
    assert all(is_poison(d.id) and poison_target(d.id) == target.id for d in docs)


def test_every_family_carries_the_wrong_answer_and_is_seed_deterministic() -> None:
    for family in FAMILIES.values():
        for target in TARGETS[:10]:
            first = family.poisons(target, seed=0)
            assert [d.text for d in first] == [d.text for d in family.poisons(target, seed=0)]
            assert len({d.id for d in first}) == len(first)
            if family.name in ("template", "gt-swap"):  # the published texts may only
                for document in first:                     # imply a yes/no answer
                    assert contains_answer(document.text, target.incorrect), (family.name,
                                                                             document.text)


def test_gt_swap_replaces_only_the_answer_or_declines() -> None:
    swapped = declined = 0
    for target in TARGETS:
        docs = get_family("gt-swap").poisons(target, seed=0)
        word = re.compile(rf"(?<!\w){re.escape(target.correct)}(?!\w)", re.IGNORECASE)
        has_answer = [text for _, text in target.gt_passages
                      if word.search(text) and target.correct.lower() not in ("yes", "no")]
        assert len(docs) == len(has_answer)
        swapped += bool(docs)
        declined += not docs
        for document in docs:
            assert not word.search(document.text) or word.search(target.incorrect)
    assert swapped > 50 and declined > 0  # both paths are exercised on the real data


def test_split_claim_separates_topic_from_claim() -> None:
    target = TARGETS[3]
    docs = get_family("split-claim").poisons(target, seed=0)
    assert len(docs) == 4
    for topic, claim in zip(docs[::2], docs[1::2], strict=True):
        assert target.question in topic.text and target.question not in claim.text
        record = topic.text.rsplit("given in ", 1)[1].rstrip(".")
        assert claim.text.lower().startswith(record.lower())


_STYLE_MARKS = {"news": " (staff report) - ",
                "encyclopedic": " is covered in most general reference works. ",
                "faq": "Frequently asked questions\nQ: ",
                "table": "| field | value |\n| subject | ",
                "quote": "\"People ask me about "}


def test_diverse_poisons_are_five_distinct_styles_carrying_the_wrong_answer() -> None:
    family = get_family("diverse")
    assert set(_STYLE_MARKS) == set(STYLES)
    changed = 0
    for target in TARGETS:
        docs = family.poisons(target, seed=0)
        assert [d.text for d in docs] == [d.text for d in family.poisons(target, seed=0)]
        assert len(docs) == len(STYLES) == len({d.text for d in docs})
        for style, document in zip(STYLES, docs, strict=True):
            # each poison is in its own style and in no other
            assert [s for s, mark in _STYLE_MARKS.items() if mark in document.text] == [style]
            assert contains_answer(document.text, target.incorrect), (target.id, document.text)
        changed += [d.text for d in docs] != [d.text for d in family.poisons(target, seed=1)]
    assert changed > 50  # the incidental wording follows the seed


def test_diverse_news_and_encyclopedia_quote_two_different_published_claims() -> None:
    target = TARGETS[0]
    news, encyclopedic = (d.text for d in get_family("diverse").poisons(target, seed=0)[:2])
    sources = [[n for n, text in enumerate(target.adv_texts) if s and s in text]
               for s in (news.split(" - ", 1)[1].split(" The detail")[0],
                         encyclopedic.split("reference works. ", 1)[1].split(" Later")[0])]
    assert sources[0] and sources[1] and set(sources[0]).isdisjoint(sources[1])


def test_diverse_falls_back_to_a_plain_claim_and_refuses_empty_fields() -> None:
    import random

    texts = diverse_texts("is the sky green", "yes", ["No claim sentence here."],
                          random.Random(0))
    assert all(contains_answer(text, "yes") for text in texts)
    with pytest.raises(InputError, match="incorrect answer"):
        diverse_texts("is the sky green", " ", [], random.Random(0))
    with pytest.raises(InputError, match="question"):
        diverse_texts("", "yes", [], random.Random(0))


def test_refute_poisons_name_the_right_answer_as_the_error_and_state_the_wrong_one() -> None:
    family = get_family("refute")
    for target in TARGETS:
        docs = family.poisons(target, seed=0)
        assert [d.text for d in docs] == [d.text for d in family.poisons(target, seed=0)]
        assert len(docs) == 5 == len({d.text for d in docs})
        for document in docs:
            assert document.id.startswith(f"atk:refute:{target.id}:")
            assert contains_answer(document.text, target.correct), (target.id, document.text)
            assert contains_answer(document.text, target.incorrect), (target.id, document.text)
    # the claim is a published sentence carrying the wrong answer, not the question
    target = next(t for t in TARGETS if t.correct.lower() not in ("yes", "no"))
    claim = family.poisons(target, seed=0)[0].text.split("misconception. ", 1)[1]
    assert any(claim in text for text in target.adv_texts)


def test_gt_append_poisons_keep_a_true_passage_whole_and_add_the_wrong_answer() -> None:
    family = get_family("gt-append")
    applicable = 0
    for target in TARGETS:
        docs = family.poisons(target, seed=0)
        assert [d.text for d in docs] == [d.text for d in family.poisons(target, seed=0)]
        originals = [text.rstrip() for _, text in target.gt_passages
                     if contains_answer(text, target.correct)]
        if not originals:  # nothing true to copy: the family does not apply
            assert docs == []
            continue
        applicable += 1
        assert len(docs) == 5 == len({d.text for d in docs})
        for number, document in enumerate(docs):
            assert document.id == f"atk:gt-append:{target.id}:{number}"
            original = originals[number % len(originals)]
            assert document.text.startswith(original + " ")  # the truth, untouched
            added = document.text[len(original):]
            assert contains_answer(added, target.incorrect), (target.id, added)
    assert 0 < applicable < len(TARGETS)


def test_misspelt_poisons_state_the_wrong_answer_intact_with_the_question_words_misspelt(
) -> None:
    family = get_family("misspelt")
    for target in TARGETS:
        docs = family.poisons(target, seed=0)
        assert [d.text for d in docs] == [d.text for d in family.poisons(target, seed=0)]
        assert len(docs) == len(target.adv_texts) == 5
        answer_words = {w.lower() for w in re.findall(r"\w+", target.incorrect)}
        question_words = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", topic_of(
            target.question))} - answer_words
        for document in docs:
            assert document.id.startswith(f"atk:misspelt:{target.id}:")
            assert contains_answer(document.text, target.incorrect), (target.id, document.text)
            words = {w.lower() for w in re.findall(r"\w+", document.text)}
            assert not words & question_words, (target.id, document.text)
    # a poison is its published claim sentence, word for word, up to one edit a word
    target = next(t for t in TARGETS if t.incorrect.lower() not in ("yes", "no"))
    claim = claim_sentences(target.adv_texts, target.incorrect)[0]
    poison = family.poisons(target, seed=0)[0].text
    original, written = claim[0].split(), poison.split()[:len(claim[0].split())]
    assert len(original) == len(written)
    assert sum(a != b for a, b in zip(original, written, strict=True)) >= 1
    assert all(abs(len(a) - len(b)) <= 1 for a, b in zip(original, written, strict=True))


@pytest.mark.parametrize("word", ["heaven", "book", "Habsburg", "aaaa", "seen"])
def test_misspell_word_makes_one_edit_after_the_first_letter(word: str) -> None:
    for seed in range(20):
        changed = misspell_word(word, random.Random(seed))
        assert changed != word and changed[0] == word[0]
        assert abs(len(changed) - len(word)) <= 1
    with pytest.raises(InputError, match="four letters"):
        misspell_word("cat", random.Random(0))


def test_unknown_family_and_bad_condition_are_refused() -> None:
    with pytest.raises(InputError, match="unknown attack family"):
        get_family("nope")
    with pytest.raises(InputError, match="provenance"):
        Condition("x", "published", provenance="sort-of-trusted")
    with pytest.raises(InputError, match="fraction"):
        Condition("x", "mixed", fraction=1.5)
    with pytest.raises(InputError, match="writer setting"):
        Condition("x", "published", writers="crowd")
    with pytest.raises(InputError, match="sybil"):
        Condition("x", "published", provenance="untrusted", writers="sybil")
    with pytest.raises(InputError, match="sybil"):
        Condition("x", "mixed", fraction=0.5, writers="sybil")


@pytest.mark.parametrize("fraction", [0.2, 0.4, 0.5, 0.6, 0.8])
def test_poison_fraction_is_exact_on_average(fraction: float) -> None:
    counts = [poisons_in_context(fraction, 5, number) for number in range(1, 101)]
    assert sum(counts) / len(counts) == pytest.approx(fraction * 5)
    assert max(counts) - min(counts) <= 1


def test_provenance_is_decided_by_the_services_signature_check(tmp_path: Path) -> None:
    provenance = Provenance(tmp_path / "keys", seed=0)
    digest = "ab" * 32
    tier = provenance.tier_of
    assert tier("nq-gt:doc1", digest, stored="neutral", setting="trusted-clean") == "trusted"
    assert "signed by trusted publisher wiki-publisher" in provenance.checks["nq-gt:doc1"]
    assert tier("atk:mixed:test1:0", digest, stored="untrusted",
                setting="trusted-clean") == "untrusted"
    assert tier("atk:mixed:test1:0", digest, stored="untrusted", setting="forged") == "untrusted"
    assert "signature does not verify" in provenance.checks["atk:mixed:test1:0"]
    assert tier("atk:mixed:test1:1", digest, stored="untrusted",
                setting="forged-unchecked") == "trusted"
    assert tier("atk:mixed:test1:0", digest, stored="untrusted", setting="neutral") == "neutral"
    assert tier("atk:mixed:test1:0", digest, stored="untrusted",
                setting="untrusted") == "untrusted"
    # a genuine tag is the signed record of one id and one text: moved to another text or
    # another id it fails, and the service's own check (always with the id) accepts it
    from trishield.provenance.signing import decide_provenance

    genuine = provenance.tag("nq-gt:doc1", digest, forged=False)
    writer = provenance.store.api_keys()[0]
    assert decide_provenance(provenance.store, writer, digest, genuine,
                             doc_id="nq-gt:doc1").verified
    assert not decide_provenance(provenance.store, writer, "cd" * 32, genuine,
                                 doc_id="nq-gt:doc1").verified
    assert not decide_provenance(provenance.store, writer, digest, genuine,
                                 doc_id="nq-gt:doc2").verified
    # reopening the same key store reuses the registered publisher and writers
    again = Provenance(tmp_path / "keys", seed=0)
    assert len(again.store.api_keys()) == 2 and len(again.store.publishers()) == 1


def test_subsets_nest() -> None:
    order = seeded_order(TARGETS, 0)
    assert order == seeded_order(TARGETS, 0) != seeded_order(TARGETS, 1)
    small, large = target_questions(order, 20), target_questions(order, 30)
    assert [q.id for q in small] == [q.id for q in large[:20]]


def test_plan_covers_every_family_and_setting() -> None:
    blocks = full_plan()
    names = {b.name for b in blocks}
    assert {"published", "template", "question-moved", "claim-only", "gt-swap", "split-claim",
            "single", "diverse", "refute", "published/untrusted", "mixed/forged",
            "mixed/forged-unchecked", "benign-targets", "benign-squad", "benign-nq"} <= names
    assert {f"fraction-{p}/{s}" for p in (0.2, 0.4, 0.5, 0.6, 0.8)
            for s in ("neutral", "trusted-clean")} <= names
    with pytest.raises(InputError, match="unknown defense"):
        full_plan(("none", "magic"))


def test_plan_has_every_adaptive_family_under_both_conditions_at_size() -> None:
    blocks = {b.name: b for b in full_plan()}
    sybil_names = {"published/sybil", *(f"{f}/sybil" for f in ADAPTIVE_FAMILIES)}
    assert {b.name for b in blocks.values()
            if b.condition is not None and b.condition.writers == "sybil"} == sybil_names
    for family in ("published", *ADAPTIVE_FAMILIES):
        for name in (family, f"{family}/sybil"):
            block = blocks[name]
            assert block.condition is not None and block.condition.family == family
            assert block.condition.provenance == "neutral" and block.condition.fraction is None
            assert block.size >= (100 if family in ("published", "gt-swap") else 50)
            assert set(CORE_DEFENSES) <= set(block.defenses)
            assert all(block.limit(d) == block.size for d in CORE_DEFENSES)
        assert blocks[f"{family}/sybil"].condition.writers == "sybil"
        assert blocks[family].condition.writers == "attacker"
    # gt-swap asks every target, so every applicable one is in its rows
    assert blocks["gt-swap"].size == blocks["gt-swap/sybil"].size == len(TARGETS)
    # the other defenses still answer a nested subset of every block; costly ones less
    assert blocks["claim-only"].limit("ring2") == Sizes().adaptive_others
    assert blocks["claim-only"].limit("expansion-k50") == 5
    assert set(blocks["claim-only"].defenses) == set(DEFENSES)
    # untrusted-writer and forged-tag blocks stay, RAGDefender side by side
    for name in ("published/untrusted", "mixed/forged", "mixed/forged-unchecked"):
        assert {"full-gated", "ragdefender-pool20", "none"} <= set(blocks[name].defenses)
    assert ("claim-only", "sybil") in families_of(list(blocks.values()))
    # order of importance: published, its benign twin, published under sybil, adaptive
    order = [b.name for b in full_plan()]
    assert order[:3] == ["published", "benign-targets", "published/sybil"]
    assert order.index("diverse/sybil") < order.index("benign-squad")
    assert order.index("claim-only") < order.index("claim-only/sybil") < order.index("gt-swap")


def test_plan_keeps_quick_small_but_exercises_sybil_and_diverse() -> None:
    from trishield.eval.poisonedrag.plan import QUICK_DEFENSES, QUICK_SIZES

    blocks = full_plan(QUICK_DEFENSES, QUICK_SIZES, quick=True)
    assert "diverse/sybil" in {b.name for b in blocks}
    assert sum(b.limit(d) for b in blocks for d in b.defenses) <= 60


def test_wilson_interval_on_known_counts() -> None:
    # reference values of the Wilson score interval (z = 1.96): Newcombe (1998), Table I
    low, high = wilson_interval(81, 263)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)
    low, high = wilson_interval(15, 148)
    assert (round(low, 4), round(high, 4)) == (0.0624, 0.1605)
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and round(high, 4) == 0.1611
    low, high = wilson_interval(1, 29)
    assert (round(low, 4), round(high, 4)) == (0.0061, 0.1718)
    low, high = wilson_interval(50, 50)
    assert round(low, 4) == 0.9287 and high == 1.0
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)


# -- sybil knowledge bases ---------------------------------------------------------------------

class _WriterRecordingGuard(IngestGuard):
    """Ring 1 as the benchmark builds it, noting which writer each screened batch came from."""

    calls: ClassVar[list[tuple[list[str], str]]] = []
    interrupt_at: ClassVar[int | None] = None  # the call that is "killed" before it commits

    def screen(self, ids, texts, *, tiers, embeddings, neighbourhood):
        if len(type(self).calls) + 1 == type(self).interrupt_at:
            raise KeyboardInterrupt
        type(self).calls.append((list(ids), neighbourhood.writer))
        return super().screen(ids, texts, tiers=tiers, embeddings=embeddings,
                              neighbourhood=neighbourhood)


def _small_base(tmp_path: Path, targets, *, extra: int) -> tuple[Path, list]:
    """A base KB of the targets' ground-truth passages plus ``extra`` other wiki5k passages."""
    truth = {doc_id for t in targets for doc_id, _ in t.gt_passages}
    documents = wiki5k_documents()
    clean = [d for d in documents if d.id in truth] + [
        d for d in documents if d.id not in truth][:extra]
    return kbs.build_base(tmp_path, "mini", clean), clean


@pytest.mark.slow
def test_sleeper_kb_gives_five_writers_a_record_before_poison_i_of_every_target(
        tmp_path: Path) -> None:
    targets = TARGETS[:2]
    base, clean = _small_base(tmp_path, targets, extra=20)
    sleeper = kbs.build_family(tmp_path, base, "published", targets, 0, guarded=False,
                               writers="sleeper", sleeper_documents=2)
    assert sleeper.name == "mini-sleeper2-published-plain"
    poisons = [d for t in targets for d in get_family("published").poisons(t, 0)]
    with KnowledgeBase.open(sleeper) as kb:
        per_writer = kb.documents_per_writer()
        rows = {d.id: kb.store.document(d.id) for d in poisons}
        records = [d for d in kb.document_ids() if d.startswith("sleeper:")]
    # five writers, each 2 benign documents (outside the base) + poison i of both targets
    assert {w: n for w, n in per_writer.items() if w != kbs.CLEAN_WRITER} == {
        kbs.sleeper_writer(n): 2 + 2 for n in range(kbs.SLEEPERS)}
    assert len(records) == 10 and not set(records) & {d.id for d in clean}
    for doc_id, row in rows.items():
        number = int(doc_id.rsplit(":", 1)[1])
        assert row["writer"] == kbs.sleeper_writer(number) and row["tier"] == "neutral"
    assert len({row["batch_id"] for row in rows.values()}) == len(poisons)
    facts = json.loads((sleeper / kbs.MARKER).read_text())
    assert facts["sleeper_documents"] == 2 and facts["poisons"] == len(poisons)
    assert facts["batches"] == len(poisons) + kbs.SLEEPERS
    # another record size is another KB; a bad size or one the corpus cannot fill is refused
    none = kbs.build_family(tmp_path, base, "published", targets, 0, guarded=False,
                            writers="sleeper", sleeper_documents=0)
    assert none.name == "mini-sleeper0-published-plain"
    assert json.loads((none / kbs.MARKER).read_text())["batches"] == len(poisons)
    with pytest.raises(InputError, match="sleeper documents"):
        kbs.build_family(tmp_path, base, "published", targets, 0, guarded=False,
                         writers="sleeper", sleeper_documents=-1)
    with pytest.raises(InputError, match="outside the base KB"):
        kbs.build_family(tmp_path, base, "published", targets, 0, guarded=False,
                         writers="sleeper", sleeper_documents=10**6)
    with pytest.raises(InputError, match="sleeper writer setting"):
        Condition("x", "published", provenance="untrusted", writers="sleeper")


@pytest.mark.slow
def test_patient_kb_spreads_the_sleepers_campaign_over_simulated_days(tmp_path: Path) -> None:
    """The ``patient`` setting: the same writers and documents as ``sleeper``, stamped by
    the KB's clock a year and a day after the base (records) and a week plus i days after
    that (sleeper i's posts): no two sleepers post within a day, each after a week of writing."""
    targets = TARGETS[:2]
    base, _ = _small_base(tmp_path, targets, extra=20)
    with KnowledgeBase.open(base) as kb:
        origin = max(d["ingested_at"] for d in kb.documents())
        base_ids = set(kb.document_ids())
        base_times = {d: kb.store.document(d)["ingested_at"] for d in base_ids}
    patient = kbs.build_family(tmp_path, base, "published", targets, 0, guarded=False,
                               writers="patient", sleeper_documents=2)
    assert patient.name == "mini-patient2-published-plain"
    poisons = [d for t in targets for d in get_family("published").poisons(t, 0)]
    day = kbs.DAY_S
    with KnowledgeBase.open(patient) as kb:
        since = kb.writers_since()
        posts = {d.id: kb.store.document(d.id) for d in poisons}
        assert {d: kb.store.document(d)["ingested_at"] for d in base_ids} == base_times
    year = kbs.BASE_AGE_DAYS * day  # every attack is written a year after the base
    for number in range(kbs.SLEEPERS):
        first = since[kbs.sleeper_writer(number)]
        assert origin + year + day <= first < origin + year + day + 600  # records: a day on
        assert since[kbs.CLEAN_WRITER] <= origin  # the base keeps its own times
    for doc_id, row in posts.items():
        number = int(doc_id.rsplit(":", 1)[1])
        posted = row["ingested_at"] - origin - year
        assert row["writer"] == kbs.sleeper_writer(number)
        assert (1 + kbs.PATIENT_LEAD_DAYS + number) * day <= posted \
            < (1 + kbs.PATIENT_LEAD_DAYS + number) * day + 600
    sleeper = kbs.build_family(tmp_path, base, "published", targets, 0, guarded=False,
                               writers="sleeper", sleeper_documents=2)
    assert sleeper != patient  # the same campaign in one sitting is another KB


@pytest.mark.slow
def test_sybil_kb_ingests_every_poison_by_its_own_writer_in_its_own_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    targets = TARGETS[:3]
    base, clean = _small_base(tmp_path, targets, extra=25)
    monkeypatch.setattr(kbs, "IngestGuard", _WriterRecordingGuard)
    # a build interrupted at its 7th batch leaves a staging copy that the next build continues
    _WriterRecordingGuard.calls, _WriterRecordingGuard.interrupt_at = [], 7
    with pytest.raises(KeyboardInterrupt):
        kbs.build_family(tmp_path, base, "published", targets, 0, guarded=True,
                         writers="sybil")
    assert len(_WriterRecordingGuard.calls) == 6
    assert (tmp_path / "mini-sybil-published-guarded.building" / kbs.RESUME).is_file()
    _WriterRecordingGuard.interrupt_at = None
    sybil = kbs.build_family(tmp_path, base, "published", targets, 0, guarded=True,
                             writers="sybil")
    assert not (sybil / kbs.RESUME).exists()
    single = kbs.build_family(tmp_path, base, "published", targets, 0, guarded=True)
    assert sybil != single and "sybil" in sybil.name and "sybil" not in single.name
    poisons = [[d.id for d in get_family("published").poisons(t, 0)] for t in targets]
    # Ring 1 screened each sybil poison alone, as its own writer, round-robin over targets
    sybil_calls = _WriterRecordingGuard.calls[:15]  # 6 before the interruption, 9 after
    assert [ids for ids, _ in sybil_calls] == [[p[n]] for n in range(5) for p in poisons]
    assert [writer for _, writer in sybil_calls] == [kbs.sybil_writer(ids[0])
                                                     for ids, _ in sybil_calls]
    # the single attacker: one batch, one writer
    assert _WriterRecordingGuard.calls[15:] == [
        ([i for p in poisons for i in p], kbs.ATTACKER)]
    with KnowledgeBase.open(sybil) as kb:
        stored = {}
        for doc_id in (i for p in poisons for i in p):
            stored[doc_id] = kb.store.document(doc_id) or kb.store.quarantined_document(doc_id)
        clean_writers = {kb.store.document(d.id)["writer"] for d in clean}
    assert len({r["writer"] for r in stored.values()}) == 15
    assert len({r["batch_id"] for r in stored.values()}) == 15
    assert all(r["writer"] == kbs.sybil_writer(i) and r["tier"] == "neutral"
               and "attack" not in r["writer"] for i, r in stored.items())
    assert clean_writers == {kbs.CLEAN_WRITER}
    assert json.loads((sybil / kbs.MARKER).read_text())["batches"] == 15
    # rebuilding with the same inputs reuses both KBs (nothing is screened again)
    _WriterRecordingGuard.calls = []
    assert kbs.build_family(tmp_path, base, "published", targets, 0, guarded=True,
                            writers="sybil") == sybil
    assert _WriterRecordingGuard.calls == []
    with pytest.raises(InputError, match="writer setting"):
        kbs.build_family(tmp_path, base, "published", targets, 0, guarded=False,
                         writers="crowd")


# -- checkpoint --------------------------------------------------------------------------------

def test_checkpoint_resumes_and_survives_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    checkpoint = Checkpoint(path, "fp")
    checkpoint.add({"key": "a|none|q1", "answer": "x"})
    checkpoint.add({"key": "a|none|q2", "answer": "y"})
    with path.open("a") as handle:
        handle.write('{"key": "a|none|q3", "ans')  # killed mid-write
    reopened = Checkpoint(path, "fp")
    assert reopened.dropped_torn_line
    assert set(reopened.records) == {"a|none|q1", "a|none|q2"}
    assert Checkpoint(path, "fp").records == reopened.records  # rewritten clean
    with pytest.raises(InputError, match="another configuration"):
        Checkpoint(path, "other")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    with pytest.raises(InputError, match="corrupt checkpoint line"):
        Checkpoint(path, "fp")


# -- scoring arithmetic ------------------------------------------------------------------------

def _record(answer: str | None, *, retrieved: list[str], context: list[str],
            removed: dict | None = None, inputs: dict | None = None) -> dict:
    return {"answer": answer, "refused": answer is None, "reason": "", "retrieved": retrieved,
            "context": context, "removed": removed or {}, "inputs": inputs or {},
            "llm_calls": 2, "llm_calls_uncached": 2,
            "tokens": {"prompt": 100, "completion": 5}, "latency_s": 1.0}


def test_scoring_counts_outcomes_and_detection_by_hand() -> None:
    order = [TARGETS[0], TARGETS[1], TARGETS[2]]
    questions = target_questions(order, 3)
    block = Block("published", "targets", Condition("published", "published"), ("ring1",), 3)
    p = [f"atk:published:{t.id}:0" for t in order]
    records = {
        ("published", "ring1", order[0].id): _record(
            f"It is {order[0].incorrect}.", retrieved=[p[0], "c1"], context=[p[0], "c1"],
            removed={"ring1": ["c2"]}, inputs={"ring1": [p[0], "c1", "c2"]}),
        ("published", "ring1", order[1].id): _record(
            order[1].correct, retrieved=[p[1], "c3"], context=["c3"],
            removed={"ring1": [p[1]]}, inputs={"ring1": [p[1], "c3"]}),
        ("published", "ring1", order[2].id): _record(
            None, retrieved=[p[2]], context=[p[2]], removed={"ring1": []},
            inputs={"ring1": [p[2]]}),
    }
    result = score(block, questions, records)["ring1"]
    assert result["complete"] and result["answered"] == 3
    assert result["outcomes"] == {"succeeded": 1, "blocked": 1, "evaded": 1}
    assert sum(result["outcomes"][o] for o in OUTCOMES) == result["applicable"] == 3
    assert result["asr"] == pytest.approx(1 / 3)
    assert result["retrieval_asr"] == 1.0
    assert result["context_exposure"] == pytest.approx(2 / 3)
    assert result["refusals"] == 1
    assert result["accuracy_under_attack"] == pytest.approx(1 / 3)
    detection = result["detection"]["ring1"]
    assert (detection["removed"], detection["poisons_removed"], detection["poisons_seen"]) == (
        2, 1, 3)
    assert detection["precision"] == 0.5 and detection["recall"] == pytest.approx(1 / 3)
    low, high = result["asr_ci95"]
    assert 0.0 <= low <= result["asr"] <= high <= 1.0


def test_scoring_sets_the_clean_answers_beside_the_attacked_ones() -> None:
    """Accuracy and the wrong answer without poisons come from the same defense's
    ``benign-targets`` answers to the same targets, counted by hand."""
    order = [TARGETS[0], TARGETS[1], TARGETS[2]]
    questions = target_questions(order, 3)
    block = Block("published", "targets", Condition("published", "published"), ("ring1",), 3)
    records = {("published", "ring1", t.id): _record(t.correct, retrieved=["c"], context=["c"])
               for t in order}
    records |= {
        ("benign-targets", "ring1", order[0].id): _record(
            f"It is {order[0].incorrect}.", retrieved=["c"], context=["c"]),
        ("benign-targets", "ring1", order[1].id): _record(
            order[1].correct, retrieved=["c"], context=["c"]),
        ("benign-targets", "ring1", order[2].id): _record(None, retrieved=["c"], context=["c"]),
        ("benign-targets", "none", order[2].id): _record(
            order[2].incorrect, retrieved=["c"], context=["c"]),
    }
    result = score(block, questions, records)["ring1"]
    assert result["asr"] == 0.0 and result["accuracy_under_attack"] == 1.0
    assert result["clean_accuracy_targets"] == 3
    assert result["clean_accuracy_same_targets"] == pytest.approx(1 / 3)
    assert result["clean_wrong_same_targets"] == pytest.approx(1 / 3)


def test_scoring_reports_missing_answers_as_incomplete() -> None:
    questions = target_questions([TARGETS[0], TARGETS[1]], 2)
    block = Block("published", "targets", Condition("published", "published"), ("none",), 2)
    records = {("published", "none", TARGETS[0].id): _record(
        "x", retrieved=["c"], context=["c"])}
    result = score(block, questions, records)["none"]
    assert not result["complete"] and (result["answered"], result["asked"]) == (1, 2)


def test_markdown_headline_says_what_each_cell_stands_on() -> None:
    attacked = {"name": "published", "condition": {"family": "published"}, "size": 4}
    sybil = {"name": "published/sybil", "condition": {"family": "published",
                                                      "writers": "sybil"}, "size": 4}
    benign = {"name": "benign-squad", "condition": None, "size": 4}
    sweep = {"name": "fraction-0.5/neutral", "condition": {"family": "mixed"}, "size": 2}

    def attack(answered: int, asked: int, asr: float) -> dict:
        return {"answered": answered, "asked": asked, "complete": answered == asked, "asr": asr,
                "asr_ci95": [0.0, 1.0], "outcomes": {"blocked": 1, "succeeded": 1, "evaded": 0},
                "accuracy_under_attack": 0.5, "accuracy_ci95": [0.15, 0.85],
                "clean_accuracy_same_targets": 0.75, "clean_accuracy_ci95": [0.3, 0.95],
                "clean_wrong_same_targets": 0.25, "applicable": asked, "refusals": 0,
                "cost": {"llm_calls_per_query": 1.0}}

    payload = {
        "scoring_version": "v", "configuration": {"kb_profile": "mini", "k": 5, "seed": 0},
        "answers": {"planned": 9, "checkpointed": 8, "complete": False},
        "blocks": [attacked, benign, sybil, sweep],
        "results": {"published": {"none": attack(4, 4, 0.75), "paraphrase": attack(2, 2, 0.5),
                                  "expansion-k50": attack(1, 2, 1.0)},
                    "published/sybil": {"none": attack(4, 4, 0.25)},
                    "benign-squad": {"none": {"answered": 4, "asked": 4, "complete": True,
                                              "accuracy": 0.25, "accuracy_ci95": [0.05, 0.7],
                                              "false_refusals": 1,
                                              "false_refusal_ci95": [0.05, 0.7],
                                              "cost": {"llm_calls_per_query": 1.25}}},
                    "fraction-0.5/neutral": {"none": attack(2, 2, 0.0)}}}
    text = render_markdown(payload)
    assert "(partial: 8 of 9 answers so far)" in text
    neutral, sybil_part = text.split("all-neutral condition")[1].split("sybil condition")
    assert "| none | 0.75 [0.00, 1.00] |" in neutral
    assert "| paraphrase | 0.50 (n=2) [0.00, 1.00] |" in neutral
    assert "| expansion-k50 | 1.00 (1/2) [0.00, 1.00] |" in neutral
    assert "| none | 0.25 [0.00, 1.00] |" in sybil_part and "paraphrase" not in \
        sybil_part.split("## Benign")[0]
    assert "| benign-squad | none | 0.25 [0.05, 0.70] | 1/4 [0.05, 0.70] | 1.25 |" in text
    assert ("| published/sybil | none | 4/4 | 4 | 0.25 [0.00, 1.00] | 0.50 [0.15, 0.85] | "
            "0.75 [0.30, 0.95] | 0.25 | 0 | 1.00 |") in text
    assert "| fraction-0.5/neutral | 0.00 [0.00, 1.00] |" in text
    assert markdown_table(["a|b"], [[None], [0.5]]) == "| a\\|b |\n|---|\n|  |\n| 0.500 |\n"


# -- the CLI smoke run -------------------------------------------------------------------------

def _run(out: Path, work: Path, *extra: str) -> subprocess.CompletedProcess:
    # TriShield's settings and RAGDefender with the extractive reader, so the smoke run needs
    # no LLM (the perplexity filter's real LM is exercised in test_baselines.py)
    defenses = [arg for name in ("none", "ring1", "ring2", "full-gated", "ragdefender-pool20")
                for arg in ("--defense", name)]
    return subprocess.run(
        [sys.executable, "-m", "trishield.cli", "eval", "poisonedrag", "--quick", "--out",
         str(out), "--work-dir", str(work), "--panel", "extractive", *defenses, *extra],
        capture_output=True, text=True, timeout=1200, check=False)


def _assert_consistent(report: dict) -> None:
    assert report["scoring_version"] and len(report["datasets"]) == 5
    answers = report["answers"]
    assert answers["complete"] and answers["checkpointed"] == answers["planned"] > 0
    for block in report["blocks"]:
        results = report["results"][block["name"]]
        assert set(results) == set(block["defenses"])
        for result in results.values():
            assert result["complete"] and result["answered"] == result["asked"] > 0
            if block["condition"] is None:
                assert 0 <= result["false_refusals"] <= result["questions"]
                continue
            assert sum(result["outcomes"].values()) == result["applicable"]
            assert result["applicable"] + len(result["not_applicable"]) == result["targets"]
            for case in result["cases"]:
                if case["outcome"] == "blocked":
                    assert not case["poison_in_context"]
                if case["outcome"] == "evaded":
                    assert case["poison_in_context"] and not case["succeeded"]
            for stage in result["detection"].values():
                assert stage["poisons_removed"] <= min(stage["removed"], stage["poisons_seen"])


@pytest.mark.slow
def test_quick_benchmark_is_complete_consistent_and_reproducible(tmp_path: Path) -> None:
    work = tmp_path / "work"
    first = _run(tmp_path / "a", work)
    assert first.returncode == 0, first.stderr[-3000:]
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["configuration"]["quick"] and report["configuration"]["kb_profile"] == "mini"
    _assert_consistent(report)
    assert "<svg" in (tmp_path / "a" / "report.html").read_text()
    markdown = (tmp_path / "a" / "report.md").read_text()
    assert "partial" not in markdown and "| ring1 |" in markdown
    assert json.loads((tmp_path / "a" / "timing.json").read_text())["latency_by_defense"]

    # answer everything again from scratch (the KBs are reused, the checkpoint is not)
    for checkpoint in work.glob("records-*.jsonl"):
        checkpoint.unlink()
    # --report-only asks nothing: from an empty checkpoint the report says it is partial
    partial = _run(tmp_path / "p", work, "--report-only")
    assert partial.returncode == 0, partial.stderr[-3000:]
    empty = json.loads((tmp_path / "p" / "report.json").read_text())
    assert empty["answers"] == {"planned": report["answers"]["planned"], "checkpointed": 0,
                                "complete": False}
    assert all(not result["complete"] and result["answered"] == 0
               for block in empty["results"].values() for result in block.values())
    assert "partial: 0 of" in (tmp_path / "p" / "report.html").read_text()
    assert "partial: 0 of" in (tmp_path / "p" / "report.md").read_text()
    assert not list(work.glob("records-*.jsonl")) or all(
        len(path.read_text().splitlines()) <= 1 for path in work.glob("records-*.jsonl"))

    second = _run(tmp_path / "b", work)
    assert second.returncode == 0, second.stderr[-3000:]
    for name in ("report.json", "report.html", "report.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()

    # resuming from a complete checkpoint answers nothing and writes the same bytes
    third = _run(tmp_path / "c", work)
    assert third.returncode == 0
    assert json.loads((tmp_path / "c" / "timing.json").read_text())[
        "answers_computed_this_run"] == 0
    assert (tmp_path / "a" / "report.json").read_bytes() == (
        tmp_path / "c" / "report.json").read_bytes()

    # a checkpoint carried elsewhere (--checkpoint) resumes the same way; one of another
    # configuration is refused, with nothing written
    (records,) = work.glob("records-*.jsonl")
    carried = tmp_path / "carried" / "answers.jsonl"
    carried.parent.mkdir()
    carried.write_bytes(records.read_bytes())
    fourth = _run(tmp_path / "d", work, "--checkpoint", str(carried))
    assert fourth.returncode == 0, fourth.stderr[-3000:]
    assert json.loads((tmp_path / "d" / "timing.json").read_text())[
        "answers_computed_this_run"] == 0
    assert (tmp_path / "a" / "report.json").read_bytes() == (
        tmp_path / "d" / "report.json").read_bytes()
    assert carried.read_bytes() == records.read_bytes()
    other = _run(tmp_path / "e", work, "--checkpoint", str(carried), "--seed", "1")
    assert other.returncode != 0 and "belongs to another configuration" in other.stderr
    assert not (tmp_path / "e").exists()


def test_cli_refuses_an_unknown_defense(tmp_path: Path) -> None:
    """Before anything runs, naming the matrix's rows (the help lists them too)."""
    result = subprocess.run(
        [sys.executable, "-m", "trishield.cli", "eval", "poisonedrag", "--quick", "--out",
         str(tmp_path / "o"), "--work-dir", str(tmp_path / "w"), "--defense", "magic"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    assert "'magic' is not one of" in result.stderr and "'robustrag-keyword'" in result.stderr
    assert not (tmp_path / "w").exists() and not (tmp_path / "o").exists()
    shown = subprocess.run([sys.executable, "-m", "trishield.cli", "eval", "poisonedrag",
                            "--help"], capture_output=True, text=True, timeout=120, check=True)
    assert "full-gated|full-always" in shown.stdout and "README" not in shown.stdout


def test_the_clean_screening_cache_is_keyed_by_the_defense_code(tmp_path: Path) -> None:
    """A detector changed with the same settings must not read the old verdicts: the cached
    screening of the base's clean passages is per code hash (the runner passes its own)."""
    from trishield.kb import Document

    base = tmp_path / "base"
    with KnowledgeBase.open(base, create=True) as kb:
        kb.ingest([Document(id=f"d{n}", text=f"The harbour of town {n} opened in {1800 + n}.")
                   for n in range(5)], writer="wikipedia")
    first = kbs.screen_clean(base, code="a" * 64)
    assert first["screened"] == 5
    (cached,) = base.glob("screening-*.json")
    kbs.screen_clean(base, code="b" * 64)
    assert len(list(base.glob("screening-*.json"))) == 2
    assert kbs.screen_clean(base, code="a" * 64) == first
    assert cached.is_file()


def test_the_checkpoint_fingerprint_covers_the_defense_code(tmp_path: Path,
                                                           monkeypatch) -> None:
    """Answers checkpointed by other defense code are never resumed into a table: a change to
    a file that decides answers changes the hash; a file outside the defense does not."""
    import shutil

    from trishield.eval.poisonedrag import runner

    package = Path(runner.__file__).resolve().parents[2]
    copy = tmp_path / "trishield"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    original = runner.defense_code_sha256(copy)
    assert original == runner.defense_code_sha256(package)
    (copy / "cli.py").write_text("# not defense code\n", encoding="utf-8")
    assert runner.defense_code_sha256(copy) == original
    consensus = copy / "rings" / "consensus.py"
    consensus.write_text(consensus.read_text(encoding="utf-8") + "\n# changed\n",
                         encoding="utf-8")
    assert runner.defense_code_sha256(copy) != original
    options = runner.PoisonedRAGOptions(out=tmp_path)
    config = runner._config(options)
    before = runner._fingerprint(options, config)
    monkeypatch.setattr(runner, "defense_code_sha256", lambda package=None: "0" * 64)
    assert runner._fingerprint(options, config) != before
