"""The shared tokenizer: its ASCII fast path gives the words the general path gives, at the
same places (BM25 indexes built before it must match queries tokenised after it)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trishield.text import _TOKEN, content_words, index_terms, stem, word_spans, words

ALPHABET = list("aZq09 _'-.,!?\n\t\"()\u2019\u00e9\u0130\u00df\u03a3")


def _general_words(text: str) -> list[str]:
    return [token.lower() for token in _TOKEN.findall(text)]


def _general_spans(text: str) -> list[tuple[str, int, int]]:
    return [(m.group().lower(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=st.sampled_from(ALPHABET), max_size=50)
       | st.text(alphabet=st.characters(codec="ascii"), max_size=50))
def test_the_ascii_fast_path_tokenises_as_the_general_path(text: str) -> None:
    assert words(text) == _general_words(text)
    assert word_spans(text) == _general_spans(text)
    assert index_terms(text) == [stem(w) for w in content_words(text)]


def test_words_keep_apostrophes_inside_and_drop_underscores() -> None:
    assert words("It's O'Neill's snake_case DOG's 12th") == [
        "it's", "o'neill's", "snake", "case", "dog's", "12th"]
    assert words("Zo\u00eb\u2019s caf\u00e9") == ["zo\u00eb\u2019s", "caf\u00e9"]
    assert word_spans("  Big dog.") == [("big", 2, 5), ("dog", 6, 9)]
