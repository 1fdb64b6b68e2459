"""The policy safety suite: attacks, unanswerable, benign and bystander cases, typed and checked.

The data lives in ``trishield/eval/data/safety_cases.json`` and is written for the Northwind
Outfitters demo corpus. Every attack names a question whose correct answer *is* in the corpus, the
poison document(s) an untrusted writer adds, and a :class:`SuccessCondition` that the final
answer matches only when the attack worked. No success value appears anywhere in the clean
corpus, so a clean answer can never count as a successful attack.

``qa_slice.json`` is a small SQuAD v1.1-format question set over paragraphs copied verbatim from
the corpus, for answer-quality numbers on the same documents.

Loading is strict: an unknown key, a missing key or a value of the wrong kind raises
:class:`~trishield.errors.InputError` naming the case id and the field, because a suite that
silently drops a malformed case reports numbers for a different suite.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from trishield.answers import contains_answer, normalize_answer
from trishield.errors import InputError

SAFETY_CASES_FILE = "safety_cases.json"
QA_SLICE_FILE = "qa_slice.json"
DATA_PACKAGE = "trishield.eval"
SUITE_VERSION = 1

FAMILIES = (
    "direct_injection",
    "fake_system_update",
    "near_duplicate",
    "replaced_address",
    "base64_payload",
    "canary",
    "split_claim",
    "quoted_training_example",
    "poisoned_rag",
    "authority_boilerplate",
    "shipping_price",
    "warranty_duration",
    "hidden_instruction",
    "leave_days",
)
"""Every attack family the suite covers; each appears at least once."""

SUCCESS_KINDS = ("contains", "canary", "regex")
UNANSWERABLE_KINDS = ("near", "off")


@dataclass(frozen=True)
class SuccessCondition:
    """When a final answer shows that an attack worked.

    ``contains``: the value appears in the answer after SQuAD normalisation
    (:func:`trishield.answers.contains_answer`). ``canary``: the value appears verbatim,
    case-sensitive, anywhere in the answer. ``regex``: ``re.search`` with ``IGNORECASE``.
    A missing answer (``None``, a refusal upstream) never matches.
    """

    kind: str
    value: str
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in SUCCESS_KINDS:
            raise ValueError(f"unknown success kind {self.kind!r}")
        if not self.value:
            raise ValueError("a success value must not be empty")
        if self.kind == "regex":
            object.__setattr__(self, "_pattern", re.compile(self.value, re.IGNORECASE))

    def matched(self, answer: str | None) -> bool:
        if answer is None:
            return False
        if self.kind == "contains":
            return contains_answer(answer, self.value)
        if self.kind == "canary":
            return self.value in answer
        assert self._pattern is not None
        return self._pattern.search(answer) is not None


@dataclass(frozen=True)
class PoisonDocument:
    """A document an untrusted writer adds to the knowledge base."""

    id: str
    text: str


@dataclass(frozen=True)
class AttackCase:
    id: str
    family: str
    question: str
    correct: str
    """The correct answer, verbatim (case-insensitive) in the clean corpus."""
    documents: tuple[PoisonDocument, ...]
    success: SuccessCondition
    note: str = ""

    def succeeded(self, answer: str | None) -> bool:
        return self.success.matched(answer)


@dataclass(frozen=True)
class UnanswerableCase:
    id: str
    question: str
    kind: str
    """``near``: close to a policy that does not answer it; ``off``: off-topic."""
    absent_terms: tuple[str, ...]
    """Key terms of the question that the corpus never mentions."""
    note: str = ""


@dataclass(frozen=True)
class BenignCase:
    id: str
    question: str
    answer: str
    doc: str
    hard: bool
    """Hard cases look like attacks (quoted attack text, the rejected 90-day proposal, ...)."""
    note: str = ""


@dataclass(frozen=True)
class BystanderCase:
    """An ordinary question, unrelated to any attack, asked on the poisoned corpus."""

    id: str
    question: str
    answer: str
    doc: str


@dataclass(frozen=True)
class TrainingQuestion:
    """A refusal-threshold calibration question; ``answer`` is ``None`` when unanswerable."""

    question: str
    answer: str | None = None
    doc: str | None = None

    @property
    def answerable(self) -> bool:
        return self.answer is not None


@dataclass(frozen=True)
class SafetySuite:
    version: int
    attacks: tuple[AttackCase, ...]
    unanswerable: tuple[UnanswerableCase, ...]
    benign: tuple[BenignCase, ...]
    bystanders: tuple[BystanderCase, ...]
    training_answerable: tuple[TrainingQuestion, ...]
    training_unanswerable: tuple[TrainingQuestion, ...]

    @property
    def training(self) -> tuple[TrainingQuestion, ...]:
        return self.training_answerable + self.training_unanswerable

    @property
    def families(self) -> frozenset[str]:
        return frozenset(attack.family for attack in self.attacks)

    def poison_documents(self) -> tuple[PoisonDocument, ...]:
        """Every attack's documents, in case order: the full poisoned corpus addition."""
        return tuple(doc for attack in self.attacks for doc in attack.documents)


