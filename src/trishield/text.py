"""Word-level text handling shared by the lexical index and the rings.

One tokenizer for everything lexical, so that BM25, the Ring 1 statistics and Ring 2's
content-word overlap all see the same words.
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache

import Stemmer

_TOKEN = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
_ASCII_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
r""":data:`_TOKEN` on lower-cased ASCII text: there ``[^\W_]`` is exactly ``[A-Za-z0-9]`` and
lower-casing maps letters one to one, so lower-casing the text once and scanning with a plain
class gives the same words at the same places, about 30% faster than lower-casing each
word (tokenising is most of reading a passage at query time). Other text keeps the general
path: there lower-casing first could change a word (U+0130 becomes two characters)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n|\n(?=\s*[-*#])")



def _bm25s_stopwords() -> tuple[str, ...]:
    """bm25s's English stop-word list (``STOPWORDS_EN_PLUS``), read from its module file.

    ``import bm25s.stopwords`` would first run the package's ``__init__``, which imports
    scipy, tqdm and the BM25 implementation (half a second) for a list of words; the
    module itself imports nothing, so it is loaded alone, under a private name.
    """
    package = importlib.util.find_spec("bm25s")
    if package is None or not package.submodule_search_locations:
        raise ImportError("trishield needs bm25s (its stop-word list): pip install bm25s")
    folder = next(iter(package.submodule_search_locations))
    spec = importlib.util.spec_from_file_location("_trishield_bm25s_stopwords",
                                                  f"{folder}/stopwords.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"bm25s has no stopwords.py in {folder}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.STOPWORDS_EN_PLUS)


STOPWORDS: frozenset[str] = frozenset(_bm25s_stopwords())


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits; apostrophes kept inside words)."""
    if text.isascii():
        return _ASCII_TOKEN.findall(text.lower())
    return [token.lower() for token in _TOKEN.findall(text)]


def word_spans(text: str) -> list[tuple[str, int, int]]:
    """:func:`words` with where each word is: ``(lower-cased word, start, end)``."""
    if text.isascii():
        return [(m.group(), m.start(), m.end()) for m in _ASCII_TOKEN.finditer(text.lower())]
    return [(m.group().lower(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of :func:`sentences`, surrounding whitespace
    excluded."""
    spans = []
    start = 0
    for end, after in [(m.start(), m.end()) for m in _SENTENCE_END.finditer(text)] + [
            (len(text), len(text))]:
        part = text[start:end]
        if part.strip():
            lead = len(part) - len(part.lstrip())
            spans.append((start + lead, start + len(part.rstrip())))
        start = after
    return spans


def sentences(text: str) -> list[str]:
    """Split a passage into sentences (a heuristic: punctuation then a capital or digit)."""
    return [text[start:end] for start, end in sentence_spans(text)]


def content_words(text: str) -> list[str]:
    """Words without English stopwords: what carries the meaning of a passage."""
    return [word for word in words(text) if word not in STOPWORDS]


_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Snowball English stem of one lower-cased word."""
    return _STEMMER.stemWord(word)


def index_terms(text: str) -> list[str]:
    """Stemmed content words: what the lexical index matches on ("bicycles" finds "bicycle").
    (:func:`content_words` inlined: Ring 2 calls this for every sentence it reads.)"""
    return [stem(word) for word in words(text) if word not in STOPWORDS]


QUESTION_PHRASING: frozenset[str] = frozenset(stem(word) for word in (
    "appear", "besides", "big", "come", "exactly", "far", "get", "give", "go", "happen",
    "involve", "kind", "know", "large", "long", "make", "many", "mean", "mention", "much",
    "need", "often", "old", "people", "person", "quickly", "say", "soon", "sort", "take",
    "tell", "thing", "took", "told", "type", "usually", "want", "way", "went", "came", "gave",
    "got", "made", "said", "typically",
))
"""Words that phrase a question rather than name what it is about ("how *long* does it
*take*", "what did she *say*"): a knowledge base need not contain them to answer it."""
