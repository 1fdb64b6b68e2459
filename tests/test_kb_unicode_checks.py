"""Which ids and texts the KB refuses for Unicode reasons (kb/unicode_checks.py)."""

from __future__ import annotations

import pytest

from trishield.kb.unicode_checks import has_visible_text, id_problem


@pytest.mark.parametrize("doc_id", ["refund-policy", "legal/warranty", "nq-open:12",
                                    "Beyoncé", "doc 1", "東京/Tokyo", "Москва/отчёт",
                                    "서울/Seoul-2024", "αβγ/notes"])
def test_ordinary_ids_in_any_script_are_accepted(doc_id: str) -> None:
    assert id_problem(doc_id) is None


@pytest.mark.parametrize(("doc_id", "fragment"), [
    ("legal/warrant\u0443", "mixes scripts (cyrillic, latin)"),
    ("a\u202eb", "U+202E"), ("a\u2066b", "U+2066"), ("a\u200db", "U+200D"),
    ("a\u00adb", "U+00AD"), ("a\ufeffb", "U+FEFF"), ("a\u2028b", "U+2028"),
    ("a\u2029b", "U+2029"), ("a\u3000b", "U+3000"), ("a\ue000b", "U+E000"),
    ("a\u180eb", "U+180E"), ("a\ufe0fb", "U+FE0F"),
    ("\uff4cegal", "FULLWIDTH"), ("\ufb01le", "LIGATURE"),
    ("cafe\u0301", "composed (NFKC)"),
    ("\u0441\u043e\u0440", "reads as 'cop'"),
    ("build\u0663", "mixes scripts (arabic, latin)"),
])
def test_ids_that_hide_or_imitate_are_refused(doc_id: str, fragment: str) -> None:
    problem = id_problem(doc_id)
    assert problem is not None and fragment in problem, problem


def test_visible_text() -> None:
    assert not has_visible_text("\u200b\u200c\u200d\u2060\ufeff \n\t\u00ad")
    assert has_visible_text("\u200bx")
