"""``trishield ingest``, ``trishield documents`` and ``trishield quarantine``: what goes into a
knowledge base, what it holds, and what Ring 1 held back.

Kept apart from :mod:`trishield.cli` (which registers these commands) so that the document
lifecycle reads in one place. Like the rest of the CLI it is a thin layer over the public API
(:mod:`trishield.api`): validation, batching, versions and auditing live below it.

The progress bar is rich's (already the CLI's console library, so no second one is pulled
in; tqdm would duplicate it and could not share the console the summary is printed on). It
is drawn on stderr only when stderr is a terminal and ``--json`` is off, so a piped or
scripted ingest prints nothing but its summary.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
)
from rich.table import Table

from trishield.kb.documents import TIERS
from trishield.kb.ingest_report import IngestProgress, IngestReport
from trishield.kb.read_limits import OPTION_OF, ReadLimits, format_bytes, limits_from_text

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
errors = Console(stderr=True, highlight=False)

kb_option = click.option("--kb", "kb_dir", required=True,
                         type=click.Path(file_okay=False, path_type=Path),
                         help="Knowledge base directory.")
json_option = click.option("--json", "json_output", is_flag=True,
                           help="Print machine-readable JSON.")
by_option = click.option("--by", required=True, help="Who takes the decision (audited).")
INTERRUPTED_EXIT = 130


def _print_json(payload: object) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False))


def _when(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _limit_options(command: Callable) -> Callable:
    """The read limit options of ``trishield ingest`` (docs/documents.md, "Reading limits")."""
    defaults = ReadLimits()
    counts = ("max_pages", "max_depth", "max_seconds")
    helps = {
        "max_file_bytes": "Largest file read, checked before parsing (e.g. 20MB, 512KiB).",
        "max_expanded_bytes": "Most a file may expand to: DOCX parts unpacked, text "
                              "extracted.",
        "max_pages": "Most pages of one PDF.",
        "max_depth": "Deepest element nesting of an HTML page.",
        "max_seconds": "Seconds the parser may spend on one PDF, DOCX, HTML or rST file.",
        "max_memory_bytes": "Memory (address space) of the process that parses PDF, DOCX, "
                            "HTML and rST files.",
        "max_front_matter_bytes": "Largest YAML front matter, as written and as expanded.",
    }
    for name in reversed(list(OPTION_OF)):
        value = getattr(defaults, name)
        default = f"{value:g}" if name in counts else format_bytes(value).replace(" ", "")
        command = click.option(OPTION_OF[name], f"limit_{name}", metavar="LIMIT",
                               default=default, show_default=True,
                               help=helps[name] + " 'none': no limit.")(command)
    return command


# -- progress --------------------------------------------------------------------------------
def _eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"ETA {hours}:{minutes:02d}:{secs:02d}" if hours else f"ETA {minutes}:{secs:02d}"


class IngestProgressBar:
    """Files read, then chunks embedded (with the embedding rate and an ETA) and documents
    committed, as a rich progress display on stderr.

    The ETA is the ingest's own (:attr:`IngestProgress.eta_seconds`: the chunks left at the
    rate so far, commits included), shown from the first encoder batch on; rich's remaining
    time column needs two updates within 30 s, which a slow CPU never gave it."""

    def __init__(self, console: Console):
        self.progress = Progress(
            TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"), console=console,
            transient=False, refresh_per_second=4)  # enough for a human; less CPU taken
        self._files: TaskID | None = None
        self._chunks: TaskID | None = None
        self._documents: TaskID | None = None

    def on_file(self, done: int, total: int) -> None:
        if self._files is None:
            self._files = self.progress.add_task("reading files", total=total, detail="")
        self.progress.update(self._files, completed=done)

    def on_progress(self, state: IngestProgress) -> None:
        if self._chunks is None:
            self._chunks = self.progress.add_task("embedding chunks", total=state.chunks_total,
                                                  detail="")
            self._documents = self.progress.add_task("committing docs",
                                                     total=state.documents_total, detail="")
        rate = (f"{state.chunks_per_second:.1f} chunks/s" if state.chunks_per_second else "")
        self.progress.update(self._chunks, completed=state.chunks_embedded,
                             detail=" ".join(filter(None, (rate, _eta(state.eta_seconds)))))
        batches = (f"{state.batches_done} batch(es) committed" if state.batches_total is None
                   else f"batch {state.batches_done}/{state.batches_total}")
        self.progress.update(self._documents, completed=state.documents_done, detail=batches)


@contextmanager
def _progress_bar(wanted: bool) -> Iterator[IngestProgressBar | None]:
    if not wanted:
        yield None
        return
    bar = IngestProgressBar(errors)
    with bar.progress:
        yield bar


# -- ingest ----------------------------------------------------------------------------------
@click.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@kb_option
@click.option("--dataset", help="Ingest a named data set from the data directory "
                                "(see `trishield datasets`), e.g. wiki5k.")
@click.option("--tier", type=click.Choice(TIERS), default="neutral",
              show_default=True, help="Provenance tier of this writer.")
@click.option("--writer", default="cli", show_default=True, help="Writer name for the audit log.")
@click.option("--id-prefix", default="", help="Put this before every document id, e.g. "
              "'handbook/': two folders with the same file names then never collide.")
@click.option("--update/--no-update", default=True, show_default=True,
              help="Store a changed file as a new version of its document (the old one is "
                   "retired and kept); --no-update refuses the run instead.")
@click.option("--commit-every", "commit_seconds", type=click.FloatRange(0, min_open=True),
              default=30.0, show_default=True, metavar="SECONDS",
              help="Commit a batch about this often (the first within seconds): an interrupt "
                   "keeps everything but the running batch.")
@click.option("--batch-size", type=click.IntRange(min=1),
              help="At most this many documents per committed batch (default: no cap).")
@_limit_options
@click.option("--progress/--no-progress", "show_progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal and not --json).")
@click.option("--model", "embedding_model", help="Embedding model for a new KB "
              "(all-MiniLM-L6-v2 by default, all-MiniLM-L6-v2-int8: the same model in int8 "
              "on ONNX Runtime, loads without torch; or all-mpnet-base-v2).")
@click.option("--chunk-words", type=click.IntRange(min=1), help="Words per chunk (new KB; 120).")
@click.option("--chunking", "chunk_strategy", type=click.Choice(("sections", "window")),
              help="How a new KB cuts documents: by their sections (default) or in word "
                   "windows.")
@click.option("--chunk-overlap", type=click.IntRange(min=0), help="Overlap in words (new KB; 20).")
@click.option("--index", "dense_index", type=click.Choice(["flat", "hnsw", "ivfpq"]),
              help="Dense index of a new KB (flat by default; see docs/scale.md).")
@click.option("--engine", "engine_uri", metavar="URI",
              help="Search engine of a new KB: 'embedded' (default), a Milvus Lite path ending "
                   "in .db, or http://host:19530 (token from TRISHIELD_MILVUS_TOKEN); see "
                   "docs/engines.md.")
@click.option("--engine-collection", metavar="NAME",
              help="Milvus collection of a new KB (trishield_chunks by default).")
@click.option("--engine-index", type=click.Choice(["flat", "hnsw", "ivf"]),
              help="Milvus vector index of a new KB (flat by default).")
@click.option("--guard/--no-guard", default=True, show_default=True,
              help="Screen each document with Ring 1 and quarantine what it blocks.")
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="Defense configuration file (TOML); `trishield config show --config FILE` "
                   "prints the effective settings.")
@json_option
def ingest(path: Path | None, kb_dir: Path, dataset: str | None, tier: str, writer: str,
           id_prefix: str, update: bool, commit_seconds: float, batch_size: int | None,
           show_progress: bool | None,
           embedding_model: str | None, chunk_words: int | None, chunk_strategy: str | None,
           chunk_overlap: int | None,
           dense_index: str | None, engine_uri: str | None, engine_collection: str | None,
           engine_index: str | None, guard: bool, config_file: Path | None, json_output: bool,
           **limit_options: str) -> None:
    """Ingest PATH (JSONL, SQuAD JSON, .txt/.md/.rst, HTML, DOCX, PDF, or a folder of them) or
    a --dataset into --kb, in batches committed about every --commit-every seconds.

    Every file is read under limits (size, expanded size, pages, nesting, parse time and
    memory: the --max-* and --parse-* options). In a folder, files that cannot be read or
    are over a limit are reported and the rest is ingested; links out of the folder, pipes
    and devices are reported as skipped and never opened. Ctrl-C keeps the batches already
    committed; running the same command again skips what is stored and finishes the rest.
    A changed file becomes a new version of its document (see `trishield documents
    show`)."""
    from trishield.api import ingest_loaded, load_input
    from trishield.kb import ChunkingConfig, IngestInterrupted, KnowledgeBase, LoadedBatch
    from trishield.kb.datasets import load_named
    from trishield.kb.indexes.engines.config import EngineConfig
    from trishield.kb.loaders import with_id_prefix
    from trishield.rings.analysis import DEFAULT_ANALYSER
    from trishield.rings.ingest_guard import IngestGuard
    from trishield.settings import load_settings

    if (path is None) == (dataset is None):
        raise click.UsageError("give exactly one of PATH or --dataset")
    limits = limits_from_text({name.removeprefix("limit_"): text
                               for name, text in limit_options.items()})
    engine = None if engine_uri is None and engine_collection is None and engine_index is None \
        else EngineConfig.parse(engine_uri, engine_collection, engine_index)
    screen = IngestGuard(load_settings(config_file).pipeline.guard) if guard else None
    _refuse_key_names(kb_dir, writer)
    chunking = None
    if chunk_words is not None or chunk_overlap is not None or chunk_strategy is not None:
        chunking = ChunkingConfig(chunk_words or 120,
                                  20 if chunk_overlap is None else chunk_overlap,
                                  chunk_strategy or "sections")  # type: ignore[arg-type]
    wanted = (sys.stderr.isatty() and not json_output) if show_progress is None \
        else show_progress
    with _progress_bar(wanted) as bar:
        # everything is read and validated before the KB is opened (or created)
        if dataset is not None:
            batch = LoadedBatch(with_id_prefix(load_named(dataset), id_prefix), [])
            source = f"dataset:{dataset}"
        else:
            batch = load_input(path, id_prefix=id_prefix, limits=limits,
                               on_file=bar.on_file if bar else None)
            source = str(path.absolute())
        with KnowledgeBase.open(kb_dir, create=True, embedding_model=embedding_model,
                                chunking=chunking, dense_index=dense_index,
                                engine=engine, analyser=DEFAULT_ANALYSER) as kb:
            try:
                result = ingest_loaded(kb, batch, source=source, tier=tier, writer=writer,
                                       batch_size=batch_size, update=update, guard=screen,
                                       on_progress=bar.on_progress if bar else None,
                                       commit_seconds=commit_seconds)
            except IngestInterrupted as interrupted:
                if bar:
                    bar.progress.stop()
                _say_interrupted(interrupted.report, kb_dir, json_output)
                sys.exit(INTERRUPTED_EXIT)
            stats = kb.stats()
    _say_ingested(result, kb_dir, writer, tier, stats, json_output)


def _say_interrupted(report: IngestReport, kb_dir: Path, json_output: bool) -> None:
    if json_output:
        _print_json(report.as_dict() | {"interrupted": True})
        return
    errors.print(f"[yellow]interrupted:[/] kept {len(report.batch_ids)} committed batch(es) "
                 f"in {escape(str(kb_dir))}: {len(report.added)} document(s) added, "
                 f"{len(report.quarantined)} quarantined; {report.remaining} document(s) not "
                 "ingested yet. Run the same command again to finish: what is stored is "
                 "skipped.", soft_wrap=True)


def _say_ingested(result, kb_dir: Path, writer: str, tier: str, stats: dict,
                  json_output: bool) -> None:
    report = result.report
    skipped = [{"path": f.path, "reason": f.reason} for f in result.skipped_files]
    failed = [{"path": f.path, "error": f.error} for f in result.failed_files]
    if json_output:
        _print_json(report.as_dict() | {"skipped_files": skipped, "failed_files": failed,
                                        "kb": stats})
        return
    rate = (f", {report.chunks_added / report.embed_seconds:.1f} chunks/s"
            if report.embed_seconds > 0 else "")
    new = len(report.added) - len(report.updated)
    console.print(
        f"ingested {new} new document(s) and {len(report.updated)} new version(s), "
        f"{report.chunks_added} chunk(s) into {escape(str(kb_dir))} as {escape(writer)} "
        f"({tier}) in {len(report.batch_ids)} batch(es); {len(report.quarantined)} "
        f"quarantined by Ring 1; {report.already_present} already present, "
        f"{report.already_quarantined} already in quarantine; {report.seconds:.1f}s "
        f"(embedding {report.embed_seconds:.1f}s{rate})")
    for changed in report.updated:
        console.print(f"[cyan]updated:[/] {escape(changed['id'])} is now version "
                      f"{changed['version']} (the previous version is retired and kept)")
    for held in report.quarantined:
        console.print(f"[red]quarantined by Ring 1:[/] {escape(held['id'])} (C={held['c']}): "
                      f"{escape('; '.join(held['reasons']))}")
    for entry in skipped:
        console.print(f"[yellow]not ingested ({escape(entry['reason'])}):[/] "
                      f"{escape(entry['path'])}", soft_wrap=True)
    for problem in failed:
        errors.print(f"[red]not ingested (cannot be read):[/] {escape(problem['error'])}",
                     soft_wrap=True)
    for warning in report.warnings:
        errors.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    console.print(f"KB now holds {stats['documents']} documents, {stats['chunks']} chunks, "
                  f"{stats['quarantined']} held in quarantine (generation "
                  f"{stats['generation']}, {stats['embedding_model']}).")


def _refuse_key_names(kb_dir: Path, writer: str) -> None:
    """A local write must not pass for an API key's writer (names are identities)."""
    from trishield.errors import InputError
    from trishield.provenance.keys import KEYS_DATABASE, KeyStore

    if not (kb_dir / KEYS_DATABASE).is_file():
        return
    if writer.lower() in {key.name.lower() for key in KeyStore(kb_dir).api_keys()}:
        raise InputError(f"--writer {writer!r} is the name of an API key of this KB; local "
                         "writes must not pass for it, choose another writer name")


