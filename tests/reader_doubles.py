"""Shared test doubles of the Ring 3 tests: a reader whose answer no passage holds, and one
that believes a planted claim."""

from __future__ import annotations

from collections.abc import Sequence

from trishield.llm.base import ReaderAnswer


class InventingReader:
    """Test double for a small LLM that answers with words no passage holds (the misreading
    the second reader exists for)."""

    vendor, uses_llm = "test double", False

    def __init__(self, invented: str = "the moon", name: str = "inventing") -> None:
        self.invented, self.name = invented, name

    def answer(self, question: str, passages: Sequence[tuple[str, str]]) -> ReaderAnswer:
        return ReaderAnswer(text=self.invented, citations=[], refused=False, raw=self.invented,
                            prompt_tokens=0, completion_tokens=0, seconds=0.0, cached=False,
                            model=self.name)


class FooledReader:
    """Test double for a small LLM that believes a planted claim: it answers ``believed``
    whenever a passage it is shown contains it, and otherwise reads as ``fallback`` does
    (a model reads a misspelt or paraphrased poison as easily as the truth)."""

    vendor, uses_llm = "test double", False

    def __init__(self, believed: str, fallback, name: str = "fooled") -> None:
        self.believed, self.fallback, self.name = believed, fallback, name

    def answer(self, question: str, passages: Sequence[tuple[str, str]]) -> ReaderAnswer:
        if any(self.believed in text for _, text in passages):
            return ReaderAnswer(text=self.believed, citations=[], refused=False,
                                raw=self.believed, prompt_tokens=0, completion_tokens=0,
                                seconds=0.0, cached=False, model=self.name)
        return self.fallback.answer(question, passages)
