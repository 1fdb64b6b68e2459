"""What may be a claim in Ring 3's weighing: answers of the asked kind, not sentences or dumps.

Ring 3 groups the readers' answers into claims and weighs claims by their evidence. Three
things that are not answers were weighed as if they were, and outweighed right answers:

* the extractive member's whole sentence, read as a rival claim: on a SQuAD slice its
  "The Broncos took an early lead..." outvoted the models' "Stanford University";
* a hex dump that a passage holds verbatim ("00000020 00 05 64 69 ...", from a PDF page),
  which outweighed "50", stated by the context and given by two of three members;
* a passage's title, or a phrase that only restates the question.

The rules here keep the weighing to answers: a sentence is a witness for the model answer it
contains (:func:`as_witnesses`), a dump is never a claim (:func:`is_dump`), and where claims
compete only those of the asked kind take part (:func:`answers_as_asked`). Poisons state an
answer of the asked kind, so none of this lets a poison through: it only stops non-answers
from standing against answers.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from trishield.answers import (
    contains_answer,
    is_bare_polar,
    normalize_answer,
    own_terms,
    same_answer,
)
from trishield.rings.claims import answer_type, spans_in
from trishield.rings.questions import asks_yes_or_no

if TYPE_CHECKING:
    from trishield.rings.consensus import Vote


def as_witnesses(votes: Sequence[Vote], question: str) -> list[Vote]:
    """The votes as the weighing reads them: a sentence from a reader that only picks
    sentences (the extractive member, ``llm`` false) counts for the model answer it contains,
    and sits out when it contains none. Read as a claim of its own, a whole sentence ("The
    Broncos took an early lead...") was a rival that outvoted the models' right answer
    ("Stanford University") by the weight of its passage. Alone (no model answered), the
    sentence stays the answer, as before."""
    answered = [v for v in votes if v.llm and not v.refused]
    if not answered:
        return list(votes)
    read = []
    for vote in votes:
        if vote.llm or vote.refused:
            read.append(vote)
            continue
        held = next((v.answer for v in answered if contains_answer(vote.answer, v.answer)
                     or same_answer(v.answer, vote.answer, question)), None)
        read.append(replace(vote, answer=held) if held is not None
                    else replace(vote, refused=True))
    return read


_DUMP_TOKEN = re.compile(r"(?:0x)?[0-9A-Fa-f]{2,16}[:.,]?|[|.*]+")


def is_dump(answer: str) -> bool:
    """A run of hex or number tokens (a hex dump, a table of offsets): never an answer, even
    when a passage holds it verbatim. Six tokens or more, four in five of them hex or number
    tokens (a word of letters alone, even "cafe" or "dead", never counts as one)."""
    tokens = answer.split()
    if len(tokens) < 6:
        return False
    dumpish = sum(1 for token in tokens if _DUMP_TOKEN.fullmatch(token)
                  and not token.isalpha())
    return dumpish >= 0.8 * len(tokens)


_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_DAY_OF_MONTH = re.compile(rf"(?:(?:on\s+)?(?:\w+day,?\s+)?)?(?:{_MONTH}\s+\d{{1,2}}"
                           rf"(?:st|nd|rd|th)?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH})",
                           re.IGNORECASE)
"""A day of a month without a year ("February 2", "2nd of February"): a date answer, which
Ring 2's date spans (a year required) do not read. Dropped as "not a date", the true
"February 2" left the weighing to a year-dated answer from an unrelated paragraph."""


def heading_titles(titled: Iterable[tuple[str, str]]) -> set[str]:
    """The normalised titles, of ``(title, text)`` pairs, that only a heading says: no
    passage with that title states it in its own text.

    A heading restates what its passage is about, so a reader that answers with it may name
    the topic, not the answer ("Introduction"). But an article about its answer names it in
    its first sentence ("The Tiber is the third-longest river in Italy", "Ashrita Furman ...
    holds the Guinness record"): dropping every title dropped such year-old truths from the
    weighing and refused four of the silencing condition's targets as conflicts
    (docs/decisions.md, D41). A title its passage states is an answer like any other."""
    unstated: dict[str, bool] = {}
    for title, text in titled:
        if not title:
            continue
        spoken = title.replace("_", " ")
        key = normalize_answer(spoken)
        unstated[key] = unstated.get(key, True) and not contains_answer(text, spoken)
    return {key for key, only_heading in unstated.items() if only_heading}


def answers_as_asked(answer: str, question: str, titles: Collection[str] = ()) -> bool:
    """Whether ``answer`` is an answer of the kind the question asks for: a number for "how
    many", a date for "when", else a phrase adding a content word to the question; a bare
    yes/no to a yes/no question. A title only a heading says is no answer (``titles``, from
    :func:`heading_titles`)."""
    if is_bare_polar(answer):
        return asks_yes_or_no(question)
    if normalize_answer(answer) in titles:
        return False
    kind = answer_type(question)
    spoken = " ".join(answer.split())
    if kind in ("number", "date") and not spans_in(spoken, kind) and not (
            kind == "date" and _DAY_OF_MONTH.fullmatch(spoken)):
        return False
    return bool(own_terms(answer, question))


_EXACT = re.compile(
    r"--?[A-Za-z0-9][\w-]*"  # a command-line option: -p, --null
    r"|[\w.~-]*/[\w./~-]*\w"  # a path: ./.valgrindrc, /etc/ssh/ssh_config
    r"|\w+(?:_|::)\w[\w:]*"  # an identifier: XML_ParserCreate, std::vector
    r"|\.?\w+\.[A-Za-z]{2,}\w*")  # a file name: compile_commands.json, .npmrc
_EDGE = "\"'`()[]{}<>,;:!?"


def exact_tokens(text: str) -> list[str]:
    """The options, paths, identifiers and file names ``text`` names, as written: what a
    passage must hold verbatim to state it. Word matching reads ``--null`` as "null" and
    ``./.valgrindrc`` as "valgrindrc", both words of questions about them ("terminated by a
    null character", "besides ~/.valgrindrc"), so an answer naming them echoed the question
    and no passage could support it."""
    found = []
    for raw in text.split():
        token = raw.strip(_EDGE).rstrip(".")
        if token and _EXACT.fullmatch(token):
            found.append(token)
    return found


def holds_token(text: str, token: str) -> bool:
    """Whether ``text`` holds ``token`` verbatim, not as part of a longer token."""
    return re.search(rf"(?<![\w./~-]){re.escape(token)}(?![\w/~-])", text) is not None
