"""Answer normalisation and matching, shared by Ring 3's vote and the evaluation metrics.

``normalize_answer`` and ``token_f1`` follow the official SQuAD v1.1 evaluation script
(lower-case, strip punctuation and the articles a/an/the, collapse whitespace), so that numbers
TriShield reports are comparable with published ones.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

from trishield.text import STOPWORDS, sentences, stem

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
REFUSAL_MARKERS = (
    "i don't know", "i do not know", "i dont know", "don't know", "cannot answer",
    "can't answer", "not enough information", "no answer", "not mentioned", "not provided",
    "does not contain", "doesn't contain", "insufficient information",
)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalisation: lower, no punctuation, no articles, single spaces."""
    lowered = text.lower()
    no_punctuation = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", no_punctuation).split())


def answer_tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 between a prediction and one gold answer."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    common = Counter(predicted) & Counter(expected)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def contains_answer(text: str, answer: str) -> bool:
    """``answer`` appears in ``text`` after normalisation (PoisonedRAG's substring criterion)."""
    needle = normalize_answer(answer)
    return bool(needle) and f" {needle} " in f" {normalize_answer(text)} "


def is_refusal(text: str) -> bool:
    """An empty answer or one that says the context does not hold the answer."""
    lowered = " ".join(text.lower().replace("\u2019", "'").split())
    return not normalize_answer(text) or any(marker in lowered for marker in REFUSAL_MARKERS)


_DECIMAL_ZEROS = re.compile(r"(\d)\.0+\b")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


_HYPHENS = re.compile(r"[\u2010-\u2013\u2212\ufe63\uff0d]")
"""Unicode hyphens and the en dash (hyphen, non-breaking hyphen, figure dash, en dash, minus,
small and full-width hyphen-minus): they join what the ASCII hyphen joins ("1951\u201352")."""
_DASHES = re.compile(r"[\u2014\u2015\ufe58]")
"""The em dash and its kin separate words ("Paris\u2014the capital")."""


def canonical_numbers(text: str) -> str:
    """"$15.00" -> "$15", "1,000" -> "1000", "1951\u201352" -> "1951-52": before SQuAD
    normalisation glues the digits.

    Why the dashes: SQuAD normalisation drops the ASCII hyphen (string.punctuation) but keeps
    every other dash inside its token, so a reader's "1951-52" and the passage's
    "1951\u201352" were different terms and the answer was refused as stated by no passage
    (NQ-open, on the wiki5k benchmark). A hyphen-like dash is read as the hyphen, then dropped
    alike; an em dash as the space it stands for."""
    text = _DASHES.sub(" ", _HYPHENS.sub("-", text))
    return _THOUSANDS.sub("", _DECIMAL_ZEROS.sub(r"\1", text))


_BRACKETS = re.compile(r"[\[\](){}]")


def _unbracketed(text: str) -> str:
    """Brackets as spaces: SQuAD normalisation drops punctuation without a space, which glues
    a citation mark to the word before it ("spin-off.[40]" would read "spinoff40")."""
    return _BRACKETS.sub(" ", text)


_SMALL_NUMBERS = ("zero", "", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                  "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                  "seventeen", "eighteen", "nineteen", "twenty")
NUMBER_WORDS: dict[str, str] = {word: str(value) for value, word in enumerate(_SMALL_NUMBERS)
                                if word} | {
    "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
    "eighty": "80", "ninety": "90", "hundred": "100"}
"""Number words read as digits when terms are compared, so "2 weeks" is stated by "two weeks"
(the safety suite refused exactly that). "one" is left out: it is far more often a pronoun
("the one who"), and reading it as 1 would let any passage state the answer "1"."""

_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
COMPOUND_NUMBER_WORDS: dict[str, str] = {
    f"{tens}{unit}": str(20 + 10 * t + u + 1)
    for t, tens in enumerate(_TENS) for u, unit in enumerate(_UNITS)}
""""Thirty-three" as 33: SQuAD normalisation drops the hyphen and glues the two words into one
term ("thirtythree"), which no digit answer matched, so a reader's "33" was refused as stated
by no passage that says "Thirty-three amendments" (NQ). Unambiguous, "one" included."""

_COMPOUND = re.compile(r"\b(" + "|".join(_TENS) + r")[-\u2010\u2011 ](" + "|".join(_UNITS)
                       + r")\b", re.IGNORECASE)
_NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)


