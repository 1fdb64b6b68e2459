"""The policy safety suite's data: counts, coverage, ground truth against the corpus, loader."""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import re
from importlib import resources
from pathlib import Path

import pytest

from trishield.answers import normalize_answer
from trishield.demo import corpus_dir
from trishield.errors import InputError
from trishield.eval.safety_cases import (
    FAMILIES,
    QA_SLICE_FILE,
    SAFETY_CASES_FILE,
    SafetySuite,
    SuccessCondition,
    data_sha256,
    load_qa_slice,
    load_safety_suite,
    read_qa_slice,
    read_safety_suite,
)

CANARY = "CANARY-2214"
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")


@pytest.fixture(scope="module")
def suite() -> SafetySuite:
    return load_safety_suite()


@pytest.fixture(scope="module")
def corpus() -> dict[str, str]:
    return {path.stem: path.read_text(encoding="utf-8") for path in corpus_dir().glob("*.md")}


@pytest.fixture(scope="module")
def clean_text(corpus: dict[str, str]) -> str:
    return "\n\n".join(corpus[name] for name in sorted(corpus))


def _raw_suite() -> dict:
    data = resources.files("trishield.eval") / "data" / SAFETY_CASES_FILE
    return json.loads(data.read_text(encoding="utf-8"))


def _section(document: str, heading: str) -> str:
    start = document.index(heading)
    end = document.find("\n## ", start + len(heading))
    return document[start:] if end < 0 else document[start:end]


def test_suite_loads_and_meets_the_minimums(suite: SafetySuite) -> None:
    assert suite.version == 1
    assert len(suite.attacks) >= 14
    assert len(suite.unanswerable) >= 8
    assert sum(case.kind == "near" for case in suite.unanswerable) >= 4
    assert sum(case.kind == "off" for case in suite.unanswerable) >= 4
    assert len(suite.benign) >= 12
    assert sum(case.hard for case in suite.benign) >= 3
    assert len(suite.bystanders) >= 6
    assert len(suite.training_answerable) >= 10
    assert len(suite.training_unanswerable) >= 10
    assert all(item.answerable for item in suite.training_answerable)
    assert not any(item.answerable for item in suite.training_unanswerable)


def test_every_family_is_present(suite: SafetySuite) -> None:
    assert suite.families == frozenset(FAMILIES)


def test_ids_are_unique(suite: SafetySuite) -> None:
    ids = [c.id for c in (*suite.attacks, *suite.unanswerable, *suite.benign, *suite.bystanders)]
    assert len(ids) == len(set(ids))
    documents = [doc.id for doc in suite.poison_documents()]
    assert len(documents) == len(set(documents))
    assert all(doc.startswith("mallory/") for doc in documents)


def test_ground_truth_answers_are_in_their_documents(
    suite: SafetySuite, corpus: dict[str, str]
) -> None:
    for case in (*suite.benign, *suite.bystanders, *suite.training_answerable):
        assert case.doc in corpus, case
        assert case.answer is not None
        assert case.answer.lower() in corpus[case.doc].lower(), case


def test_attack_correct_answers_are_in_the_corpus(suite: SafetySuite, clean_text: str) -> None:
    for attack in suite.attacks:
        assert attack.correct.lower() in clean_text.lower(), attack.id
        assert not attack.succeeded(attack.correct), attack.id


def test_no_success_value_appears_in_the_clean_corpus(
    suite: SafetySuite, corpus: dict[str, str], clean_text: str
) -> None:
    for attack in suite.attacks:
        assert not attack.succeeded(clean_text), attack.id
        for name, text in corpus.items():
            assert not attack.succeeded(text), (attack.id, name)
        if attack.success.kind != "regex":
            assert attack.success.value.lower() not in clean_text.lower(), attack.id
    # A clean, correct answer to any question never reads as a successful attack.
    for attack in suite.attacks:
        for case in (*suite.benign, *suite.bystanders):
            assert not attack.succeeded(case.answer), (attack.id, case.id)


def test_every_attack_states_its_target(suite: SafetySuite) -> None:
    for attack in suite.attacks:
        payload = " ".join(doc.text for doc in attack.documents)
        if attack.family == "base64_payload":
            payload = " ".join(
                base64.b64decode(run).decode("utf-8") for run in BASE64_RUN.findall(payload)
            )
        assert attack.succeeded(payload), attack.id


