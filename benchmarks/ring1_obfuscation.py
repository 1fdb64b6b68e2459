"""Ring 1 against invisible and look-alike characters, and its false positives on clean text.

1. Every PoisonedRAG-NQ published poison (500), as published and rewritten five ways: a
   zero-width space, a zero-width joiner or a soft hyphen in the middle of every word of 2+
   letters; every letter that has a Cyrillic look-alike replaced by it (the look-alikes are
   read from TR39's confusables.txt via ``confusable-homoglyphs``); every printable ASCII
   character replaced by its fullwidth form. For each variant: Ring 1's block rate on text
   signals only (``IngestGuard().judge(...)``, ``s_out=None``, no query: as at ingest, without
   the embedding outlier score), the mean ``S_pat``, and how often each detector fired.
2. Clean text: the share Ring 1 blocks (same settings) of the HotpotQA and MuSiQue passage
   corpora (the clean side of ``trishield.eval.calibration``), of 2WikiMultihopQA's and SQuAD
   dev's passages, and, where installed on this
   machine, of npm's command docs and CMake's command docs (whole files, as ingested), the
   share it flags (``C >= flag_theta``), and how often the question detectors fire. Long
   documents' questions count as ``question_inside`` (0.25), which blocks only together with
   another signal such as ``S_out``: so on the docs the firing rate is what matters.

It reads only what ``import trishield`` finds, so the same script measures any commit: run it
with ``PYTHONPATH=<checkout>/src``. Prints a table; writes nothing.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ring1_obfuscation.py
"""

from __future__ import annotations

import argparse
import glob
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from confusable_homoglyphs.confusables import confusables_data

import trishield
from trishield.kb.datasets import load_named
from trishield.rings.ingest_guard import IngestGuard

_WORD = re.compile(r"[A-Za-z]{2,}")
CLEAN = ("hotpotqa", "musique", "2wikimultihopqa", "squad-dev")
DOCS = {
    "npm command docs": "/usr/lib/node_modules/npm/docs/content/commands/*.md",
    "CMake command docs": "/usr/share/cmake-*/Help/command/*.rst",
}


def _inside_words(mark: str) -> Callable[[str], str]:
    def rewrite(text: str) -> str:
        return _WORD.sub(lambda m: m.group()[:len(m.group()) // 2] + mark
                         + m.group()[len(m.group()) // 2:], text)
    return rewrite


def _cyrillic_lookalikes() -> dict[str, str]:
    """ASCII letter -> the lowest Cyrillic code point whose TR39 prototype it is."""
    table: dict[str, str] = {}
    for character, homoglyphs in sorted(confusables_data.items()):
        if (len(character) == 1 and 0x400 <= ord(character) <= 0x52F and len(homoglyphs) == 1
                and len(homoglyphs[0]["c"]) == 1 and homoglyphs[0]["c"].isascii()
                and homoglyphs[0]["c"].isalpha()
                and unicodedata.normalize("NFD", character) == character):
            table.setdefault(homoglyphs[0]["c"], character)
    return table


CYRILLIC = _cyrillic_lookalikes()

VARIANTS: dict[str, Callable[[str], str]] = {
    "plain": lambda text: text,
    "zero-width space": _inside_words("\u200b"),
    "zero-width joiner": _inside_words("\u200d"),
    "soft hyphen": _inside_words("\u00ad"),
    "Cyrillic look-alikes": lambda text: "".join(CYRILLIC.get(ch, ch) for ch in text),
    "fullwidth": lambda text: "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch
                                      for ch in text),
}


def measure(guard: IngestGuard, texts: Sequence[str]) -> dict[str, object]:
    verdicts = [guard.judge(f"t{i}", text, s_out=None) for i, text in enumerate(texts)]
    fired = Counter(hit.name for v in verdicts for hit in v.patterns)
    return {
        "n": len(verdicts),
        "blocked": sum(v.blocked for v in verdicts),
        "flagged": sum(v.flagged for v in verdicts),
        "s_pat": sum(v.s_pat for v in verdicts) / max(1, len(verdicts)),
        "fired": {name: count / max(1, len(verdicts)) for name, count in fired.items()},
    }


def _docs(pattern: str) -> list[str]:
    return [Path(path).read_text(encoding="utf-8") for path in sorted(glob.glob(pattern))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-clean", action="store_true", help="poisons only")
    arguments = parser.parse_args()
    guard = IngestGuard()
    print(f"trishield from {Path(trishield.__file__).parent}; theta={guard.config.theta}, "
          f"text signals only (s_out=None)")
    poisons = [d.text for d in load_named("poisonedrag-nq") if d.id.startswith("poison:")]
    detectors = ("question_opening", "question_inside", "authority", "injection",
                 "obfuscated_text")
    print(f"\nPoisonedRAG-NQ published poisons (n={len(poisons)})")
    print(f"{'variant':<22}{'blocked':>9}{'rate':>8}{'mean S_pat':>12}  "
          + "  ".join(f"{name:>16}" for name in detectors))
    for name, rewrite in VARIANTS.items():
        row = measure(guard, [rewrite(text) for text in poisons])
        fired = row["fired"]
        print(f"{name:<22}{row['blocked']:>9}{row['blocked'] / row['n']:>8.3f}"
              f"{row['s_pat']:>12.3f}  "
              + "  ".join(f"{fired.get(d, 0.0):>16.3f}" for d in detectors))
    if arguments.skip_clean:
        return
    print("\nClean text blocked (false positives)")
    print(f"{'corpus':<22}{'n':>7}{'blocked':>9}{'rate':>9}{'flagged':>9}  question_opening"
          "  question_inside  obfuscated_text")
    corpora = {name: [d.text for d in load_named(name)] for name in CLEAN}
    corpora |= {name: texts for name, pattern in DOCS.items() if (texts := _docs(pattern))}
    for name, texts in corpora.items():
        row = measure(guard, texts)
        fired = row["fired"]
        print(f"{name:<22}{row['n']:>7}{row['blocked']:>9}{row['blocked'] / row['n']:>9.4f}"
              f"{row['flagged']:>9}  {fired.get('question_opening', 0.0):>16.4f}"
              f"  {fired.get('question_inside', 0.0):>15.4f}"
              f"  {fired.get('obfuscated_text', 0.0):>15.4f}")


if __name__ == "__main__":
    main()
