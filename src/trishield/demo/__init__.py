"""The demo corpus: Northwind Outfitters' company policies, shipped with the package."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DEMO_WRITER = "northwind-policy-team"


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
