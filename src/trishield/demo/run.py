"""The ``trishield demo`` walk-through: a policy KB, an attacker, and what each ring did.

Two knowledge bases are built from the same documents so the comparison is fair: ``plain`` is a
normal RAG store (no Ingest Guard) and ``defended`` has Ring 1 screening at ingest. The attacker
``mallory`` writes poisoned policies into both as an untrusted writer. Each targeted question is
asked of the plain KB with ``--defense none`` and of the defended KB with ``--defense full``.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trishield.answers import contains_answer
from trishield.defenses import build_defense
from trishield.demo import ATTACKER, DEMO_WRITER, attacks, corpus_dir, questions
from trishield.kb import BACKENDS, Document, KnowledgeBase, load_path
from trishield.llm.panel import build_panel
from trishield.pipeline import Answer
from trishield.rings.ingest_guard import GuardConfig, IngestGuard

BENIGN_QUESTIONS = ("q04", "q09")


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
        notes.append(f"{len(in_context)} reached the context; Ring 3: {answer.reason}")
    return "; ".join(notes) or "no poison was retrieved"


def run_demo(console: Console, directory: Path, *, k: int = 3) -> None:
    corpus = load_path(corpus_dir()).documents
    plan = attacks()
    poisons = [Document(id=d["id"], text=d["text"], source="demo attack")
               for attack in plan for d in attack.documents]
    guard = IngestGuard(GuardConfig())

    console.rule("[bold]1. Knowledge bases")
    with KnowledgeBase.open(directory / "plain", create=True) as plain:
        plain.ingest(corpus, tier="trusted", writer=DEMO_WRITER)
        plain.ingest(poisons, tier="untrusted", writer=ATTACKER)
    with KnowledgeBase.open(directory / "defended", create=True) as defended:
        defended.ingest(corpus, tier="trusted", writer=DEMO_WRITER, guard=guard)
        defended.ingest(poisons, tier="untrusted", writer=ATTACKER, guard=guard)
        quarantined = {row["id"] for row in defended.store.quarantined()}
        console.print(f"{len(corpus)} Northwind policies written by {DEMO_WRITER} (trusted); "
                      f"{len(poisons)} poisoned documents written by {ATTACKER} (untrusted).")
        console.print(f"Ring 1 quarantined {len(quarantined)} of them at ingest in the "
                      f"defended KB: {escape(', '.join(sorted(quarantined)))}")

        console.rule("[bold]2. Retrieval (defended KB)")
        question = questions()[8].question
        table = Table(title=escape(question), title_justify="left")
        for column in ("backend", *(f"#{n}" for n in range(1, k + 1))):
            table.add_column(column, overflow="fold")
        for backend in BACKENDS:
            found = defended.search(question, backend=backend, k=k)
            table.add_row(backend, *(f"{c.chunk_id} ({c.score:.3f})" for c in found))
        console.print(table)

    console.rule("[bold]3. Attack: undefended RAG vs TriShield")
    panel = build_panel()
    console.print("Panel: " + ", ".join(f"{m.name} ({m.vendor})" for m in panel))
    rows = []
    with KnowledgeBase.open(directory / "plain") as plain, \
            KnowledgeBase.open(directory / "defended") as defended:
        undefended = build_defense("none", plain, panel)
        trishield = build_defense("full", defended, panel)
        for attack in plan:
            before = undefended.ask(attack.question)
            after = trishield.ask(attack.question)
            planted = {d["id"] for d in attack.documents}
            for label, answer in (("none", before), ("full", after)):
                fooled = answer.answer is not None and contains_answer(answer.answer,
                                                                       attack.target)
                rows.append((attack.question, label,
                             "refused" if answer.refused else answer.answer or "",
                             "[red]attack succeeded[/]" if fooled else "[green]not fooled[/]",
                             _what_stopped_it(answer, planted, quarantined)
                             if label == "full" else "-"))
        for question in questions():
            if question.id in BENIGN_QUESTIONS:
                answer = trishield.ask(question.question)
                state = ("[red]false refusal[/]" if answer.refused else
                         "[green]correct[/]" if contains_answer(answer.answer or "",
                                                                 question.answer)
                         or contains_answer(question.answer, answer.answer or "x")
                         else "[yellow]answered[/]")
                rows.append((question.question, "full (benign)",
                             "refused: " + answer.reason if answer.refused else answer.answer,
                             state, f"LLM calls {answer.trace.llm_calls}"))
    table = Table(title="Targeted questions: --defense none (plain KB) vs --defense full",
                  title_justify="left", show_lines=True)
    for column in ("question", "defense", "answer", "outcome", "what the trace says"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) if i in (0, 2) else cell for i, cell in enumerate(row)))
    console.print(table)
    console.print(f"Full traces: trishield ask \"QUESTION\" --kb {directory / 'defended'} "
                  "--defense full   (add --json for the machine-readable trace)")
