"""The questions each block asks, with their gold answers, chosen deterministically."""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass

from trishield.eval.poisonedrag.attacks import Target
from trishield.kb.datasets import DATASETS


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    golds: tuple[str, ...]
    target: Target | None = None  # set for attacked questions


def target_questions(order: list[Target], size: int) -> list[Question]:
    return [Question(t.id, t.question, (t.correct,), t) for t in order[:size]]


def squad_questions(stored: set[str], size: int, seed: int) -> list[Question]:
    """SQuAD dev questions whose paragraph is in the KB (one per paragraph, seeded)."""
    data = json.loads(DATASETS["squad-dev"].verified_path().read_text(encoding="utf-8"))
    pool = []
    for article in data["data"]:
        for number, paragraph in enumerate(article["paragraphs"]):
            doc_id = f"squad-dev:{article['title']}:{number}"
            if doc_id in stored and paragraph["qas"]:
                qa = paragraph["qas"][0]
                pool.append(Question(f"squad:{qa['id']}", qa["question"],
                                     tuple(dict.fromkeys(a["text"] for a in qa["answers"]))))
    return random.Random(f"{seed}:squad").sample(pool, min(size, len(pool)))


def nq_questions(stored: set[str], size: int, seed: int) -> list[Question]:
    """NQ-open questions whose gold passage is in the KB (seeded)."""
    path = DATASETS["nq-open"].verified_path()
    pool = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            record = json.loads(line)
            if f"nq-open:{number}" in stored:
                pool.append(Question(f"nq-open:{number}", record["question"],
                                     tuple(record["answers"])))
    return random.Random(f"{seed}:nq").sample(pool, min(size, len(pool)))