def number_words_as_digits(text: str) -> str:
    """``text`` with the number words of :data:`NUMBER_WORDS` written as digits ("two weeks"
    -> "2 weeks"), for comparing an answer with a gold answer."""
    text = _COMPOUND.sub(lambda m: COMPOUND_NUMBER_WORDS[(m[1] + m[2]).lower()], text)
    return _NUMBER_WORD.sub(lambda m: NUMBER_WORDS[m.group(1).lower()], text)


IRREGULAR_FORMS: dict[str, str] = {
    form: base
    for line in (
        "began begun:begin", "became:become", "broke broken:break", "brought:bring",
        "built:build", "bought:buy", "caught:catch", "chose chosen:choose", "drew drawn:draw",
        "drove driven:drive", "ate eaten:eat", "fought:fight", "flew flown:fly",
        "forgot forgotten:forget", "froze frozen:freeze", "gave given:give", "went gone:go",
        "grew grown:grow", "hid hidden:hide", "held:hold", "kept:keep", "knew known:know",
        "led:lead", "lost:lose", "made:make", "met:meet", "paid:pay", "ran:run",
        "rode ridden:ride", "said:say", "sold:sell", "sent:send", "shot:shoot",
        "sang sung:sing", "sank sunk:sink", "sat:sit", "slept:sleep", "spoke spoken:speak",
        "spent:spend", "stood:stand", "stole stolen:steal", "struck stricken:strike",
        "swam swum:swim", "taught:teach", "took taken:take", "told:tell", "thought:think",
        "threw thrown:throw", "understood:understand", "woke woken:wake", "wore worn:wear",
        "won:win", "wrote written:write", "fled:flee", "sought:seek", "shook shaken:shake",
        "risen:rise", "fallen:fall", "bitten:bite", "dug:dig", "fed:feed",
        "forgave forgiven:forgive", "hung:hang", "lent:lend", "meant:mean", "shone:shine",
        "swore sworn:swear", "swept:sweep", "undertook undertaken:undertake",
        "withdrew withdrawn:withdraw", "wove woven:weave", "overcame:overcome")
    for forms, base in [line.split(":")] for form in forms.split()}
"""Irregular past forms read as their verb when an answer's terms are compared: the stemmer
leaves "began" as "began", so a reader's "The history of the steam engine began in the first
century AD", asked "When did the history of the steam engine begin?", added a term ("began")
no passage held and was refused (SQuAD). Forms that are also other words are left out
("found", "left", "saw", "lay", "rose", "fell", "felt", "bore", "wound", "ground")."""


def _term(token: str) -> str:
    return (NUMBER_WORDS.get(token) or COMPOUND_NUMBER_WORDS.get(token)
            or stem(IRREGULAR_FORMS.get(token, token)))


def answer_core(answer: str, question: str = "") -> list[str]:
    """The answer's own terms: normalised, stemmed, minus the question's terms and stopwords.

    "The Halden Bridge was opened in 1912" asked "When was the Halden Bridge opened?" has the
    core ``["1912"]``, so it agrees with a model that answered just "1912". An answer that only
    echoes the question keeps all its terms (it has no core to compare).
    """
    return own_terms(answer, question) or _terms(answer)


def _tokens(text: str) -> list[str]:
    return answer_tokens(canonical_numbers(_unbracketed(text)))


def _terms(text: str) -> list[str]:
    return [_term(t) for t in _tokens(text)]


def _content(tokens: Iterable[str]) -> list[str]:
    """The terms of ``tokens`` that are not stopwords, neither as written nor stemmed: the
    one test of a content term for answers, questions and offered alternatives. Testing only
    the stem kept "does", "because" and "during" (stems "doe", "becaus", "dure") as terms an
    answer adds; testing only the word kept "others" (stem "other")."""
    return [term for token in tokens
            if token not in STOPWORDS and (term := _term(token)) not in STOPWORDS]


