"""The demo corpus: Northwind Outfitters' company policies, shipped with the package."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DEMO_WRITER = "northwind-policy-team"
ATTACKER = "mallory"


@dataclass(frozen=True)
class DemoQuestion:
    id: str
    question: str
    answer: str
    doc: str


def corpus_dir() -> Path:
    return Path(str(resources.files("trishield.demo") / "corpus"))


def questions() -> list[DemoQuestion]:
    raw = (resources.files("trishield.demo") / "questions.json").read_text(encoding="utf-8")
    return [DemoQuestion(**entry) for entry in json.loads(raw)]


@dataclass(frozen=True)
class DemoAttack:
    """A targeted question, the attacker's answer, and the documents that plant it."""

    id: str
    question: str
    target: str
    correct: str
    documents: list[dict[str, str]]


def attacks() -> list[DemoAttack]:
    raw = (resources.files("trishield.demo") / "attacks.json").read_text(encoding="utf-8")
    return [DemoAttack(**entry) for entry in json.loads(raw)]
