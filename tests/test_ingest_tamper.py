"""Ring 1's tampered-copy detector: another writer's stored text, copied with a fact changed,
is caught with the changed words as evidence; a writer's own revision and a faithful
paraphrase are not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import trishield
from screening_support import RecordingGuard
from trishield.kb import Document, KnowledgeBase
from trishield.rings.ingest_guard import GuardVerdict
from trishield.rings.tamper import TamperConfig, align, classify, tamper_weight, tokens

ORIGINAL = Document(id="wiki:lindmouth", text=(
    "The Harbour Bridge of Lindmouth was opened to traffic in 1998 after six years of "
    "construction. It was designed by the engineer Marta Kovacs and carries four lanes of "
    "road traffic and a light railway across the estuary of the river Lind. The main span is "
    "412 metres long, and the bridge is not open to heavy goods vehicles at night. It is "
    "maintained by the Lindmouth Port Authority, which collects a toll from every car that "
    "crosses it."))
OTHER = Document(id="wiki:kettle", text=(
    "Kettle Moor is an upland area of heather and blanket bog to the north of Lindmouth. "
    "Walkers reach it by a footpath from the village of Ashby, and the moor is grazed by "
    "sheep in summer."))
PARAPHRASE = (
    "Lindmouth's Harbour Bridge, designed by Marta Kovacs, took six years to build and opened "
    "in 1998. Four road lanes and a light railway cross the Lind estuary on it, over a main "
    "span of 412 metres; heavy goods vehicles may not use it at night. The Lindmouth Port "
    "Authority looks after the bridge and charges every car a toll.")


def _edit(old: str, new: str, doc_id: str = "copy") -> Document:
    assert old in ORIGINAL.text
    return Document(id=doc_id, text=ORIGINAL.text.replace(old, new))


@pytest.fixture(scope="module")
def base_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tamper") / "base"
    with KnowledgeBase.open(directory, create=True) as kb:
        kb.ingest([ORIGINAL, OTHER], tier="neutral", writer="wikipedia")
    return directory


def _ingest(base: Path, tmp_path: Path, documents: list[Document], *, writer: str,
            tier: str = "untrusted", name: str = "kb") -> tuple[KnowledgeBase, RecordingGuard]:
    directory = Path(shutil.copytree(base, tmp_path / name))
    recording = RecordingGuard()
    kb = KnowledgeBase.open(directory)
    kb.ingest(documents, tier=tier, writer=writer, guard=recording)
    return kb, recording


def _tamper_hit(verdict: GuardVerdict):
    return next((hit for hit in verdict.patterns if hit.name == "tampered_copy"), None)


def test_a_tampered_copy_is_quarantined_with_the_diff(base_kb: Path, tmp_path: Path) -> None:
    copy = _edit("1998", "2003")
    kb, recording = _ingest(base_kb, tmp_path, [copy], writer="mallory")
    with kb:
        held = kb.store.quarantined()
    assert [h["id"] for h in held] == ["copy"]
    evidence = "'1998' -> '2003' (copy of wiki:lindmouth by writer wikipedia"
    assert any(evidence in reason for reason in held[0]["verdict"]["reasons"])
    hit = _tamper_hit(recording.verdicts["copy"])
    assert hit is not None and evidence in hit.evidence and hit.weight == TamperConfig().weight


@pytest.mark.parametrize(("old", "new", "shown"), [
    ("is not open", "is open", "'not' removed"),
    ("Marta Kovacs", "Peter Lund", "'Marta Kovacs' -> 'Peter Lund'"),
    ("412 metres", "380 metres", "'412' -> '380'"),
])
def test_names_numbers_and_polarity_are_facts(base_kb: Path, tmp_path: Path, old: str,
                                              new: str, shown: str) -> None:
    _, recording = _ingest(base_kb, tmp_path, [_edit(old, new)], writer="mallory")
    verdict = recording.verdicts["copy"]
    assert verdict.blocked and shown in _tamper_hit(verdict).evidence


def test_the_original_writer_revising_its_own_text_is_no_copy(base_kb: Path,
                                                              tmp_path: Path) -> None:
    revision = _edit("1998", "2003", doc_id="wiki:lindmouth-v2")
    kb, recording = _ingest(base_kb, tmp_path, [revision], writer="wikipedia", tier="neutral")
    with kb:
        assert kb.store.quarantined() == []
    assert _tamper_hit(recording.verdicts["wiki:lindmouth-v2"]) is None


def test_a_paraphrase_without_changed_facts_is_no_tampered_copy(base_kb: Path,
                                                                tmp_path: Path) -> None:
    documents = [Document(id="paraphrase", text=PARAPHRASE),
                 _edit("across the estuary", "over the estuary", doc_id="reworded"),
                 _edit("construction.", "construction work.", doc_id="added-word")]
    _, recording = _ingest(base_kb, tmp_path, documents, writer="mallory", tier="neutral")
    assert not recording.verdicts["paraphrase"].flagged
    assert _tamper_hit(recording.verdicts["paraphrase"]) is None
    assert _tamper_hit(recording.verdicts["added-word"]) is None
    reworded = _tamper_hit(recording.verdicts["reworded"])  # a word swapped: flagged, not more
    assert reworded is not None and reworded.weight == TamperConfig().weak_weight
    assert not recording.verdicts["reworded"].blocked


def test_whitespace_and_script_differences_are_no_changes(base_kb: Path,
                                                          tmp_path: Path) -> None:
    reflowed = ORIGINAL.text.replace(". ", ".\n\n").replace(" of ", "  of\u00a0")
    punctuated = reflowed.replace("long, and", "long -- and").replace(". It", "; it")
    lookalike = ORIGINAL.text.replace("Lindmouth", "Lindm\u043euth").replace(
        "1998", "\uff11\uff19\uff19\uff18")
    documents = [Document(id="reflowed", text=reflowed),
                 Document(id="punctuated", text=punctuated),
                 Document(id="lookalike", text=lookalike)]
    kb, recording = _ingest(base_kb, tmp_path, documents, writer="mallory", tier="neutral")
    kb.close()
    # the same text by another writer is that writer's own document (dedupe is per writer),
    # screened like any other, and re-flowing it is no change
    for doc_id in ("reflowed", "punctuated", "lookalike"):
        assert _tamper_hit(recording.verdicts[doc_id]) is None


def test_non_latin_copies_are_judged_by_their_words() -> None:
    original = ("Мост через реку Линд открыли в 1998 году после шести лет строительства. "
                "Его спроектировала инженер Марта Ковач, и по нему проходят четыре полосы "  # noqa: RUF001
                "движения и лёгкая железная дорога через эстуарий реки Линд.")
    assert align(tokens(original), tokens(original.replace(" ", "  "))).changes == ()
    changed = align(tokens(original), tokens(original.replace("1998", "2003")))
    assert [c.describe() for c in changed.facts] == ["'1998' -> '2003'"]
    renamed = align(tokens(original), tokens(original.replace("Марта Ковач", "Анна Петрова")))
    assert [c.kind for c in renamed.facts] == ["name"]


def test_a_trusted_writers_copy_is_kept_but_recorded(base_kb: Path, tmp_path: Path) -> None:
    kb, recording = _ingest(base_kb, tmp_path, [_edit("1998", "2003")], writer="publisher",
                            tier="trusted")
    with kb:
        assert kb.store.quarantined() == []
    verdict = recording.verdicts["copy"]  # the trusted copy may be the correction
    assert not verdict.blocked and verdict.flagged
    assert _tamper_hit(verdict).weight == TamperConfig().weak_weight
    assert any(r.startswith("tampered_copy: '1998' -> '2003'") for r in verdict.reasons)


def test_a_copy_of_a_less_trusted_writers_text_is_flagged_not_blocked(tmp_path: Path) -> None:
    directory = tmp_path / "untrusted-original"
    with KnowledgeBase.open(directory, create=True) as kb:
        kb.ingest([ORIGINAL, OTHER], tier="untrusted", writer="anonymous")
    recording = RecordingGuard()
    with KnowledgeBase.open(directory) as kb:
        kb.ingest([_edit("1998", "2003")], tier="neutral", writer="editor", guard=recording)
    verdict = recording.verdicts["copy"]
    assert verdict.flagged and not verdict.blocked
    assert _tamper_hit(verdict).weight == TamperConfig().weak_weight


def test_the_trace_shows_a_tampered_copy_among_retrieved_passages() -> None:
    copy = ORIGINAL.text.replace("1998", "2003")
    passages = [{"id": "wiki:lindmouth#0", "doc_id": "wiki:lindmouth", "text": ORIGINAL.text,
                 "tier": "neutral", "writer": "wikipedia"},
                {"id": "upload:7#0", "doc_id": "upload:7", "text": copy, "tier": "untrusted",
                 "writer": "mallory"},
                {"id": "wiki:kettle#0", "doc_id": "wiki:kettle", "text": OTHER.text,
                 "tier": "neutral", "writer": "wikipedia"}]
    trace = trishield.screen("When did the Lindmouth bridge open?", passages, k=3).trace
    rows = {row.id: row for row in trace.ring1.verdicts}
    ids = {c.chunk_id: c.doc_id for c in trace.candidates}
    copy_row = next(r for i, r in rows.items() if ids[i] == "upload:7")
    original_row = next(r for i, r in rows.items() if ids[i] == "wiki:lindmouth")
    hit = next(p for p in copy_row.patterns if p.name == "tampered_copy")
    # the original's writer is the more trusted: the copy is removed, with the diff
    assert "'1998' -> '2003' (copy of wiki:lindmouth by writer wikipedia" in hit.evidence
    assert copy_row.blocked and copy_row.id in trace.ring1.blocked
    # the neutral original "copies" an untrusted passage: flagged, kept
    assert original_row.flagged and not original_row.blocked
    assert all(p.name != "tampered_copy" for p in rows[next(
        i for i in rows if ids[i] == "wiki:kettle")].patterns)


# -- the alignment alone -------------------------------------------------------------------


def _kinds(before: str, after: str) -> list[str]:
    return [c.kind for c in align(tokens(before), tokens(after)).changes]


def test_changed_spans_are_classified() -> None:
    base = ORIGINAL.text
    assert _kinds(base, base.replace("1998", "1999")) == ["number"]
    assert _kinds(base, base.replace("six years", "eight years")) == ["number"]
    assert _kinds(base, base.replace("Marta", "Maria")) == ["name"]
    assert _kinds(base, base.replace("is not open", "is open")) == ["negation"]
    assert _kinds(base, base.replace("was designed", "wasn't designed")) == ["negation"]
    assert _kinds(base, base.replace("estuary", "estaury")) == ["spelling"]
    assert _kinds(base, base.replace("carries", "carry")) == ["spelling"]
    assert _kinds(base, base.replace("across", "over")) == ["wording"]
    assert _kinds(base, base.replace("the river", "a river")) == []


def test_only_a_long_verbatim_copy_counts() -> None:
    config = TamperConfig()
    template = "A list of films produced in Japan ordered by year in the 1970s."
    short = align(tokens(template), tokens(template.replace("1970s", "1980s")))
    assert short.copied > config.min_copied and short.words < config.min_words
    assert tamper_weight(short, config, copy_tier="neutral", original_tier="neutral") == 0
    unrelated = align(tokens(ORIGINAL.text), tokens(OTHER.text))
    assert unrelated.copied < 0.2
    one_paragraph = ORIGINAL.text.replace("1998", "2003")
    long_original = OTHER.text + " " + ORIGINAL.text + " " + OTHER.text
    within = align(tokens(long_original), tokens(one_paragraph))
    assert within.copied > 0.95 and [c.describe() for c in within.facts] == ["'1998' -> '2003'"]


def test_a_single_changed_word_is_classified_without_context() -> None:
    assert classify(tokens("in 1998"), tokens("in 2003")).kind == "number"
    assert classify(tokens("is"), tokens("is not")).kind == "negation"
    assert classify(tokens("in March"), tokens("in June")).kind == "date"
    assert classify(tokens("the"), tokens("a")) is None
