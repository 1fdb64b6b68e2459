"""The extractive reader (no LLM) and LLMReader's prompt and reply handling."""

from __future__ import annotations

import pytest

from trishield.llm import NO_ANSWER, ExtractiveReader, GenerationParams, LLMReader, LLMResponse
from trishield.llm.base import ChatMessage
from trishield.llm.reader import INSTRUCTION, parse_reply
from trishield.text import sentences

PASSAGES = [
    ("policy-1", "Northwind accepts returns of unused items. Refunds are issued within 14 days "
                 "of receiving the item. Shipping costs are not refunded."),
    ("handbook-3", "The company was founded in 1998 by Maria Lopez in Lisbon. It employs 240 "
                   "people across four offices."),
    ("shipping-2", "Standard shipping takes 3 to 5 business days. Express shipping costs 12 "
                   "euros and arrives the next day."),
]


@pytest.mark.parametrize(("question", "sentence", "citation"), [
    ("How many days until refunds are issued?", "Refunds are issued within 14 days", "policy-1"),
    ("Who founded the company?", "founded in 1998 by Maria Lopez", "handbook-3"),
    ("When was the company founded?", "founded in 1998 by Maria Lopez", "handbook-3"),
    ("How much does express shipping cost?", "Express shipping costs 12 euros", "shipping-2"),
    ("How many people does the company employ?", "It employs 240 people", "handbook-3"),
])
def test_extractive_reader_picks_the_answering_sentence(question: str, sentence: str,
                                                        citation: str) -> None:
    answer = ExtractiveReader().answer(question, PASSAGES)
    assert sentence in answer.text
    assert answer.citations == [citation]
    assert not answer.refused and answer.model == "extractive"
    assert answer.prompt_tokens == answer.completion_tokens == 0


def test_extractive_reader_refuses_without_overlap() -> None:
    answer = ExtractiveReader().answer("What is the boiling point of mercury?", PASSAGES)
    assert answer.refused and answer.text == NO_ANSWER and answer.citations == []


def test_extractive_reader_is_deterministic_and_prefers_earlier_passages() -> None:
    reader = ExtractiveReader()
    question = "When are refunds issued?"
    first = reader.answer(question, PASSAGES)
    assert all(reader.answer(question, PASSAGES).text == first.text for _ in range(5))
    twins = ["Refunds are issued within 14 days.", "Refunds are issued within 30 days."]
    assert reader.answer(question, twins).citations == ["1"]  # bare strings cite positions
    assert reader.answer(question, twins[::-1]).text == twins[1]


def test_sentence_splitting() -> None:
    text = "It opened in 1889. It is 330 m tall! Who built it?\n\n- a bullet\n- another"
    assert sentences(text) == ["It opened in 1889.", "It is 330 m tall!", "Who built it?",
                               "- a bullet", "- another"]


class ScriptedBackend:
    """A stand-in chat model that returns a fixed reply and keeps the prompts it was sent."""

    name = "scripted"
    vendor = "Test"
    identity = "scripted"

    def __init__(self, reply: str, chat_template: bool = True):
        self.reply = reply
        self.chat_template = chat_template
        self.sent: list[tuple[list[ChatMessage], GenerationParams]] = []

    def chat(self, messages: list[ChatMessage], params: GenerationParams) -> LLMResponse:
        self.sent.append((messages, params))
        return LLMResponse(self.reply, "scripted", 100, 4, 0.5, False)


def test_llm_reader_prompt_is_short_numbered_and_greedy() -> None:
    backend = ScriptedBackend("Answer: Maria Lopez.\nShe founded it in Lisbon.")
    answer = LLMReader(backend).answer("Who founded the company?", PASSAGES)
    assert (answer.text, answer.refused, answer.citations) == ("Maria Lopez", False,
                                                               ["handbook-3"])
    assert answer.raw == backend.reply and answer.prompt_tokens == 100
    [(messages, params)] = backend.sent
    assert messages[0] == {"role": "system", "content": INSTRUCTION}
    user = messages[1]["content"]
    assert user.startswith("Context:\n[1] Northwind accepts returns")
    assert "\n[3] Standard shipping" in user and user.endswith("Question: Who founded the company?")
    assert params.temperature == 0.0 and params.max_tokens == 48


def test_llm_reader_uses_a_few_shot_completion_prompt_for_base_models() -> None:
    backend = ScriptedBackend(" 1998", chat_template=False)
    reader = LLMReader(backend)
    assert reader.prompt_style == "few-shot"
    answer = reader.answer("When was the company founded?", PASSAGES)
    assert answer.text == "1998" and answer.citations == ["handbook-3"]
    [(messages, params)] = backend.sent
    assert len(messages) == 1 and messages[0]["content"].endswith("Answer:")
    assert params.stop == ("\n",)


@pytest.mark.parametrize("reply", ["I don't know.", "I don\u2019t know", "", "  \n ",
                                   "The context does not contain the answer.",
                                   "Answer: I do not know"])
def test_llm_reader_refusals(reply: str) -> None:
    answer = LLMReader(ScriptedBackend(reply)).answer("What is the CEO's shoe size?", PASSAGES)
    assert answer.refused and answer.text == NO_ANSWER and answer.citations == []


@pytest.mark.parametrize(("reply", "expected"), [
    ("Paris", "Paris"), ("Answer: 14 days.", "14 days"), ("**Answer:** Lisbon", "Lisbon"),
    ('"Maria Lopez"', "Maria Lopez"), ("A: 240\nbecause the handbook says so", "240"),
    ("A-10 Thunderbolt", "A-10 Thunderbolt"),
])
def test_parse_reply(reply: str, expected: str) -> None:
    assert parse_reply(reply) == (expected, False)


def test_unknown_prompt_style_is_refused() -> None:
    with pytest.raises(ValueError, match="prompt style"):
        LLMReader(ScriptedBackend("x"), "socratic")  # type: ignore[arg-type]


ADDRESS = ("Returns sent by post should be mailed to Northwind Returns, 1200 Harbor Road, "
           "Portland, OR 97209. Please include your order number.")


@pytest.mark.parametrize(("question", "reply", "expected"), [
    # the first line of an address is completed with the rest the passage states
    ("Where do I mail my return?", "Northwind Returns",
     "Northwind Returns, 1200 Harbor Road, Portland, OR 97209"),
    ("Where do I mail my return?", "1200 Harbor Road", "1200 Harbor Road, Portland, OR 97209"),
    # not a where-question, or no number in what follows: the answer stays as read
    ("Who handles returns sent by post?", "Northwind Returns", "Northwind Returns"),
])
def test_a_where_answer_is_the_whole_address_its_passage_states(question: str, reply: str,
                                                                 expected: str) -> None:
    answer = LLMReader(ScriptedBackend(reply)).answer(question, [("refund-policy", ADDRESS)])
    assert answer.text == expected and answer.citations == ["refund-policy"]


@pytest.mark.parametrize(("reply", "passage"), [
    ("Paris", "The office is in Paris, France, near the river."),
    ("Brazil", "The river flows through Brazil, Peru and Colombia."),
    ("Lisbon", "It was founded in Lisbonia, 1998, by Maria Lopez."),  # not a whole word there
])
def test_place_lists_and_names_are_not_grown(reply: str, passage: str) -> None:
    answer = LLMReader(ScriptedBackend(reply)).answer("Where is it?", [("p", passage)])
    assert answer.text == reply
