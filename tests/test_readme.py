"""README.md's code blocks, read against the code: each either runs here as written or says it
is a fragment (its first line is a ``# fragment`` comment).

* ``python`` blocks run, in order, in one scratch directory (each as ``__main__``);
* ``toml`` blocks are configuration files: ``trishield config check`` must accept them;
* ``bash`` blocks: every ``trishield`` command must name a real command and only options
  that command has (what its ``--help`` lists), so the README cannot drift from the CLI;
  docs/guide-cli.md's synopses of every command are checked the same way.
"""

from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from trishield.cli import cli

README = Path(__file__).resolve().parents[1] / "README.md"
GUIDE = README.parent / "docs" / "guide-cli.md"
"""The command line's full tour: its command synopses are checked like the README's."""
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(language: str, path: Path = README) -> list[str]:
    found = [body for lang, body in BLOCK.findall(path.read_text(encoding="utf-8"))
             if lang == language]
    return [body for body in found if not body.lstrip().startswith("# fragment")]


def test_every_block_is_known() -> None:
    languages = {lang for lang, _ in BLOCK.findall(README.read_text(encoding="utf-8"))}
    assert languages <= {"python", "toml", "bash", ""}, languages
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 260


@pytest.mark.slow
def test_python_blocks_run_as_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    runnable = blocks("python")
    assert runnable, "the README's Python API example"
    monkeypatch.chdir(tmp_path)
    for number, body in enumerate(runnable):
        script = tmp_path / f"readme_block_{number}.py"
        script.write_text(body, encoding="utf-8")
        runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "30 days" in out and "['policy'] ['forum-post']" in out


def test_toml_blocks_are_valid_configurations(tmp_path: Path) -> None:
    configs = blocks("toml")
    assert configs
    for number, body in enumerate(configs):
        path = tmp_path / f"readme_{number}.toml"
        path.write_text(body, encoding="utf-8")
        result = CliRunner().invoke(cli, ["config", "check", str(path)])
        assert result.exit_code == 0, result.output


OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def _commands(path: Path) -> list[list[str]]:
    """Each ``trishield`` command of the file's shell blocks, as words; an indented line
    continues the command above it (the synopses in docs/guide-cli.md)."""
    commands: list[list[str]] = []
    for body in blocks("bash", path):
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "trishield":
                commands.append(words[1:])
            elif words and line.startswith(" ") and commands:
                commands[-1].extend(words)
    return commands


def _check(words: list[str]) -> None:
    """The command path names real commands, and every option written (also inside
    ``[--opt VALUE]`` or ``--a|--b``) is one of the command's options."""
    command: click.Command = cli
    path = ["trishield"]
    while isinstance(command, click.Group) and words and not words[0].startswith(("-", "[")):
        name = words.pop(0)
        # get_command, not .commands: a group may load its commands lazily
        found = command.get_command(click.Context(command), name)
        assert found is not None, f"{' '.join(path)} has no command {name!r}"
        command = found
        path.append(name)
    options = {opt for param in command.params if isinstance(param, click.Option)
               for opt in [*param.opts, *param.secondary_opts]} | {"-h", "--help"}
    for word in words:
        for flag in OPTION.findall(word):
            assert flag in options, f"{' '.join(path)} has no option {flag}"


@pytest.mark.parametrize("path", [README, GUIDE])
def test_shell_commands_exist_with_their_options(path: Path) -> None:
    commands = _commands(path)
    assert len(commands) >= 10
    for words in commands:
        _check(list(words))