def own_terms(answer: str, question: str = "") -> list[str]:
    """The answer's content terms that are not the question's: what it *adds*. An answer
    without any ("Student discount" to "What discount do students get?") only echoes the
    question and states nothing a passage could back."""
    asked = set(_terms(question))
    return [t for t in _content(_tokens(answer)) if t not in asked]


MAX_CORE_TERMS = 12
"""A short answer: at most this many core terms."""
MAX_STATEMENT_TERMS = 30
"""A one-sentence statement (what the extractive reader returns) may hold a short answer; a
longer text is a passage, not an answer, and agrees only with the same text."""
_NEGATIONS = frozenset({"not", "no", "never", "cannot", "none", "nor", "neither", "nothing",
                        "doesnt", "dont", "isnt", "arent", "wasnt", "werent", "cant", "wont",
                        "didnt", "hasnt", "havent", "shouldnt", "wouldnt", "couldnt",
                        "mustnt", "excluded", "excludes"})
_POLAR = {"yes": True, "no": False}


def _numbers(terms: list[str]) -> set[str]:
    return {t for t in terms if any(ch.isdigit() for ch in t)}


def polarity(answer: str) -> bool | None:
    """True for an answer that starts with "yes", False for "no", else None."""
    tokens = answer_tokens(answer)
    return _POLAR.get(tokens[0]) if tokens else None


def is_bare_polar(answer: str) -> bool:
    """Just "yes" or "no" (punctuation aside): nothing in it a passage could contain."""
    tokens = answer_tokens(answer)
    return len(tokens) == 1 and tokens[0] in _POLAR


def polar_support(answer: str, text: str, question: str) -> bool:
    """Whether ``text`` backs a bare yes/no: one of its sentences is about the question (half of
    its content terms) and is negated exactly when the answer is "no".

    "No" to "Can opened software be refunded?" is backed by "Opened software is not
    refundable" and contradicted by "Opened software can be refunded within 30 days"."""
    wanted = polarity(answer)
    return wanted is not None and any(_statement_polarity(sentence, question) == wanted
                                      for sentence in sentences(text))


def decides(answer: str, text: str, question: str) -> bool:
    """Whether ``text`` states the fact that decides a bare yes/no: one of its sentences holds
    *every* content term of the question (number words as digits) and is negated exactly when
    the answer is "no".

    "No" to "Is wear and tear covered by the warranty?" is decided by "The warranty does not
    cover wear and tear"; a sentence that shares only some of the terms ("What the warranty
    does not cover", asked about water damage to a headlamp) decides nothing. Requiring every
    term, not half (:func:`polar_support`), is what keeps near-miss questions unanswered."""
    wanted = polarity(answer)
    asked = set(_content(_tokens(question)))
    if wanted is None or not asked:
        return False
    for sentence in sentences(text):
        tokens = answer_tokens(canonical_numbers(sentence))
        negated = any(t in _NEGATIONS for t in tokens)
        if asked <= {_term(t) for t in tokens} and negated != wanted:
            return True
    return False


def speaks_about(text: str, question: str) -> bool:
    """Whether ``text`` holds every content term of the question but at most one (and at least
    two, or all of a shorter question's), anywhere in it: a passage worth reading for a
    yes/no question one source at a time (Ring 3's reading by passage).

    Not every term in one sentence (:func:`decides`): the reader decides, not the words, and
    "The stories are set in a forest in India" answers "Does the Jungle Book take place in
    India?" without "take". Not half of them either: a passage about another thing of the same
    kind ("Cress is the third book in The Lunar Chronicles and fourth chronologically", asked
    about a 4th book of the Kane Chronicles) lacks the question's subject, and a small model
    reads such a near miss as "yes"."""
    asked = set(_content(_tokens(question)))
    said = set(_terms(text))
    return bool(asked) and len(asked - said) <= 1 and len(asked & said) >= min(2, len(asked))


ALTERNATIVE_WINDOW = 2
"""How many content terms on each side of a question's "or" name the alternatives it offers."""


