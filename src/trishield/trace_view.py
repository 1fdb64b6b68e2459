"""Human-readable rendering of an answer: a compact summary (the answer first, one line per
ring), or the whole trace as one table per ring (``trishield ask --trace``)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trishield.pipeline import Answer
from trishield.trace import EvidenceTrace, GateTrace, Ring1Trace, Ring2Trace, Ring3Trace


def _short(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split())
    return escape(flat if len(flat) <= limit else flat[:limit - 3] + "...")


def _ring1_table(ring1: Ring1Trace) -> Table:
    table = Table(title=f"Ring 1 (Ingest Guard, query-aware): block at C >= "
                        f"{ring1.config.theta}", title_justify="left")
    for column in ("passage", "S_perp", "S_pat", "S_out", "C", "verdict", "why"):
        table.add_column(column, overflow="fold")
    for verdict in ring1.verdicts:
        state = ("[red]blocked[/]" if verdict.blocked
                 else "[yellow]flagged[/]" if verdict.flagged else "pass")
        s_out = "-" if verdict.s_out is None else f"{verdict.s_out:.2f}"
        table.add_row(escape(verdict.id), f"{verdict.s_perp:.2f}", f"{verdict.s_pat:.2f}",
                      s_out, f"{verdict.c:.3f}", state, _short("; ".join(verdict.reasons), 70))
    return table


def _ring2_table(ring2: Ring2Trace) -> Table:
    table = Table(title="Ring 2 (Retrieval Scorer): T = w_prov*S_ev + (1-w_prov)*s_rel",
                  title_justify="left")
    for column in ("#", "passage", "tier", "w_prov", "s_rel", "S_ev", "T", "context"):
        table.add_column(column, overflow="fold")
    for row in ring2.ranked:
        table.add_row(str(row.trust_rank), escape(row.chunk_id), row.tier,
                      f"{row.w_prov:.2f}", f"{row.s_rel:.2f}", f"{row.s_con:.2f}",
                      f"{row.trust:.3f}", "[green]yes[/]" if row.in_context else "dropped")
    return table


def _ring3_table(ring3: Ring3Trace, gate: GateTrace | None) -> Table:
    opened = "open" if gate is None or gate.use_panel else "closed"
    why = "; ".join(gate.reasons) if gate is not None else ""
    table = Table(title=f"Ring 3 (Cross-LLM Consensus): gate {opened} ({escape(why)})",
                  title_justify="left")
    for column in ("round", "member", "vendor", "answer", "cached"):
        table.add_column(column, overflow="fold")
    for number, round_ in enumerate(ring3.rounds, start=1):
        for vote in round_.votes:
            answer = "[dim]declined[/]" if vote.refused else _short(vote.answer, 60)
            table.add_row(f"{number} (agreement {round_.agreement:.2f})",
                          escape(vote.member), escape(vote.vendor), answer,
                          "yes" if vote.cached else "no")
    return table


def _stood(seconds: float | None) -> str:
    """How long a source stood uncontested, as the evidence table says it."""
    if not seconds:
        return ""
    days = seconds / 86_400
    return f", stood {days:.0f} d" if days >= 1 else f", stood {seconds / 3600:.1f} h"


def _evidence_table(evidence: EvidenceTrace) -> Table:
    """Each answer weighed: both sides, their independent sources and weights."""
    table = Table(title="Evidence: the claims the sources gave, weighed",
                  title_justify="left")
    for column in ("outcome", "side", "claim", "top tier", "weight", "sources"):
        table.add_column(column, overflow="fold")
    for verdict in evidence.verdicts:
        sides = [("best", verdict.support)] + (
            [("runner-up", verdict.opposition)] if verdict.opposition is not None else [])
        for side, claim in sides:
            sources = "; ".join(f"{'+'.join(s.writers)} ({s.tier}, {len(s.passages)} "
                                f"passage(s), {s.weight:.2f}"
                                f"{', one burst' if s.burst else ''}"
                                f"{'' if s.tenure is None else f', tenure {s.tenure:.2f}'}"
                                f"{_stood(s.stood_s)}{', new' if s.new else ''})"
                                for s in claim.sources)
            table.add_row(verdict.outcome, side,
                          _short(claim.claim, 40), claim.top_tier or "-",
                          f"{claim.weight:.2f}", _short(sources or "none", 90))
    return table


def render_answer(console: Console, answer: Answer) -> None:
    trace = answer.trace
    console.print(f"[bold]Question:[/] {escape(trace.question)}   "
                  f"[dim](defense {trace.defense}, {trace.backend} retrieval, "
                  f"pool {trace.pool}, k {trace.k})[/]")
    if trace.ring1 is not None:
        console.print(_ring1_table(trace.ring1))
    if trace.ring2 is not None:
        console.print(_ring2_table(trace.ring2))
        for conflict in trace.ring2.conflicts:
            console.print(f"  [yellow]conflict:[/] {escape(conflict.a)} says "
                          f"{escape(conflict.a_value)}, {escape(conflict.b)} says "
                          f"{escape(conflict.b_value)}")
    if trace.ring3 is not None:
        console.print(_ring3_table(trace.ring3, trace.gate))
        if trace.evidence is not None and trace.evidence.verdicts:
            console.print(_evidence_table(trace.evidence))
        if (line := dispute_line(trace.evidence)) is not None:
            console.print(line)
    elif trace.reader is not None:
        vote = trace.reader
        console.print(f"Reader {escape(vote.member)} ({escape(vote.vendor)}): "
                      f"{_short(vote.answer, 120)}")
    for stage, details in trace.details.items():
        console.print(f"[dim]{escape(stage)}: {_short(str(details), 160)}[/]")
    context = ", ".join(f"{escape(p.id)} ({p.tier})" for p in trace.context)
    console.print(f"[bold]Context sent:[/] {context or '(nothing)'}")
    if answer.refused:
        console.print(f"[bold red]Refused:[/] {escape(answer.reason)}")
    else:
        cited = ", ".join(escape(c) for c in answer.citations) or "none"
        console.print(f"[bold green]Answer:[/] {escape(answer.answer or '')}   "
                      f"[dim]citations: {cited}; {escape(answer.reason)}[/]")
    console.print(f"[dim]LLM calls {trace.llm_calls} (+{trace.llm_calls_cached} cached), "
                  f"{trace.timings_s['total']:.2f}s[/]")


def dispute_line(evidence: EvidenceTrace | None) -> str | None:
    """What became of the conflict between writers the weighing met (docs/design/ring3-consensus.md,
    "Disputes"), as one line of markup; None when there was none to record."""
    note = None if evidence is None else evidence.dispute
    if note is None:
        return None
    if not note.recorded:
        return f"dispute: {escape(note.note)}"
    return (f"dispute: recorded as {note.id} (met {note.occurrences}x, {note.state}): "
            f"`trishield disputes show {note.id}`")


def render_summary(console: Console, answer: Answer) -> None:
    """The answer first, then one line per stage that ran: what a user reads before deciding
    whether to open the whole trace (``--trace`` or ``--json``)."""
    trace = answer.trace
    if answer.refused:
        console.print(f"[bold red]Refused:[/] {escape(answer.reason)}")
    else:
        console.print(f"[bold green]Answer:[/] {escape(answer.answer or '')}")
        cited = ", ".join(escape(c) for c in answer.citations) or "none"
        console.print(f"  citations: {cited}")
        console.print(f"  why: {escape(answer.reason)}")
    if trace.ring1 is not None:
        console.print(f"  Ring 1: {len(trace.ring1.blocked)} of {len(trace.ring1.verdicts)} "
                      f"candidates blocked, {len(trace.ring1.flagged)} flagged")
    if trace.ring2 is not None:
        console.print(f"  Ring 2: context {', '.join(escape(p.id) for p in trace.context)}")
    if trace.gate is not None:
        console.print(f"  Ring 3 gate: {escape('; '.join(trace.gate.reasons))}")
    if trace.evidence is not None and trace.evidence.verdicts:
        console.print(f"  evidence: {escape(trace.evidence.verdicts[-1].reason)}")
    if (line := dispute_line(trace.evidence)) is not None:
        console.print(f"  {line}")
    console.print(f"[dim]  {trace.llm_calls} LLM call(s) (+{trace.llm_calls_cached} cached), "
                  f"{trace.timings_s.get('total', 0.0):.2f}s; --trace for every decision, "
                  "--json for the whole record[/]")
