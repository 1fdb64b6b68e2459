"""Shared test double of the Ring 3 tests: a reader whose answer no passage holds."""

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
