"""Which sentences are questions: a small rule-based detector, no model.

Poisons written the PoisonedRAG way paste the target question in front of the claim, usually
lower-cased and without its question mark ("who won the american league pennant in 2017.
..."), so a question mark cannot be required. Starting with a wh-word is not enough either:
documentation is full of declaratives that do ("When set for the `npm init` command, ...",
"Where possible, use ...", "Which of these you choose depends on ...", "How it works"). What
tells them apart is English word order. Sentences are :func:`trishield.text.sentence_spans`
(a stop then a capital or digit, or a paragraph break: a line-wrapped sentence is one sentence,
so a wrapped line that starts "which are followed by ..." is not a sentence of its own), also
cut after every question mark. A sentence of 3-30 words is a question when:

1. it ends with ``?`` (followed by the end of the text or a new sentence) and one of its first
   three words is an interrogative or an auxiliary ("Can opened software be refunded?", "So
   what did they decide?"). Not every ``?`` ends a question: titles ("Boy or Girl?", "Man's
   Favorite Sport?") and uncertain dates ("Elizabeth Price (1698? - 1750)") have them; or
2. it opens with an interrogative (optionally after a preposition: "in which year did ...")
   in a position only a question puts it:
   - ``when``/``where``/``why`` directly followed by an auxiliary or modal (subject-auxiliary
     inversion: "when did", "where is"). Followed by anything else they open a subordinate
     clause ("When set ...", "Where possible ...").
   - ``who``/``whom``: followed by anything but a pronoun, a determiner or "to" ("who won the
     ...", "who is ..."; not "Who we are", "For Whom the Bell Tolls", "whom to contact").
   - ``what``/``which``/``whose`` (+ a noun phrase): an auxiliary within the next five words
     before any subject pronoun ("what river is ...", "which of the following is ..."; not
     "Which of these you choose depends ..."). Not directly before a determiner or pronoun
     ("What the docs call ...", "What you need ..."), and not the free relative "what
     <verb>s is|was" ("What follows is ...").
   - ``how``: directly followed by an auxiliary ("how does ...") or by a degree word ("how
     many", "how long", ...) with no subject pronoun before the next auxiliary ("how long do
     nhl players stay"; not "How it works", "How to install", "How long it takes depends").
   - a contraction of an interrogative and an auxiliary ("what's", "who's").
3. it opens with an auxiliary or modal directly followed by a subject (a pronoun, a
   determiner, "there", "all", ...) and has no comma: a yes/no question ("does the jungle book
   take place in india", "is there a 4th book ..."). The comma rule keeps inverted
   conditionals out ("Should the file be missing, ..."); a name after the auxiliary keeps
   titles out ("Do Lafzon Ki Kahani is a series").

Rules 2 and 3 do not apply to a sentence that opens with a quotation mark: its first words are
a quoted title ("``Did It for the Girl'' is a song ..."), not its own word order; nor to what
follows a question mark inside a sentence ("Who dat? is an English idiom"); nor to a question
that is the *subject* of the sentence it sits in, its ``?`` followed by the sentence's verb
("Where Does it Hurt? is a 1972 American comedy film", "Where Are You Going, Alfonso XII?
was ..."): a title, named, not asked. And in rule 3 a form of *have* followed by a
determiner is the main verb of a declarative ("has a star on the Walk of Fame", "had the most
successful panel", as a window cut mid-sentence opens; "have a look at ...") unless a
participle follows the determiner within three words, the length of a short subject ("has the
us ever won", "had the film been released"): *have* inverts with its subject only as an
auxiliary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trishield.text import sentence_spans, word_spans

INTERROGATIVES = frozenset({"who", "whom", "whose", "what", "which", "when", "where", "why",
                            "how"})
AUXILIARIES = frozenset({
    "is", "are", "was", "were", "am", "do", "does", "did", "has", "have", "had", "can", "could",
    "will", "would", "shall", "should", "may", "might", "must", "isn't", "aren't", "wasn't",
    "weren't", "don't", "doesn't", "didn't", "hasn't", "haven't", "hadn't", "can't", "cannot",
    "couldn't", "won't", "wouldn't", "shouldn't", "mustn't",
})
PRONOUNS = frozenset({"i", "you", "we", "they", "he", "she", "it"})
DETERMINERS = frozenset({"the", "a", "an", "this", "that", "these", "those", "my", "your",
                         "our", "their", "his", "her", "its"})
POLAR_SUBJECTS = PRONOUNS | DETERMINERS | {"there", "all", "any", "some", "every", "each"}
PREPOSITIONS = frozenset({"in", "on", "at", "for", "from", "to", "by", "with", "of", "during",
                          "since", "until", "into", "about", "after", "before"})
DEGREE_WORDS = frozenset({"many", "much", "long", "old", "far", "often", "big", "tall", "large",
                          "high", "deep", "wide", "fast", "soon", "early", "late"})
HAVE = frozenset({"has", "have", "had"})
PARTICIPLE_CUES = frozenset({"been", "ever", "never", "already", "yet", "got", "gotten",
                             "done", "gone", "seen", "won", "made", "become", "come"})
WINDOW = 5
SUBJECT_WINDOW = 3
"""Words after *have* + determiner in which an inverted question's participle shows."""
MIN_WORDS, MAX_WORDS = 3, 30
_AFTER_QUESTION_MARK = re.compile(r"(?<=\?)\s+")
QUOTES = ("\"", "'", "`", "\u201c", "\u2018", "\u00ab")


