"""The id policy for new documents (kb/id_policy.py): what it allows, and every look-alike of
``/``, ``-``, ``.``, ``_`` and ``:`` we can list, refused wherever it could pass for one.

Where the look-alikes come from (there is no network here, and the list must not be the
policy's own table, or the test could not fail):

1. Unicode TR39 ``confusables.txt`` as shipped in the pinned ``confusable-homoglyphs`` package
   (``confusables.json``): every character it lists as confusable with one of the five, in
   either direction;
2. ``unicodedata``: every assigned character whose NFKC form contains one of the five
   (fullwidth, small and vertical forms of them), and every
   character outside letters whose name says what it draws: SOLIDUS, SLASH, HYPHEN, DASH,
   MINUS, FULL STOP, DOT, COLON, LOW LINE, STROKE, plus the modifier letters (``Lm``) and
   modifier symbols (``Sk``) so named;
3. the characters the issue (49) found accepted: U+2044, U+2215, U+29F8, U+2571, U+2010,
   U+02D7, U+0338.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from confusable_homoglyphs.confusables import confusables_data

from trishield.errors import InputError
from trishield.kb import Document, KnowledgeBase
from trishield.kb.id_policy import new_id_problem

PUNCTUATION = "/-._:"
ISSUE_49 = "\u2044\u2215\u29f8\u2571\u2010\u02d7\u0338"
_DRAWN = re.compile(r"\b(SOLIDUS|SLASH|HYPHEN|DASH|MINUS|FULL STOP|DOT|COLON|LOW LINE|STROKE)\b")


def _tr39() -> set[str]:
    found = set()
    for key, entries in confusables_data.items():
        for entry in entries:
            other = entry["c"].strip("\u200e\u200f")
            for character, prototype in ((key, other), (other, key)):
                if prototype in PUNCTUATION and len(character) == 1 and not character.isascii():
                    found.add(character)
    return found


def _by_unicodedata() -> set[str]:
    found = set()
    for code in range(0x80, sys.maxunicode + 1):
        character = chr(code)
        category = unicodedata.category(character)
        if category in ("Cn", "Cs", "Co"):
            continue
        compatible = any(p in unicodedata.normalize("NFKC", character) for p in PUNCTUATION)
        drawn = (category[0] != "L" or category == "Lm") \
            and _DRAWN.search(unicodedata.name(character, "")) is not None
        if compatible or drawn:
            found.add(character)
    return found


LOOKALIKES = sorted(_tr39() | _by_unicodedata() | set(ISSUE_49))
CONTEXTS = ("legal{}returns", "legal/{}returns", "legal{}/returns", "2024{}05", "{}legal",
            "legal{}", "a{}b/c")


def test_the_lists_are_not_empty_and_hold_the_issues_characters() -> None:
    assert len(_tr39()) >= 50 and len(_by_unicodedata()) >= 300
    assert set(ISSUE_49) <= set(LOOKALIKES)


def test_every_lookalike_of_id_punctuation_is_refused_beside_ascii() -> None:
    accepted = [(context.format(character), f"U+{ord(character):04X}")
                for character in LOOKALIKES for context in CONTEXTS
                if new_id_problem(context.format(character)) is None]
    assert accepted == [], f"{len(accepted)} ids accepted: {accepted[:20]}"


@pytest.mark.parametrize("doc_id", [
    "legal/returns", "handbook/2024-05/returns_policy.v2:draft", "Meeting notes (2024).md",
    "notes/café", "straße/öffnungszeiten", "документы/договор", "ελληνικά/έγγραφα",
    "docs/東京/ガイド", "ノート", "コーヒー/メニュー", "人々", "한국어/문서", "ירושלים/מדריך",
    "تقرير٢٠٢٤", "हिंदी/दस्तावेज़", "ภาษาไทย/เอกสาร",
])
def test_ids_in_one_script_per_word_are_allowed(doc_id: str) -> None:
    assert new_id_problem(doc_id) is None


@pytest.mark.parametrize(("doc_id", "fragment"), [
    ("legal\u30cereturns", "mixes scripts"),          # KATAKANA LETTER NO between Latin
    ("2024\u30ce05", "look-alikes of ASCII"),          # ... between digits
    ("iPhone\u30b1\u30fc\u30b9", "mixes scripts"),    # Latin and Katakana in one word
    ("2024\u066005", "mixes ASCII digits"),            # ARABIC-INDIC DIGIT ZERO reads as '.'
    ("legal/\u0663", "without a letter of its script"),
    ("caf\u00e9\u02d0x", "U+02D0"),                    # a modifier colon after a Latin letter
    ("legal/\u30fc", "U+30FC"),                        # a prolonged sound mark on its own
    ("legal\u01c3", "U+01C3"),                         # a Latin letter that reads as '!'
    ("legal\u00b7returns", "U+00B7 MIDDLE DOT"),       # punctuation outside ASCII
    ("\u05d9/\u05d9", "without another letter"),       # HEBREW YOD alone reads as an apostrophe
    ("l\u0131\u0307cense", "U+0307"),                  # dotless i + dot above reads as i
])
def test_what_the_policy_refuses_and_why(doc_id: str, fragment: str) -> None:
    problem = new_id_problem(doc_id)
    assert problem is not None and fragment in problem, problem


def test_the_kb_applies_it_to_new_ids_only(tmp_path: Path) -> None:
    """A new id outside the policy is refused before anything is written; an id the KB
    already stores (written before the policy) is still ingested, as an update."""
    legacy = "legal/old\u2010terms"
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        with pytest.raises(InputError, match="U\\+2010 HYPHEN"):
            kb.ingest([Document(id=legacy, text="Old terms.", source="a.md")])
        assert kb.store.counts()["documents"] == 0
        kb.ingest([Document(id="legal/old-terms", text="Old terms.", source="a.md")])
        with kb.store.transaction() as connection:  # as an older version stored it
            connection.execute("UPDATE documents SET doc_id = ? WHERE doc_id = ?",
                               (legacy, "legal/old-terms"))
        report = kb.ingest([Document(id=legacy, text="Old terms, amended.", source="a.md")],
                           update=True)
        assert report.updated == [{"id": legacy, "version": 2}], json.dumps(report.as_dict())
