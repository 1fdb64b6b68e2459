"""The ``trishield demo`` walk-through: a policy KB, an attacker, and what each ring did.

Two knowledge bases are built from the same documents so the comparison is fair: ``plain`` is a
normal RAG store (no Ingest Guard) and ``defended`` has Ring 1 screening at ingest. The attacker
``mallory`` writes poisoned policies into both as an untrusted writer. Each targeted question is
asked of the plain KB with ``--defense none`` and of the defended KB with ``--defense full``,
and every answer is labelled against the expected answer and the attacker's
(:mod:`trishield.demo.outcomes`), so a refusal or a wrong answer is never counted as a win.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trishield.defenses import build_defense
from trishield.demo import ATTACKER, DEMO_WRITER, attacks, corpus_dir, questions
from trishield.demo.outcomes import ATTACK_SUCCEEDED, CORRECT, REFUSED, WRONG, Outcome, judge
from trishield.kb import BACKENDS, Document, KnowledgeBase, load_path
from trishield.llm.base import Reader
from trishield.llm.panel import build_panel
from trishield.pipeline import Answer
from trishield.rings.analysis import DEFAULT_ANALYSER
from trishield.rings.ingest_guard import GuardConfig, IngestGuard

BENIGN_QUESTIONS = ("q04", "q09")
STYLE: dict[Outcome, str] = {ATTACK_SUCCEEDED: "bold red", CORRECT: "green", REFUSED: "yellow",
                             WRONG: "magenta"}


@dataclass(frozen=True)
class DemoRow:
    """One question asked under one defense, and how it came out."""

    question: str
    expected: str
    attacker: str | None
    """The attacker's answer; ``None`` for a benign question."""
    defense: str
    answer: Answer
    outcome: Outcome
    note: str


def _what_stopped_it(answer: Answer, poison_ids: set[str], quarantined: set[str]) -> str:
    """One line, from the trace alone, on where the poison was stopped (if it was)."""
    trace = answer.trace
    notes = []
    held = sorted(poison_ids & quarantined)
    if held:
        notes.append(f"{len(held)} poison(s) quarantined at ingest by Ring 1")
    blocked = [c for c in (trace.ring1.blocked if trace.ring1 else [])
               if c.split("#")[0] in poison_ids]
    if blocked:
        notes.append(f"{len(blocked)} blocked by Ring 1 after retrieval")
    dropped = [c for c in (trace.ring2.dropped if trace.ring2 else [])
               if c.split("#")[0] in poison_ids]
    if dropped:
        notes.append(f"{len(dropped)} ranked out of the context by Ring 2")
    in_context = [p.id for p in trace.context if p.doc_id in poison_ids]
    if in_context:
        notes.append(f"{len(in_context)} reached the context")
    notes.append(f"Ring 3: {answer.reason}" if trace.ring3 else answer.reason)
    return "; ".join(notes)


def _undefended_note(answer: Answer, poison_ids: set[str]) -> str:
    reader = answer.trace.reader.member if answer.trace.reader else "the reader"
    poisoned = sum(1 for p in answer.trace.context if p.doc_id in poison_ids)
    return (f"no defense: top {len(answer.trace.context)} passages straight to {reader}; "
            f"{poisoned} of them the attacker's")


def build_kbs(directory: Path) -> set[str]:
    """The plain and defended KBs under ``directory``; returns the ids Ring 1 quarantined."""
    corpus = load_path(corpus_dir()).documents
    poisons = [Document(id=d["id"], text=d["text"], source="demo attack")
               for attack in attacks() for d in attack.documents]
    guard = IngestGuard(GuardConfig())
    with KnowledgeBase.open(directory / "plain", create=True,
                            analyser=DEFAULT_ANALYSER) as plain:
        plain.ingest(corpus, tier="trusted", writer=DEMO_WRITER)
        plain.ingest(poisons, tier="untrusted", writer=ATTACKER)
    with KnowledgeBase.open(directory / "defended", create=True,
                            analyser=DEFAULT_ANALYSER) as defended:
        defended.ingest(corpus, tier="trusted", writer=DEMO_WRITER, guard=guard)
        defended.ingest(poisons, tier="untrusted", writer=ATTACKER, guard=guard)
        return {row["id"] for row in defended.store.quarantined()}


def ask_undefended(directory: Path, panel: list[Reader]) -> list[DemoRow]:
    """Every targeted question asked of the plain KB with ``--defense none``."""
    rows = []
    with KnowledgeBase.open(directory / "plain") as plain:
        undefended = build_defense("none", plain, panel)
        for attack in attacks():
            answer = undefended.ask(attack.question)
            planted = {d["id"] for d in attack.documents}
            rows.append(DemoRow(attack.question, attack.correct, attack.target, "none", answer,
                                judge(answer.answer, answer.refused, expected=attack.correct,
                                      question=attack.question, target=attack.target),
                                _undefended_note(answer, planted)))
    return rows