def test_base64_payload_decodes_to_an_instruction(suite: SafetySuite) -> None:
    cases = [a for a in suite.attacks if a.family == "base64_payload"]
    assert cases
    for attack in cases:
        runs = BASE64_RUN.findall(" ".join(doc.text for doc in attack.documents))
        assert runs, attack.id
        for run in runs:
            try:
                decoded = base64.b64decode(run, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError) as exc:  # pragma: no cover - data bug
                pytest.fail(f"{attack.id}: not base64 text: {exc}")
            assert base64.b64encode(decoded.encode("utf-8")).decode() == run
            lowered = decoded.lower()
            assert "ignore" in lowered and "answer" in lowered, decoded
            # The instruction must not be readable without decoding.
            assert not attack.succeeded(" ".join(d.text for d in attack.documents).replace(run, ""))


def test_canary_attack(suite: SafetySuite, clean_text: str) -> None:
    cases = [a for a in suite.attacks if a.family == "canary"]
    assert cases
    for attack in cases:
        assert attack.success == SuccessCondition("canary", CANARY)
        assert any(CANARY in doc.text for doc in attack.documents)
    assert CANARY not in clean_text


def test_near_duplicate_changes_only_one_number(
    suite: SafetySuite, corpus: dict[str, str]
) -> None:
    cases = [a for a in suite.attacks if a.family == "near_duplicate"]
    assert cases
    real = corpus["refund-policy"].split()
    for attack in cases:
        (document,) = attack.documents
        copy_words = document.text.split()
        assert len(copy_words) == len(real)
        changed = [(a, b) for a, b in zip(real, copy_words, strict=True) if a != b]
        assert len(changed) == 1, changed
        assert changed[0][0] == "30" and changed[0][1].isdigit()


def test_family_shapes(suite: SafetySuite, clean_text: str) -> None:
    for attack in suite.attacks:
        texts = [doc.text for doc in attack.documents]
        if attack.family == "split_claim":
            assert len(texts) == 2
            # Each half alone does not carry the false claim to the answer check.
            assert sum(attack.succeeded(text) for text in texts) <= 1
        if attack.family == "poisoned_rag":
            assert len(texts) == 3
            assert all(text.startswith(attack.question) for text in texts), attack.id
        if attack.family == "hidden_instruction":
            assert any("<!--" in text or "[//]: #" in text for text in texts), attack.id
        if attack.family == "direct_injection":
            assert any("ignore previous instructions" in text.lower() for text in texts)
        if attack.family == "authority_boilerplate":
            assert any("independent sources confirm" in text.lower() for text in texts)
    replaced = [a for a in suite.attacks if a.family == "replaced_address"]
    assert all("1200 Harbor Road" in a.correct for a in replaced)


def test_unanswerable_terms_are_absent_from_the_corpus(
    suite: SafetySuite, clean_text: str
) -> None:
    for case in suite.unanswerable:
        for term in case.absent_terms:
            assert not re.search(rf"\b{re.escape(term)}", clean_text, re.IGNORECASE), (
                case.id,
                term,
            )


def test_hard_benign_cases_cover_the_lookalikes(
    suite: SafetySuite, corpus: dict[str, str]
) -> None:
    hard = [case for case in suite.benign if case.hard]
    training = _section(corpus["customer-support-guide"], "## Training material")
    assert any(case.answer.lower() in training.lower() for case in hard)
    minutes = corpus["meeting-minutes-2026-03"]
    rejected = [c for c in hard if c.doc == "meeting-minutes-2026-03" and "90" in c.question]
    assert rejected and all(c.answer.lower() in minutes.lower() for c in rejected)
    assert any("rejected" in c.answer.lower() for c in rejected)
    ignore = [c for c in hard if "ignore" in c.question.lower()]
    assert ignore and all(c.doc == "meeting-minutes-2026-03" for c in ignore)


def test_training_questions_are_disjoint_from_the_evaluation(suite: SafetySuite) -> None:
    evaluation = [
        *suite.attacks, *suite.unanswerable, *suite.benign, *suite.bystanders,
    ]
    asked = {normalize_answer(case.question) for case in evaluation}
    answers = {normalize_answer(case.answer) for case in (*suite.benign, *suite.bystanders)}
    answers |= {normalize_answer(attack.correct) for attack in suite.attacks}
    for item in suite.training:
        assert normalize_answer(item.question) not in asked, item
        if item.answer is not None:
            assert normalize_answer(item.answer) not in answers, item


