"""The reader's prompt always fits its model's window, counted with the model's own tokenizer.

A real GGUF model (SmolLM2-135M, the smallest) started with a small window, and passages far
longer than that window: before packing, llama.cpp refused such a request every time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trishield.errors import ContextOverflowError
from trishield.llm import CachedBackend, LLMReader, ResponseCache
from trishield.llm.context_budget import MIN_PASSAGE_TOKENS, fit_passages, trim_to
from trishield.llm.local import LocalGGUFBackend
from trishield.llm.reader import build_messages
from trishield.models.gguf import GGUF_MODELS, install_gguf

pytestmark = pytest.mark.slow

WINDOW = 512
QUESTION = "Which port does the Freedonia relay listen on by default?"
FILLER = ("The relay keeps a journal of every message it forwards and rotates the journal "
          "when it grows past its limit. ")
ANSWER_SENTENCE = "By default the Freedonia relay listens on port 7311."
HEX_DUMP = " ".join(f"{i:08x} 00 05 64 69 7f 3a 9c e1 00 00 00 20" for i in range(400))


@pytest.fixture(scope="module")
def backend() -> LocalGGUFBackend:
    install_gguf(GGUF_MODELS["smollm2-135m"])
    return LocalGGUFBackend("smollm2-135m", n_ctx=WINDOW)


def _long_passages() -> list[tuple[str, str]]:
    # each passage alone is several times the window
    return [("manual", FILLER * 30 + ANSWER_SENTENCE + " " + FILLER * 30),
            ("dump", HEX_DUMP),
            ("notes", FILLER * 60)]


def test_passages_far_longer_than_the_window_are_packed_and_answered(
        backend: LocalGGUFBackend) -> None:
    pairs = _long_passages()
    whole = build_messages(QUESTION, pairs, "chat")
    assert backend.count_prompt_tokens(whole) > 4 * WINDOW  # the unpacked prompt overflows

    reader = LLMReader(backend, max_tokens=16)
    answer = reader.answer(QUESTION, pairs)  # before packing: llama.cpp refused this request
    assert answer.prompt_tokens <= WINDOW - 16
    assert "context packed into 512 tokens" in answer.packing
    assert answer.raw.strip()


def test_packing_keeps_the_sentences_nearest_the_question_and_drops_the_last(
        backend: LocalGGUFBackend) -> None:
    def build(kept: list[tuple[str, str]]) -> list[dict[str, str]]:
        return build_messages(QUESTION, kept, "chat")

    pairs = _long_passages()
    packed, messages, packing = fit_passages(QUESTION, pairs, build, backend, 16)
    assert packing is not None and packing.changed
    assert packing.prompt_tokens == backend.count_prompt_tokens(messages) <= WINDOW - 16 - 8
    kept = dict(packed)
    # the answer's sentence holds most of the question's terms: it survives the cut
    assert ANSWER_SENTENCE in kept["manual"]
    # passages are cut, never reworded: every kept text is made of the original's words
    for pid, text in packed:
        assert set(text.split()) <= set(dict(pairs)[pid].split())
    # the order the caller gave (most important first) is kept; what is dropped is the last
    assert [pid for pid, _ in packed] == [pid for pid, _ in pairs][:len(packed)]
    assert list(packing.dropped) == [pid for pid, _ in pairs][len(packed):]


def test_a_prompt_that_fits_is_sent_as_built(backend: LocalGGUFBackend) -> None:
    pairs = [("a", ANSWER_SENTENCE), ("b", FILLER)]
    packed, messages, packing = fit_passages(
        QUESTION, pairs, lambda kept: build_messages(QUESTION, kept, "chat"), backend, 16)
    assert packed == pairs and messages == build_messages(QUESTION, pairs, "chat")
    assert packing is not None and not packing.changed and packing.describe() == ""


def test_a_question_that_cannot_fit_alone_is_its_own_error(backend: LocalGGUFBackend) -> None:
    reader = LLMReader(backend, max_tokens=16)
    question = "Which relay option " + "really " * 700 + "sets the port?"
    with pytest.raises(ContextOverflowError, match="the question alone takes") as raised:
        reader.answer(question, [("a", ANSWER_SENTENCE)])
    assert raised.value.exit_code == 6


def test_a_cached_answer_needs_no_count(backend: LocalGGUFBackend, tmp_path: Path) -> None:
    cached = CachedBackend(backend, ResponseCache(tmp_path))
    reader = LLMReader(cached, max_tokens=16)
    first = reader.answer(QUESTION, _long_passages())
    second = reader.answer(QUESTION, _long_passages())
    assert second.cached and second.text == first.text and second.packing == first.packing
    short = [("a", ANSWER_SENTENCE)]
    reader.answer(QUESTION, short)
    messages = build_messages(QUESTION, short, "chat")
    assert cached.has_response(messages, reader.params)


def test_trimming_cuts_one_overlong_sentence_around_the_question() -> None:
    sentence = "word " * 300 + "the relay port is 7311 " + "word " * 300
    cut = trim_to("Which relay port?", sentence, tokens=700, share=MIN_PASSAGE_TOKENS)
    assert "relay port" in cut and len(cut) < len(sentence) / 5