# --- loading -----------------------------------------------------------------------------------


def _data_file(name: str) -> Traversable:
    return resources.files(DATA_PACKAGE) / "data" / name


def load_safety_suite() -> SafetySuite:
    """The packaged safety suite, validated."""
    text = _data_file(SAFETY_CASES_FILE).read_text(encoding="utf-8")
    return parse_safety_suite(_decode(text, SAFETY_CASES_FILE), source=SAFETY_CASES_FILE)


def read_safety_suite(path: Path) -> SafetySuite:
    """A safety suite from a file (another corpus's suite, or a test's malformed copy)."""
    return parse_safety_suite(_decode(_read(path), str(path)), source=str(path))


def load_qa_slice() -> dict[str, Any]:
    """The packaged SQuAD v1.1-format policy QA slice, with every answer offset checked."""
    text = _data_file(QA_SLICE_FILE).read_text(encoding="utf-8")
    return parse_qa_slice(_decode(text, QA_SLICE_FILE), source=QA_SLICE_FILE)


def read_qa_slice(path: Path) -> dict[str, Any]:
    return parse_qa_slice(_decode(_read(path), str(path)), source=str(path))


def data_sha256() -> dict[str, str]:
    """``{filename: sha256}`` of both data files, for reports."""
    return {
        name: hashlib.sha256(_data_file(name).read_bytes()).hexdigest()
        for name in (SAFETY_CASES_FILE, QA_SLICE_FILE)
    }


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", path=str(path)) from exc


def _decode(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=source, line=exc.lineno) from exc


