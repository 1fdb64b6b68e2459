"""Claims read once: the memoised, question-once reading of a passage (:func:`claim_of`)
gives exactly what the straightforward per-passage reading gave, cold or warm."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trishield.rings import claims
from trishield.rings.claims import (
    MAX_SPANS,
    WINDOW_WORDS,
    PassageClaim,
    Span,
    StoredReading,
    answer_type,
    claim_of,
    clear_memo,
    passage_claim,
    question_terms,
    read_passage,
    read_question,
    spans_in,
    subject_terms,
)
from trishield.text import STOPWORDS, index_terms, sentences, stem


def _reference_spans(sentence: str, kind: str, asked_words: set[str]) -> list:
    """The per-call span search as it was before the memo (every regex on every call)."""
    found = []
    if kind in ("date", "any"):
        found += [(m.start(), m.end(), Span(m.group(0), claims._key(m.group(0)), "date"))
                  for m in claims._DATE.finditer(sentence)]
    if kind in ("number", "any"):
        found += [(m.start(), m.end(), Span(m.group(0), claims._key(m.group(0)), "number"))
                  for m in claims._NUMBER.finditer(sentence)]
    if kind in ("name", "any"):
        for match in claims._NAME.finditer(sentence):
            text = match.group(0).rstrip(".'\u2019-&")
            start = match.start()
            while (opening := re.match(r"[\w']+\s+", text)) and (
                    opening.group(0).strip().lower() in STOPWORDS):
                text, start = text[opening.end():], start + opening.end()
            words = re.findall(r"[\w']+", text.lower())
            if not [w for w in words if w not in STOPWORDS]:
                continue
            if start == 0 and len(words) == 1:
                continue
            found.append((start, start + len(text), Span(text, claims._key(text), "name")))
    return [(s, e, span) for s, e, span in found
            if span.key and not {stem(w) for w in span.key.split()} <= asked_words]


def _reference_claim(question: str, text: str, title: str = "") -> PassageClaim:
    """:func:`passage_claim` as it was: the question re-read and the text re-tokenised for
    every passage, every sentence and every span window; ``title``'s terms count as said in
    every sentence (and so in the passage)."""
    said = set(index_terms(title.replace("_", " ")))
    kind = answer_type(question)
    asked = question_terms(question)
    share = len(asked & (set(index_terms(text)) | said)) / len(asked) if asked else 0.0
    asked_words = {stem(w) for w in re.findall(r"[\w']+", question.lower())}
    scored = []
    order = 0
    for sentence in sentences(text):
        overlap = len(asked & (set(index_terms(sentence)) | said))
        if not overlap:
            continue
        for start, end, span in _reference_spans(sentence, kind, asked_words):
            before = sentence[:start].split()[-WINDOW_WORDS:]
            after = sentence[end:].split()[:WINDOW_WORDS]
            local = len(asked & set(index_terms(" ".join(before + after))))
            scored.append((overlap + 2 * local, order, span))
            order += 1
    spans: list[Span] = []
    for _, _, span in sorted(scored, key=lambda item: (-item[0], item[1])):
        if span.key not in {s.key for s in spans}:
            spans.append(span)
    return PassageClaim(share, tuple(spans[:MAX_SPANS]))


QUESTIONS = [
    "how many episodes are in chicago fire season 4",
    "when did the Halden Bridge open",
    "who designed the Halden Bridge?",
    "what is the capital of France",
    "where did he go when he left carthage",
    "what percentage of the vote did Ada Lindqvist win in 1912",
]
TEXTS = [
    "The fourth season of Chicago Fire was ordered on February 5, 2015, by NBC. "
    "The season contained 23 episodes.",
    "Season 4 of Chicago Fire.",
    "The Halden Bridge was designed by the engineer Ada Lindqvist and opened in 1912. "
    "It cost $4,500,000 (about 12% over budget) and took twenty-three months.",
    "Remarkably, the Halden Bridge design came from architect Marco Bellini of Milan! "
    "\"It opened on 3 May 1913,\" said the mayor.\n\nParis is the capital of France.",
    "In the 19th century Carthage was a ruin; he went to Rome and then to the Isle of Man.",
    "Bananas are rich in potassium.",
    "",
]


@pytest.mark.parametrize("question", QUESTIONS)
def test_claims_equal_the_straightforward_reading_cold_and_warm(question: str) -> None:
    clear_memo()
    cold = [claim_of(read_question(question), text) for text in TEXTS]
    warm = [passage_claim(question, text) for text in TEXTS]
    expected = [_reference_claim(question, text) for text in TEXTS]
    assert cold == expected and warm == expected


WORD = st.sampled_from([
    "The", "the", "Halden", "Bridge", "bridge", "designed", "by", "Ada", "Lindqvist", "of",
    "van", "Marco", "Bellini", "1912", "1912s", "May", "3", "23", "$4,500", "12%", "twenty",
    "three", "twenty-three", "episodes", "season", "4", "19th", "century", "in", "opened",
    "BC", "it's", "O'Neill", "Zoë", "(about", "over)", "and", "&", "Co.", "U.S.", "—"])
TEXT = st.lists(st.tuples(WORD, st.sampled_from([" ", " ", " ", ". ", ", ", "! ", "\n\n",
                                                 "\n- ", "? \"", " "])),
                max_size=40).map(lambda parts: "".join(w + sep for w, sep in parts).strip())


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(question=st.sampled_from(QUESTIONS), text=TEXT)
def test_claims_equal_the_straightforward_reading_on_generated_text(question: str,
                                                                    text: str) -> None:
    assert passage_claim(question, text) == _reference_claim(question, text)


TITLES = ["", "Halden Bridge", "Halden_Bridge", "Chicago Fire (season 4)", "Carthage",
          "Ada Lindqvist", "The Bridge"]


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(question=st.sampled_from(QUESTIONS), text=TEXT, title=st.sampled_from(TITLES))
def test_a_title_counts_as_said_in_every_sentence_stored_or_not(question: str, text: str,
                                                               title: str) -> None:
    """The document's title is the passage's subject: read with the text, from the memo and
    from the stored reading, exactly as if every sentence also said it."""
    expected = _reference_claim(question, text, title)
    asked, subject = read_question(question), subject_terms(title)
    assert claim_of(asked, text, subject=subject) == expected
    assert claim_of(asked, text, StoredReading.of(text), subject) == expected


def test_a_title_names_what_the_text_leaves_to_it() -> None:
    """An encyclopaedia paragraph rarely repeats its article's name: "Completed in 1998, it
    is a steel sculpture" answers "when was the angel of the north built" in the article
    *Angel of the North*, and is no answer without it."""
    asked = read_question("when did the angel of the north get built")
    text = "Completed in 1998, it is a steel sculpture of an angel, 20 metres tall."
    alone = claim_of(asked, text)
    assert not alone.about_question and not alone.answers
    titled = claim_of(asked, text, subject=subject_terms("Angel of the North"))
    assert titled.answers and titled.spans[0].text == "1998"
    assert subject_terms("Victoria_and_Albert_Museum") == subject_terms(
        "Victoria and Albert Museum") == "albert museum victoria"
    assert subject_terms("") == ""


ODD = "aZ9 .!?\"')[(\n-*#\u2019'_\u00e9\u0130"
"""Sentence ends, quotes, brackets, list marks, apostrophes and letters that change length
when lower-cased."""


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(text=st.text(alphabet=st.sampled_from(list(ODD)), max_size=60) | TEXT)
def test_a_passages_terms_are_the_union_of_its_sentences_terms(text: str) -> None:
    """The memo tokenises each sentence only: no word may cross a sentence boundary."""
    assert read_passage(text).terms == frozenset(index_terms(text))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(sentence=st.text(alphabet=st.sampled_from(list("ab1 \t\n.,")), max_size=40),
       cut=st.tuples(st.integers(0, 40), st.integers(0, 40)))
def test_a_span_window_is_the_words_either_side_of_it(sentence: str,
                                                      cut: tuple[int, int]) -> None:
    start, end = sorted(cut)
    before = sentence[:start].split()[-WINDOW_WORDS:]
    after = sentence[end:].split()[:WINDOW_WORDS]
    assert claims._window(sentence, start, end) == frozenset(index_terms(" ".join(before
                                                                                  + after)))


def test_the_memo_is_bounded_and_refuses_an_unknown_span_kind() -> None:
    assert read_passage.cache_info().maxsize == claims.MEMO_PASSAGES
    assert spans_in.cache_info().maxsize == claims.MEMO_SENTENCES
    with pytest.raises(ValueError, match="unknown span kind 'money'"):
        spans_in("It cost 5 dollars.", "money")


NUMBERISH = st.lists(st.sampled_from([
    "one", "One", "seventeen", "seven", "twenty", "-", " ", "  ", "five", "hundred", "ten",
    "often", "tent", "1", "1,500", "2.5", "%", " %", "$", "\u00a3", ".", "'s", "_", "x",
    "\u017fix", "\u212a", "\n", "Thousand", "million"]), max_size=25).map("".join)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(sentence=NUMBERISH)
def test_numbers_scanned_apart_equal_the_one_scan(sentence: str) -> None:
    assert ([(m.start(), m.end()) for m in claims._numbers(sentence)]
            == [(m.start(), m.end()) for m in claims._NUMBER.finditer(sentence)])
