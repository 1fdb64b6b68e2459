"""``trishield disputes``: the conflicts between writers that the evidence met, for a person
to settle (docs/design/ring3-consensus.md, "Disputes").

``list`` and ``show`` read the KB's disputes queue; ``resolve`` quarantines a side, trusts a
side or dismisses the dispute, audited under ``--by``. Like the rest of the CLI a thin layer
over the KB (:mod:`trishield.kb.store.disputes`, :mod:`trishield.kb.store.dispute_resolution`); it
imports the KB (numpy, the indexes) only inside the commands, so ``trishield --help`` loads
none of it.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)

kb_option = click.option("--kb", "kb_dir", required=True,
                         type=click.Path(file_okay=False, path_type=Path),
                         help="Knowledge base directory.")
json_option = click.option("--json", "json_output", is_flag=True,
                           help="Print machine-readable JSON.")
STATE_CHOICES = ("open", "resolved", "dismissed", "all")
ACTION_CHOICES = ("quarantine", "trust", "dismiss")


def _print_json(payload: object) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False))


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _stood(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 86_400:.1f} d" if seconds >= 86_400 else f"{seconds / 3600:.1f} h"


def _subject(row: dict) -> str:
    """What a dispute is about: its question, or at ingest what was copied."""
    return row["question"] if row["origin"] == "question" else f"(ingest) {row['reason']}"


@click.group()
def disputes() -> None:
    """Conflicts between writers that TriShield met (at question time or at ingest): list,
    show and settle them (quarantine a side, trust a side, dismiss), audited."""


@disputes.command("list")
@kb_option
@click.option("--state", type=click.Choice(STATE_CHOICES), default="open", show_default=True,
              help="Which disputes.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="At most this many, most recently met first.")
@json_option
def disputes_list(kb_dir: Path, state: str, limit: int, json_output: bool) -> None:
    """List disputes, most recently met first: question, writers, outcome, how often."""
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        rows = kb.disputes(state=state, limit=limit)
    if json_output:
        _print_json(rows)
        return
    table = Table(title=f"{state} disputes of {kb_dir}", title_justify="left")
    for column in ("id", "question", "writers", "outcome", "decision", "seen", "last seen",
                   "state"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(str(row["id"]), escape(_subject(row)), escape(", ".join(row["writers"])),
                      row["outcome"], escape(row["decision"] or "(refused)"),
                      f"{row['occurrences']}x", _when(row["last_seen"]), row["state"])
    if not rows:
        table.add_row("(none)", "", "", "", "", "", "", "")
    console.print(table)


@disputes.command("show")
@click.argument("dispute_id", type=click.IntRange(min=1))
@kb_option
@json_option
def disputes_show(dispute_id: int, kb_dir: Path, json_output: bool) -> None:
    """Show one dispute: each side's claim, its sources (writers, tier, weight, time stood)
    and passages (their text, and whether they are still stored), and the decision."""
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        record = kb.dispute(dispute_id)
    if json_output:
        _print_json(record)
        return
    console.print(f"[bold]dispute {record['id']}[/] ({record['state']}, met "
                  f"{record['occurrences']}x, first {_when(record['first_seen'])}, last "
                  f"{_when(record['last_seen'])})")
    if record["origin"] == "question":
        console.print(f"[bold]question[/]  {escape(record['question'])}")
    console.print(f"[bold]outcome[/]   {record['outcome']}: {escape(record['reason'])}",
                  soft_wrap=True)
    console.print(f"[bold]decision[/]  {escape(record['decision'] or '(refused)')}")
    for number, side in enumerate(record["sides"], 1):
        weight = "-" if side["weight"] is None else f"{side['weight']:.2f}"
        console.print(f"\n[bold]side {number}[/]: {escape(side['claim'])} (weight {weight}, "
                      f"top tier {side['top_tier'] or '-'})", soft_wrap=True)
        for source in side["sources"]:
            weight = "-" if source["weight"] is None else f"{source['weight']:.2f}"
            console.print(f"  source {escape('+'.join(source['writers']))}: {source['tier']}, "
                          f"weight {weight}, stood {_stood(source['stood_s'])}"
                          + (", established" if source["established"] else ""))
            for passage in source["passages"]:
                state = escape(f"[{passage['state']}]")
                console.print(f"    {escape(passage['id'])} {state}: "
                              f"{escape(passage['text'] or '(no longer in the KB)')}",
                              soft_wrap=True)
    if record["state"] != "open":
        resolution = record["resolution"]
        console.print(f"\n{record['state']} by {escape(record['closed_by'])} on "
                      f"{_when(record['closed_at'])}: {resolution.get('action')}"
                      + (f" side {resolution['side']}" if resolution.get("side") else "")
                      + (f" ({escape(resolution['note'])})" if resolution.get("note") else ""))


@disputes.command("resolve")
@click.argument("dispute_id", type=click.IntRange(min=1))
@kb_option
@click.option("--action", type=click.Choice(ACTION_CHOICES), required=True,
              help="quarantine: withdraw the side's stored documents into the quarantine "
                   "(release undoes it); trust: raise them to the trusted tier; dismiss: "
                   "change nothing.")
@click.option("--side", type=click.IntRange(min=1),
              help="The side to act on, numbered as `disputes show` does (not with dismiss).")
@click.option("--by", required=True, help="Who takes the decision (audited).")
@click.option("--note", default="", help="Why (audited, at most 500 characters).")
@json_option
def disputes_resolve(dispute_id: int, kb_dir: Path, action: str, side: int | None, by: str,
                     note: str, json_output: bool) -> None:
    """Settle dispute DISPUTE_ID in one audited step: quarantine a side, trust a side, or
    dismiss it. A publisher's signature is not made here: the publisher signs its record
    (`trishield keys sign`) and posts it, which takes the id over from an unsigned copy."""
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        done = kb.resolve_dispute(dispute_id, action=action, side=side, by=by, note=note)
    if json_output:
        _print_json(done.as_dict())
        return
    verb = {"quarantine": "quarantined", "trust": "raised to trusted", "dismiss": ""}[action]
    if done.documents:
        console.print(f"{verb}: {escape(', '.join(done.documents))}")
    for skipped in done.skipped:
        console.print(f"left as it is: {escape(skipped['id'])} ({escape(skipped['why'])})")
    state = "dismissed" if action == "dismiss" else "resolved"
    console.print(f"dispute {dispute_id} {state}; audited as {escape(by)}")


COMMANDS = (disputes,)
"""What :mod:`trishield.cli` registers."""