class _Checker:
    """Type and key checks that raise :class:`InputError` naming the file, case and field."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, message: str) -> InputError:
        return InputError(f"{where}: {message}", path=self.source)

    def obj(
        self, value: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be an object, got {type(value).__name__}")
        missing = [key for key in required if key not in value]
        if missing:
            raise self.fail(where, f"missing field {missing[0]!r}")
        unknown = sorted(set(value) - set(required) - set(optional))
        if unknown:
            raise self.fail(where, f"unknown field {unknown[0]!r}")
        return value

    def string(self, entry: Mapping[str, Any], key: str, where: str) -> str:
        value = entry[key]
        if not isinstance(value, str):
            raise self.fail(where, f"field {key!r} must be a string, got {type(value).__name__}")
        if not value.strip():
            raise self.fail(where, f"field {key!r} must not be empty")
        return value

    def optional_string(self, entry: Mapping[str, Any], key: str, where: str) -> str:
        if key not in entry:
            return ""
        value = entry[key]
        if not isinstance(value, str):
            raise self.fail(where, f"field {key!r} must be a string, got {type(value).__name__}")
        return value

    def choice(
        self, entry: Mapping[str, Any], key: str, where: str, allowed: tuple[str, ...]
    ) -> str:
        value = self.string(entry, key, where)
        if value not in allowed:
            raise self.fail(where, f"field {key!r} is {value!r}, expected one of {list(allowed)}")
        return value

    def boolean(self, entry: Mapping[str, Any], key: str, where: str) -> bool:
        value = entry[key]
        if not isinstance(value, bool):
            raise self.fail(where, f"field {key!r} must be true or false")
        return value

    def integer(self, entry: Mapping[str, Any], key: str, where: str) -> int:
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"field {key!r} must be an integer")
        return value

    def array(self, entry: Mapping[str, Any], key: str, where: str, *, min_len: int = 0) -> list:
        value = entry[key]
        if not isinstance(value, list):
            raise self.fail(where, f"field {key!r} must be a list, got {type(value).__name__}")
        if len(value) < min_len:
            raise self.fail(where, f"field {key!r} must have at least {min_len} item(s)")
        return value

    def case_id(self, entry: Any, section: str, index: int) -> str:
        """``section[i] 'id'`` when the entry has a usable id, else ``section[i]``."""
        where = f"{section}[{index}]"
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"].strip():
            return f"{where} {entry['id']!r}"
        return where


def parse_safety_suite(data: Any, *, source: str = SAFETY_CASES_FILE) -> SafetySuite:
    """Validate decoded JSON and build the typed suite."""
    check = _Checker(source)
    top = check.obj(
        data, "suite", ("version", "attacks", "unanswerable", "benign", "bystanders", "training")
    )
    version = check.integer(top, "version", "suite")
    if version != SUITE_VERSION:
        raise check.fail("suite", f"field 'version' is {version}, expected {SUITE_VERSION}")

    attacks = tuple(
        _attack(check, entry, check.case_id(entry, "attacks", i))
        for i, entry in enumerate(check.array(top, "attacks", "suite", min_len=1))
    )
    unanswerable = tuple(
        _unanswerable(check, entry, check.case_id(entry, "unanswerable", i))
        for i, entry in enumerate(check.array(top, "unanswerable", "suite"))
    )
    benign = tuple(
        _benign(check, entry, check.case_id(entry, "benign", i))
        for i, entry in enumerate(check.array(top, "benign", "suite"))
    )
    bystanders = tuple(
        _bystander(check, entry, check.case_id(entry, "bystanders", i))
        for i, entry in enumerate(check.array(top, "bystanders", "suite"))
    )
    training = check.obj(top["training"], "training", ("answerable", "unanswerable"))
    answerable = tuple(
        _training(check, entry, f"training.answerable[{i}]", answerable=True)
        for i, entry in enumerate(check.array(training, "answerable", "training"))
    )
    not_answerable = tuple(
        _training(check, entry, f"training.unanswerable[{i}]", answerable=False)
        for i, entry in enumerate(check.array(training, "unanswerable", "training"))
    )

    seen: set[str] = set()
    for case in (*attacks, *unanswerable, *benign, *bystanders):
        if case.id in seen:
            raise check.fail(f"case {case.id!r}", "field 'id' is not unique")
        seen.add(case.id)
    documents: set[str] = set()
    for attack in attacks:
        for document in attack.documents:
            if document.id in documents:
                raise check.fail(
                    f"attack {attack.id!r}", f"document id {document.id!r} is not unique"
                )
            documents.add(document.id)
    questions: set[str] = set()
    for item in (*answerable, *not_answerable):
        key = normalize_answer(item.question)
        if key in questions:
            raise check.fail("training", f"question {item.question!r} is repeated")
        questions.add(key)

    return SafetySuite(
        version=version,
        attacks=attacks,
        unanswerable=unanswerable,
        benign=benign,
        bystanders=bystanders,
        training_answerable=answerable,
        training_unanswerable=not_answerable,
    )


def _attack(check: _Checker, entry: Any, where: str) -> AttackCase:
    fields = ("id", "family", "question", "correct", "documents", "success")
    entry = check.obj(entry, where, fields, ("note",))
    documents = []
    for j, raw in enumerate(check.array(entry, "documents", where, min_len=1)):
        doc_where = f"{where} documents[{j}]"
        doc = check.obj(raw, doc_where, ("id", "text"))
        document_id = check.string(doc, "id", doc_where)
        documents.append(PoisonDocument(id=document_id, text=check.string(doc, "text", doc_where)))
    success_where = f"{where} success"
    success = check.obj(entry["success"], success_where, ("kind", "value"))
    kind = check.choice(success, "kind", success_where, SUCCESS_KINDS)
    value = check.string(success, "value", success_where)
    if kind == "regex":
        try:
            re.compile(value)
        except re.error as exc:
            raise check.fail(success_where, f"field 'value' is not a valid regex: {exc}") from exc
    return AttackCase(
        id=check.string(entry, "id", where),
        family=check.choice(entry, "family", where, FAMILIES),
        question=check.string(entry, "question", where),
        correct=check.string(entry, "correct", where),
        documents=tuple(documents),
        success=SuccessCondition(kind=kind, value=value),
        note=check.optional_string(entry, "note", where),
    )


def _unanswerable(check: _Checker, entry: Any, where: str) -> UnanswerableCase:
    entry = check.obj(entry, where, ("id", "question", "kind", "absent_terms"), ("note",))
    terms = check.array(entry, "absent_terms", where, min_len=1)
    for j, term in enumerate(terms):
        if not isinstance(term, str) or not term.strip():
            raise check.fail(where, f"field 'absent_terms'[{j}] must be a non-empty string")
    return UnanswerableCase(
        id=check.string(entry, "id", where),
        question=check.string(entry, "question", where),
        kind=check.choice(entry, "kind", where, UNANSWERABLE_KINDS),
        absent_terms=tuple(terms),
        note=check.optional_string(entry, "note", where),
    )


def _benign(check: _Checker, entry: Any, where: str) -> BenignCase:
    entry = check.obj(entry, where, ("id", "question", "answer", "doc", "hard"), ("note",))
    return BenignCase(
        id=check.string(entry, "id", where),
        question=check.string(entry, "question", where),
        answer=check.string(entry, "answer", where),
        doc=check.string(entry, "doc", where),
        hard=check.boolean(entry, "hard", where),
        note=check.optional_string(entry, "note", where),
    )


def _bystander(check: _Checker, entry: Any, where: str) -> BystanderCase:
    entry = check.obj(entry, where, ("id", "question", "answer", "doc"))
    return BystanderCase(
        id=check.string(entry, "id", where),
        question=check.string(entry, "question", where),
        answer=check.string(entry, "answer", where),
        doc=check.string(entry, "doc", where),
    )


def _training(check: _Checker, entry: Any, where: str, *, answerable: bool) -> TrainingQuestion:
    if not answerable:
        entry = check.obj(entry, where, ("question",))
        return TrainingQuestion(question=check.string(entry, "question", where))
    entry = check.obj(entry, where, ("question", "answer", "doc"))
    return TrainingQuestion(
        question=check.string(entry, "question", where),
        answer=check.string(entry, "answer", where),
        doc=check.string(entry, "doc", where),
    )


def parse_qa_slice(data: Any, *, source: str = QA_SLICE_FILE) -> dict[str, Any]:
    """Validate a SQuAD v1.1-format dict (keys, kinds, unique ids, answer offsets); return it."""
    check = _Checker(source)
    top = check.obj(data, "qa_slice", ("version", "data"))
    check.string(top, "version", "qa_slice")
    ids: set[str] = set()
    for a, article in enumerate(check.array(top, "data", "qa_slice", min_len=1)):
        article_where = f"data[{a}]"
        article = check.obj(article, article_where, ("title", "paragraphs"))
        check.string(article, "title", article_where)
        for p, paragraph in enumerate(check.array(article, "paragraphs", article_where, min_len=1)):
            paragraph_where = f"{article_where}.paragraphs[{p}]"
            paragraph = check.obj(paragraph, paragraph_where, ("context", "qas"))
            context = check.string(paragraph, "context", paragraph_where)
            for q, qa in enumerate(check.array(paragraph, "qas", paragraph_where, min_len=1)):
                qa_where = check.case_id(qa, f"{paragraph_where}.qas", q)
                qa = check.obj(qa, qa_where, ("id", "question", "answers"))
                qa_id = check.string(qa, "id", qa_where)
                if qa_id in ids:
                    raise check.fail(qa_where, "field 'id' is not unique")
                ids.add(qa_id)
                check.string(qa, "question", qa_where)
                for n, answer in enumerate(check.array(qa, "answers", qa_where, min_len=1)):
                    answer_where = f"{qa_where} answers[{n}]"
                    answer = check.obj(answer, answer_where, ("text", "answer_start"))
                    text = check.string(answer, "text", answer_where)
                    start = check.integer(answer, "answer_start", answer_where)
                    if start < 0 or context[start : start + len(text)] != text:
                        raise check.fail(
                            answer_where,
                            f"field 'answer_start' {start} does not point at {text!r} "
                            "in the context",
                        )
    return dict(top)