@dataclass(frozen=True)
class Question:
    """A question sentence: its number in the text, its span, and the span of its cue, the
    words that make it a question (from its first word to the interrogative or auxiliary that
    decided it)."""

    number: int
    start: int
    end: int
    cue_start: int
    cue_end: int


def _interrogative_cue(tokens: list[str], has_comma: bool) -> int:
    """How many leading tokens make this sentence a question by word order (0: none)."""
    first = 1 if (len(tokens) > 2 and tokens[0] in PREPOSITIONS
                  and tokens[1] in {"which", "what", "whom", "whose"}) else 0
    word = tokens[first]
    head, _, tail = word.partition("'")
    if tail and head in INTERROGATIVES:
        return first + 1  # what's, who's
    following = tokens[first + 1:]
    if not following:
        return 0
    after = following[0]
    if word in INTERROGATIVES:
        if after in AUXILIARIES:
            return first + 2
        if word in {"when", "where", "why"}:
            return 0
        if word in {"who", "whom"}:
            return 0 if after in PRONOUNS | DETERMINERS | {"to"} else first + 2
        if after in PRONOUNS | DETERMINERS | {"to"}:
            return 0
        if word == "how" and after not in DEGREE_WORDS:
            return 0
        if (word == "what" and len(following) > 1 and following[1] in {"is", "was"}
                and after.endswith("s") and len(after) > 3):
            return 0  # "What follows is ...": a free relative clause
        for offset, token in enumerate(following[:WINDOW]):
            if token in AUXILIARIES:
                return first + offset + 2
            if token in PRONOUNS:
                return 0
        return first + 2 if word == "how" else 0
    if word in AUXILIARIES and first == 0 and after in POLAR_SUBJECTS and not has_comma:
        if word in HAVE and after in DETERMINERS and not _participle_follows(following[1:]):
            return 0  # "has a star on ...": have as the main verb, not inverted
        return 2
    return 0


def _participle_follows(tokens: list[str]) -> bool:
    """Whether a past participle (or the adverbs that stand between *have* and one) is among
    the next :data:`SUBJECT_WINDOW` tokens: regular ones end in -ed, common irregular ones are
    listed."""
    return any(token in PARTICIPLE_CUES or (token.endswith("ed") and len(token) > 3)
               or (token.endswith("en") and len(token) > 4)
               for token in tokens[:SUBJECT_WINDOW])


def _sentences(text: str) -> list[tuple[int, int, bool, bool, bool]]:
    """:func:`sentence_spans`, also cut after a question mark whatever follows it, so that a
    title ending in one ("Who dat? is an English idiom") stays a short sentence of its own.
    Three flags: *continued*, the rest of such a cut sentence ("is an English idiom"), whose
    first words are not where a question's word order would show; *last*, the last piece of a
    sentence, whose question mark (if it has one) ends the sentence; *subject*, a piece whose
    ``?`` is followed by the sentence's verb (an auxiliary: "Where Does it Hurt? is a 1972
    film"), a title that is the subject of the sentence."""
    spans = []
    for start, end in sentence_spans(text):
        continued = False
        for match in _AFTER_QUESTION_MARK.finditer(text, start, end):
            rest = word_spans(text[match.end():end])
            subject = bool(rest) and rest[0][0] in AUXILIARIES
            spans.append((start, match.start(), continued, False, subject))
            start, continued = match.end(), True
        spans.append((start, end, continued, True, False))
    return spans


def _marked_cue(tokens: list[str]) -> int:
    """For a sentence ending in ``?``: how many leading tokens up to an interrogative or an
    auxiliary among its first three words (0: none, a title such as "Boy or Girl?")."""
    for index, token in enumerate(tokens[:3]):
        if token in INTERROGATIVES or token in AUXILIARIES or token.partition("'")[0] in (
                INTERROGATIVES):
            return index + 1
    return 0


def questions(text: str) -> list[Question]:
    """The question sentences of ``text``, in order (see the module for the rules)."""
    found = []
    for number, (start, end, continued, last, subject) in enumerate(_sentences(text)):
        sentence = text[start:end]
        spans = word_spans(sentence)
        if not MIN_WORDS <= len(spans) <= MAX_WORDS:
            continue
        tokens = [word for word, _, _ in spans]
        cue_words = 0
        if not (continued or subject or sentence.startswith(QUOTES)):
            cue_words = _interrogative_cue(tokens, "," in sentence)
        if not cue_words and last and sentence.endswith("?"):
            cue_words = _marked_cue(tokens)
        if not cue_words:
            continue
        cue = (start + spans[0][1], start + spans[cue_words - 1][2])
        found.append(Question(number, start, end, *cue))
    return found


def asks_for_a_thing(question: str) -> bool:
    """Whether ``question`` opens with an interrogative ("what", "who", "how", "what's"): it
    asks for a thing, not a polarity, so a "yes" or "no" answering it is a word a passage says
    ("what do you say when you win bingo": "Yes"), not a polarity a sentence must decide."""
    tokens = re.findall(r"[\w']+", question.lower())
    return bool(tokens) and tokens[0].partition("'")[0] in INTERROGATIVES


def asks_yes_or_no(question: str) -> bool:
    """Whether ``question`` is a yes/no question: it opens with an auxiliary or modal ("Can
    opened software be refunded?", "Is wear and tear covered ...") and offers no alternatives
    ("Is the store open on Sunday or Monday?" asks which, so it has no "or").

    Ring 3 uses it to let the context decide a yes/no question its readers misread: only a
    question that asks for a polarity can be answered by one."""
    tokens = re.findall(r"[\w']+", question.lower())
    return bool(tokens) and tokens[0] in AUXILIARIES and "or" not in tokens