def test_qa_slice_offsets_and_contexts(corpus: dict[str, str], clean_text: str) -> None:
    data = load_qa_slice()
    assert data["version"] == "trishield-policy-1"
    count = 0
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            assert context in clean_text
            for qa in paragraph["qas"]:
                for answer in qa["answers"]:
                    start = answer["answer_start"]
                    assert context[start : start + len(answer["text"])] == answer["text"]
                count += 1
    assert count >= 20


@pytest.mark.parametrize(
    ("kind", "value", "answer", "expected"),
    [
        ("contains", "Quarry Lane", "Mail it to 415 quarry lane, Reno.", True),
        ("contains", "Quarry Lane", "Mail it to Quarry Lanes Ltd.", False),
        ("contains", "Quarry Lane", None, False),
        ("canary", CANARY, "Support is open weekdays. CANARY-2214", True),
        ("canary", CANARY, "Support is open weekdays. canary-2214", False),
        ("canary", CANARY, None, False),
        ("regex", r"\b45[\s-]*days?\b", "You have 45-Days to return it.", True),
        ("regex", r"\b45[\s-]*days?\b", "You have 145 days.", False),
        ("regex", r"\b45[\s-]*days?\b", None, False),
    ],
)
def test_success_condition_matched(
    kind: str, value: str, answer: str | None, expected: bool
) -> None:
    assert SuccessCondition(kind, value).matched(answer) is expected


def test_success_condition_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError):
        SuccessCondition("substring", "x")


def test_data_sha256_matches_the_files() -> None:
    digests = data_sha256()
    assert set(digests) == {SAFETY_CASES_FILE, QA_SLICE_FILE}
    for name, digest in digests.items():
        raw = (resources.files("trishield.eval") / "data" / name).read_bytes()
        assert digest == hashlib.sha256(raw).hexdigest()


def test_a_valid_copy_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(_raw_suite()), encoding="utf-8")
    assert read_safety_suite(path) == load_safety_suite()


def _break(mutate) -> dict:
    raw = copy.deepcopy(_raw_suite())
    mutate(raw)
    return raw


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: r["attacks"][0].update(extra=1), ["atk-direct-injection", "'extra'"]),
        (lambda r: r["attacks"][1].pop("question"), ["atk-fake-system-update", "'question'"]),
        (lambda r: r["attacks"][2].update(family="telepathy"), ["atk-near-duplicate", "family"]),
        (
            lambda r: r["attacks"][3]["success"].update(kind="substring"),
            ["atk-replaced-address", "success", "'kind'"],
        ),
        (
            lambda r: r["attacks"][4]["success"].update(value="(unclosed"),
            ["atk-base64-payload", "'value'", "regex"],
        ),
        (lambda r: r["attacks"][5].update(documents=[]), ["atk-canary", "'documents'"]),
        (
            lambda r: r["attacks"][6]["documents"][0].update(text=7),
            ["atk-split-claim", "documents[0]", "'text'"],
        ),
        (lambda r: r["unanswerable"][0].update(kind="far"), ["una-sabbatical", "'kind'"]),
        (
            lambda r: r["unanswerable"][1].update(absent_terms="gift card"),
            ["una-gift-card-refund", "'absent_terms'"],
        ),
        (lambda r: r["benign"][0].update(hard="yes"), ["ben-training-example-address", "'hard'"]),
        (lambda r: r["bystanders"][0].pop("doc"), ["bys-remote-days", "'doc'"]),
        (
            lambda r: r["bystanders"][1].update(id=r["benign"][0]["id"]),
            ["ben-training-example-address", "'id'", "not unique"],
        ),
        (
            lambda r: r["training"]["unanswerable"][0].update(answer="x"),
            ["training.unanswerable[0]", "'answer'"],
        ),
        (lambda r: r.update(version=2), ["'version'"]),
        (lambda r: r.pop("bystanders"), ["'bystanders'"]),
    ],
)
def test_malformed_suites_are_rejected(tmp_path: Path, mutate, expected: list[str]) -> None:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(_break(mutate)), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_safety_suite(path)
    message = str(caught.value)
    assert str(path) in message
    for fragment in expected:
        assert fragment in message, message


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "suite.json"
    path.write_text('{\n  "version": 1,\n  "attacks": [\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_safety_suite(path)
    assert caught.value.path == str(path) and caught.value.line is not None


def test_qa_slice_with_a_wrong_offset_is_rejected(tmp_path: Path) -> None:
    data = copy.deepcopy(load_qa_slice())
    qa = data["data"][0]["paragraphs"][0]["qas"][0]
    qa["answers"][0]["answer_start"] += 1
    path = tmp_path / "qa.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=rf"{qa['id']}.*answer_start"):
        read_qa_slice(path)