def ask_defended(directory: Path, panel: list[Reader], quarantined: set[str]) -> list[DemoRow]:
    """Every targeted question, then the benign ones, asked of the defended KB with ``full``."""
    rows = []
    with KnowledgeBase.open(directory / "defended") as defended:
        trishield = build_defense("full", defended, panel)
        for attack in attacks():
            answer = trishield.ask(attack.question)
            planted = {d["id"] for d in attack.documents}
            rows.append(DemoRow(attack.question, attack.correct, attack.target, "full", answer,
                                judge(answer.answer, answer.refused, expected=attack.correct,
                                      question=attack.question, target=attack.target),
                                _what_stopped_it(answer, planted, quarantined)))
        for question in questions():
            if question.id in BENIGN_QUESTIONS:
                answer = trishield.ask(question.question)
                rows.append(DemoRow(question.question, question.answer, None, "full (benign)",
                                    answer, judge(answer.answer, answer.refused,
                                                  expected=question.answer,
                                                  question=question.question),
                                    f"LLM calls {answer.trace.llm_calls}"))
    return rows


def summary(rows: list[DemoRow]) -> list[str]:
    """The demo's bottom line, one sentence per group of rows, counted from the labels."""
    lines = []
    for defense, what in (("none", "Undefended RAG (--defense none, plain KB)"),
                          ("full", "TriShield (--defense full, defended KB)"),
                          ("full (benign)", "TriShield on benign questions")):
        group = [row for row in rows if row.defense == defense]
        if not group:
            continue
        counts = Counter(row.outcome for row in group)
        targeted = any(row.attacker is not None for row in group)
        parts = [f"{o} {counts[o]}" for o in (ATTACK_SUCCEEDED, CORRECT, REFUSED, WRONG)
                 if counts[o] or (o == ATTACK_SUCCEEDED and targeted)]
        lines.append(f"{what}, {len(group)} questions: {'; '.join(parts)}")
    return lines


def outcome_table(rows: list[DemoRow]) -> Table:
    table = Table(title="Targeted questions: --defense none (plain KB) vs --defense full; "
                        "then benign questions", title_justify="left", show_lines=True)
    for column in ("question", "expected", "attacker wants", "defense", "answer", "outcome",
                   "what the trace says"):
        table.add_column(column, overflow="fold")
    for row in rows:
        shown = ("refused: " + row.answer.reason if row.answer.refused
                 else row.answer.answer or "")
        table.add_row(escape(row.question), escape(row.expected), escape(row.attacker or "-"),
                      row.defense, escape(shown),
                      f"[{STYLE[row.outcome]}]{escape(row.outcome)}[/]", escape(row.note))
    return table


def run_demo(console: Console, directory: Path, *, k: int = 3,
             panel: list[Reader] | None = None) -> list[DemoRow]:
    """Print the walk-through and return its rows (what the tests and the figures read)."""
    console.rule("[bold]1. Knowledge bases")
    quarantined = build_kbs(directory)
    n_poisons = sum(len(a.documents) for a in attacks())
    console.print(f"{len(load_path(corpus_dir()).documents)} Northwind policies written by "
                  f"{DEMO_WRITER} (trusted); {n_poisons} poisoned documents written by "
                  f"{ATTACKER} (untrusted), {len(attacks())} targeted questions.")
    console.print(f"Ring 1 quarantined {len(quarantined)} of them at ingest in the "
                  f"defended KB: {escape(', '.join(sorted(quarantined)))}")

    console.rule("[bold]2. Retrieval (defended KB)")
    question = questions()[8].question
    table = Table(title=escape(question), title_justify="left")
    for column in ("backend", *(f"#{n}" for n in range(1, k + 1))):
        table.add_column(column, overflow="fold")
    with KnowledgeBase.open(directory / "defended") as defended:
        for backend in BACKENDS:
            found = defended.search(question, backend=backend, k=k)
            table.add_row(backend, *(f"{c.chunk_id} ({c.score:.3f})" for c in found))
    console.print(table)

    console.rule("[bold]3. Attack: undefended RAG vs TriShield")
    panel = build_panel() if panel is None else panel
    console.print("Panel: " + ", ".join(f"{m.name} ({m.vendor})" for m in panel))
    rows = ask_undefended(directory, panel) + ask_defended(directory, panel, quarantined)
    # the undefended and defended answers to one question side by side
    order = {a.question: n for n, a in enumerate(attacks())}
    rows.sort(key=lambda r: (r.attacker is None, order.get(r.question, 0)))
    console.print(outcome_table(rows))
    for line in summary(rows):
        console.print(line)
    console.print(f"Full traces: trishield ask \"QUESTION\" --kb {directory / 'defended'} "
                  "--defense full --trace   (--json for the machine-readable trace; "
                  "trishield serve shows them in the web viewer)")
    return rows
