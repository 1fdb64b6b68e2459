"""Every link between the project's pages leads somewhere: a reader who follows one from the
README or docs/ lands on a file that exists and, for ``#anchor`` links, on a heading of that
file; a docstring or benchmark that names a page (``docs/design/ring1-ingest-guard.md``) or a
section of it (``docs/scale.md, "Figures"``) names one that exists. Pages are reorganised
(docs/design.md became docs/design/ and docs/decisions.md), and this is what keeps the
references from rotting when they are.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (hyphens and
    underscores kept), spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its words
    text = re.sub(r"[`*]", "", text.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings, numbered as GitHub numbers repeated ones."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def links(path: Path) -> list[str]:
    """Relative links of a page, code blocks and inline code aside."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return [target for target in LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]  # http:, mailto: ...


def broken(path: Path) -> list[str]:
    problems = []
    for target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {dest.name}")
    return problems


def test_slug_follows_github() -> None:
    assert slug("Ring 1's neighbourhood at ingest, in a KB of many writers") == \
        "ring-1s-neighbourhood-at-ingest-in-a-kb-of-many-writers"
    assert slug("How `theta` and the weights are chosen") == "how-theta-and-the-weights-are-chosen"
    assert slug("D9. Ring 2's writer cap (`per_writer = 2`) is kept") == \
        "d9-ring-2s-writer-cap-per_writer--2-is-kept"
    assert slug("Evidence (Rings 2-3)") == "evidence-rings-2-3"


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n", encoding="utf-8")
    page.write_text("# Page\n\n[ok](other.md#a-section) [gone](missing.md) "
                    "[no anchor](other.md#nowhere) [self](#page) `[code](x.md)`\n",
                    encoding="utf-8")
    assert broken(page) == ["missing.md: no such file",
                            "other.md#nowhere: no heading #nowhere in other.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


MENTION = re.compile(r"(?<![\w/.`-])docs/([\w./-]+?\.md)(?:#([\w-]+))?"
                     r"(?:[,:]?\s+(?:section\s+)?\"([^\"]+)\")?")
"""A page named in prose or a docstring: ``docs/scale.md``, ``docs/scale.md#figures`` or
``docs/scale.md, "Figures"`` (a quoted name must be the start of one of its headings, or of
a paragraph's bold lead-in, which the long pages use as sections)."""
LEAD = re.compile(r"^\*\*(.+?)\*\*", re.M)
SOURCES = [*sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "benchmarks").rglob("*.py")),
           *sorted((ROOT / "benchmarks").rglob("*.md")), *sorted((ROOT / "tests").glob("*.py")),
           *PAGES]


def mentions(path: Path) -> list[str]:
    problems = []
    text = re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))
    for name, anchor, section in MENTION.findall(text):
        dest = ROOT / "docs" / name
        if not dest.exists():
            problems.append(f"docs/{name}: no such page")
            continue
        if anchor and anchor not in anchors(dest):
            problems.append(f"docs/{name}#{anchor}: no such heading")
        page = FENCE.sub("", dest.read_text(encoding="utf-8"))
        headings = [re.sub(r"[`*]", "", h).lower()
                    for h in HEADING.findall(page) + LEAD.findall(page)]
        wanted = re.sub(r"[`*]", "", section).lower()
        if section and not any(h.startswith(wanted) or re.sub(r"^d\d+\. ", "", h).startswith(wanted)
                               for h in headings):
            problems.append(f'docs/{name}, "{section}": no such section')
    return problems


@pytest.mark.parametrize("path", [p for p in SOURCES if p.name != "test_docs_links.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_named_pages_and_sections_exist(path: Path) -> None:
    assert mentions(path) == []


def test_a_stale_page_or_section_name_is_found(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text('"""See docs/design.md, "Evidence"; docs/scale.md, "Figures";\n'
                      'docs/scale.md, "No such part"; docs/decisions.md, "The pool\'s price";\n'
                      '``docs/x/y.md``."""\n', encoding="utf-8")
    assert mentions(source) == ["docs/design.md: no such page",
                                'docs/scale.md, "No such part": no such section']