# -- documents -------------------------------------------------------------------------------
@click.group()
def documents() -> None:
    """List, show and delete the documents of a knowledge base (re-ingest a changed file to
    update one)."""


@documents.command("list")
@kb_option
@click.option("--writer", help="Only this writer's documents.")
@click.option("--prefix", help="Only ids that start with this.")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many.")
@json_option
def documents_list(kb_dir: Path, writer: str | None, prefix: str | None, limit: int | None,
                   json_output: bool) -> None:
    """List stored documents (oldest first) with writer, tier, version and chunk count."""
    from trishield.api import list_documents
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        rows = list_documents(kb, writer=writer, prefix=prefix, limit=limit)
    if json_output:
        _print_json(rows)
        return
    table = Table(title=f"documents of {kb_dir}", title_justify="left")
    for column in ("document", "title", "writer", "tier", "version", "chunks", "ingested"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(escape(row["id"]), escape(row["title"]), escape(row["writer"]),
                      row["tier"], str(row["version"]), str(row["chunks"]),
                      _when(row["ingested_at"]))
    if not rows:
        table.add_row("(none)", "", "", "", "", "", "")
    console.print(table)


@documents.command("show")
@click.argument("doc_id")
@kb_option
@json_option
def documents_show(doc_id: str, kb_dir: Path, json_output: bool) -> None:
    """Show one stored document: title, front matter metadata, provenance, version history
    and text."""
    from trishield.api import show_document
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        record = show_document(kb, doc_id)
    if json_output:
        _print_json(record)
        return
    fields = [("id", record["id"]), ("title", record["title"]),
              ("version", str(record["version"])), ("writer", record["writer"]),
              ("tier", record["tier"]), ("source", record["source"]),
              ("ingested", _when(record["ingested_at"])), ("chunks", str(record["chunks"])),
              ("content sha256", record["content_hash"])]
    if record["provenance"]:
        fields.append(("provenance", record["provenance"]))
    for key, value in sorted(record["metadata"].items()):
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        fields.append((f"metadata {key}", shown))
    for earlier in record["earlier_versions"]:
        fields.append((f"version {earlier['version']}",
                       f"retired {_when(earlier['retired_at'])} by {earlier['retired_by']} "
                       f"(sha256 {earlier['content_hash'][:12]})"))
    width = max(len(key) for key, _ in fields)
    for key, value in fields:
        console.print(f"[bold]{escape(key.ljust(width))}[/]  {escape(value)}")
    console.print()
    console.print(escape(record["text"]), soft_wrap=True)


@documents.command("delete")
@click.argument("doc_ids", nargs=-1, required=True)
@kb_option
@by_option
@click.option("--reason", default="", help="Why (audited).")
def documents_delete(doc_ids: tuple[str, ...], kb_dir: Path, by: str, reason: str) -> None:
    """Delete stored documents DOC_IDS (all of them or, when one is not stored, none). The
    deletion is audited and each document is kept as a tombstone; re-ingest to restore."""
    from trishield.api import delete_documents
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        tombstones = delete_documents(kb, list(doc_ids), by=by, reason=reason)
    for tombstone in tombstones:
        console.print(f"deleted {escape(tombstone['id'])} from {escape(str(kb_dir))}; audited "
                      f"as {escape(by)}")


# -- quarantine ------------------------------------------------------------------------------
@click.group()
def quarantine() -> None:
    """Review what Ring 1 blocked at ingest, and release what it got wrong."""


@quarantine.command("list")
@kb_option
@click.option("--all", "include_released", is_flag=True,
              help="Include released, discarded and withdrawn documents.")
@json_option
def quarantine_list(kb_dir: Path, include_released: bool, json_output: bool) -> None:
    """List quarantined documents with their Ring 1 score and reasons."""
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        rows = kb.store.quarantined(include_released=include_released)
    if json_output:
        _print_json([{k: v for k, v in row.items() if k != "text"} for row in rows])
        return
    table = Table(title=f"quarantine of {kb_dir}", title_justify="left")
    for column in ("document", "writer", "tier", "C", "reasons", "state"):
        table.add_column(column, overflow="fold")
    for row in rows:
        state = row["state"] if row["state"] == "held" else f"{row['state']} by {row['closed_by']}"
        table.add_row(escape(row["id"]), escape(row["writer"]), row["tier"],
                      # a document withdrawn for a dispute was never scored ("c": null)
                      "-" if row["verdict"].get("c") is None else f"{row['verdict']['c']:.3f}",
                      escape("; ".join(row["verdict"]["reasons"])),
                      escape(state))
    if not rows:
        table.add_row("(empty)", "", "", "", "", "")
    console.print(table)


@quarantine.command("show")
@click.argument("doc_id")
@kb_option
def quarantine_show(doc_id: str, kb_dir: Path) -> None:
    """Show one quarantined document in full, with its Ring 1 verdict (JSON)."""
    from trishield.errors import InputError
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        record = kb.store.quarantined_document(doc_id)
    if record is None:
        raise InputError(f"no document {doc_id!r} in quarantine")
    _print_json(record)


writer_selection = click.option("--writer", help="Every document of this writer held now "
                                                 "(instead of DOC_IDS).")


@quarantine.command("release")
@click.argument("doc_ids", nargs=-1)
@kb_option
@writer_selection
@by_option
def quarantine_release(doc_ids: tuple[str, ...], kb_dir: Path, writer: str | None,
                       by: str) -> None:
    """Release quarantined documents DOC_IDS (or all of --writer's) into the KB, in one
    audited step: all of them or, when one is not held, none."""
    from trishield.api import release_quarantined
    from trishield.kb import KnowledgeBase
    from trishield.rings.analysis import DEFAULT_ANALYSER

    with KnowledgeBase.open(kb_dir, analyser=DEFAULT_ANALYSER) as kb:
        report = release_quarantined(kb, list(doc_ids), writer=writer, by=by)
    for doc_id in report.added:
        console.print(f"released {escape(doc_id)} into {escape(str(kb_dir))}; audited as "
                      f"{escape(by)}")
    console.print(f"{len(report.added)} document(s), {report.chunks_added} chunk(s) released")


@quarantine.command("discard")
@click.argument("doc_ids", nargs=-1)
@kb_option
@writer_selection
@by_option
@click.option("--reason", default="", help="Why (audited).")
def quarantine_discard(doc_ids: tuple[str, ...], kb_dir: Path, writer: str | None, by: str,
                       reason: str) -> None:
    """Discard quarantined documents DOC_IDS (or all of --writer's): they are not stored and
    their ids are free again (audited; the quarantine keeps them in its history). All of
    them or, when one is not held, none."""
    from trishield.api import discard_quarantined
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        closed = discard_quarantined(kb, list(doc_ids), writer=writer, by=by, reason=reason)
    for record in closed:
        console.print(f"discarded {escape(record['id'])} from the quarantine of "
                      f"{escape(str(kb_dir))}; audited as {escape(by)}")


COMMANDS = (ingest, documents, quarantine)
"""What :mod:`trishield.cli` registers."""