def offered_terms(answer: str, question: str) -> list[str]:
    """The answer's terms among the alternatives ``question`` offers: the content terms within
    :data:`ALTERNATIVE_WINDOW` of its "or" ("north", "goa" for "North Goa" to "baga beach is
    in north or south goa"), less the terms both offers hold ("nearby stars or distant stars"
    offers "nearby" and "distant": a passage saying "nearby objects" picks one). Empty when
    the question offers none, or when the answer names neither term next to the "or"
    ("Baga Beach" picks no offer: it only echoes the question).

    Why: an answer to such a question picks one of the offers in the question's own words,
    so :func:`own_terms` finds nothing it adds and the answer read as an echo of the question
    (2 of 100 benign NQ questions refused on the wiki5k benchmark)."""
    tokens = _tokens(question)
    if "or" not in tokens:
        return []
    at = tokens.index("or")
    before = _content(tokens[:at])[-ALTERNATIVE_WINDOW:]
    after = _content(tokens[at + 1:])[:ALTERNATIVE_WINDOW]
    shared = set(before) & set(after)  # "stars" in "nearby stars or distant stars"
    before = [t for t in before if t not in shared]
    after = [t for t in after if t not in shared]
    named = [t for t in _content(_tokens(answer)) if t in set(before) | set(after)]
    nearest = set(before[-1:] + after[:1])  # what tells the offers apart: "north", "south"
    return named if nearest & set(named) else []


def names_an_offer(text: str, terms: list[str]) -> bool:
    """Whether one sentence of ``text`` holds every one of ``terms``: an offered alternative is
    stated where it is said, not where a passage about both offers mentions each somewhere."""
    wanted = set(terms)
    return bool(wanted) and any(wanted <= set(_terms(sentence)) for sentence in sentences(text))


def _statement_polarity(statement: str, question: str) -> bool | None:
    """Whether a statement answers a yes/no question positively: None when it is not about
    the question (shares fewer than half of the question's content terms)."""
    tokens = answer_tokens(statement)
    asked = set(_content(answer_tokens(question)))
    said = {_term(t) for t in tokens}
    if not asked or len(asked & said) * 2 < len(asked):
        return None
    return not any(t in _NEGATIONS for t in tokens)


def same_answer(first: str, second: str, question: str = "") -> bool:
    """Two answers agree when the shorter one's core terms all appear in the longer one's, the
    longer states no number the shorter lacks (when the shorter states exactly one), the shorter
    is a short answer (:data:`MAX_CORE_TERMS`) and the longer at most one sentence
    (:data:`MAX_STATEMENT_TERMS`); identical answers always agree. A bare "yes"/"no" agrees
    with the same polarity, and with a statement about the question whose negation matches.

    "24" and "24 episodes" agree; "30 days" and "90 days" do not; "Paris" and "Paris, France"
    agree; "$15" and "Shipping to Canada costs $15.00 per order" agree when asked about the cost
    of shipping to Canada; "No" and "The warranty does not cover wear and tear" agree when asked
    whether wear and tear is covered. Empty answers never agree with anything.
    """
    if not normalize_answer(first) or not normalize_answer(second):
        return False
    if normalize_answer(first) == normalize_answer(second):
        return True
    polar = polarity(first), polarity(second)
    if polar[0] is not None and polar[1] is not None:
        return polar[0] == polar[1]
    if polar[0] is not None or polar[1] is not None:
        bare, statement = (first, second) if polar[0] is not None else (second, first)
        if not is_bare_polar(bare):
            return False  # "Yes, it costs $15" vs "$20": compare as statements would mislead
        return _statement_polarity(statement, question) == polarity(bare)
    a, b = answer_core(first, question), answer_core(second, question)
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) > MAX_CORE_TERMS or len(long) > MAX_STATEMENT_TERMS:
        return False
    if not set(short) <= set(long):
        return False
    stated = _numbers(short)
    # one stated number must not gain a rival ("30 days" vs "30 or 90 days"); an answer that
    # states several (an address, a date) may gain detail ("..., OR 97209")
    return len(stated) != 1 or _numbers(long) <= stated
