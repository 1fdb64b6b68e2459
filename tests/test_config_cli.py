"""``trishield config show|check`` and the command-line overrides of ``trishield ask``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from trishield.cli import cli
from trishield.errors import InputError
from trishield.settings import Settings, load_settings

VALID = """
[retrieval]
backend = "bm25"
pool = 30
[ring1]
theta = 0.3
[ring2]
min_relevance = { bm25 = 2.5 }
[ring3]
gate = "always"
low_trust_tiers = ["untrusted", "neutral"]
[panel]
members = ["extractive"]
[[panel.remote]]
kind = "ollama"
model = "llama3.2"
"""


def _write(tmp_path: Path, text: str, name: str = "trishield.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_show_prints_a_file_that_loads_back_to_the_same_settings(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID)
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert "theta = 0.3" in result.output and 'gate = "always"' in result.output
    assert f"overridden by {path}" in result.output
    shown = _write(tmp_path, result.output, "shown.toml")
    assert load_settings(shown) == load_settings(path)


def test_show_round_trips_the_second_reader(tmp_path: Path) -> None:
    path = _write(tmp_path, '[panel]\nsecond_reader = "qwen2.5-1.5b"\n')
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(path)])
    assert result.exit_code == 0 and 'second_reader = "qwen2.5-1.5b"' in result.output
    shown = _write(tmp_path, result.output, "shown.toml")
    assert load_settings(shown).second_reader == "qwen2.5-1.5b"


def test_show_without_a_file_prints_the_defaults(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["config", "show"])
    assert result.exit_code == 0, result.output
    assert load_settings(_write(tmp_path, result.output)) == Settings()


def test_show_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["config", "show", "--json", "--config",
                                      str(_write(tmp_path, VALID))])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["pipeline"]["guard"]["theta"] == 0.3
    assert shown["pipeline"]["scorer"]["min_relevance"] == {"bm25": 2.5}
    assert shown["panel"] == ["extractive", {"kind": "ollama", "model": "llama3.2"}]


def test_check_accepts_a_valid_file(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID)
    result = CliRunner().invoke(cli, ["config", "check", str(path)])
    assert result.exit_code == 0 and "valid" in result.output


def test_check_and_show_refuse_an_unknown_key_by_name(tmp_path: Path) -> None:
    path = _write(tmp_path, "[ring1]\nthreshold = 0.2\n")
    for arguments in (["config", "check", str(path)], ["config", "show", "--config", str(path)]):
        result = CliRunner().invoke(cli, arguments)
        assert result.exit_code != 0
        assert isinstance(result.exception, InputError)
        assert "[ring1] unknown key 'threshold'" in str(result.exception)
        assert str(path) in str(result.exception)


def test_check_from_the_entry_point_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    path = _write(tmp_path, "[ring3]\ngate = \"sometimes\"\n")
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    done = subprocess.run([sys.executable, "-m", "trishield.cli", "config", "check", str(path)],
                          capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 2
    assert "[ring3] gate: must be one of 'always', 'gated' or 'never'" in done.stderr


def test_ask_applies_backend_gate_and_panel_over_the_file(demo_kb_dir: Path,
                                                          tmp_path: Path) -> None:
    path = _write(tmp_path, "[retrieval]\nbackend = \"hybrid\"\n[ring3]\ngate = \"always\"\n")
    result = CliRunner().invoke(cli, [
        "ask", "How many days do I have to return an item?", "--kb", str(demo_kb_dir),
        "--config", str(path), "--backend", "bm25", "--gate", "never",
        "--panel", "extractive", "--no-cache", "--json"])
    assert result.exit_code == 0, result.output
    trace = json.loads(result.output)["trace"]
    assert trace["backend"] == "bm25"
    assert [member["name"] for member in trace["panel"]] == ["extractive"]
    assert trace["gate"]["mode"] == "never"


def test_ask_prints_the_answer_first_and_the_trace_on_request(demo_kb_dir: Path) -> None:
    """The default is a summary that opens with the answer; --trace prints every table."""
    question = "How many days do I have to return an item?"
    summary = CliRunner().invoke(cli, ["ask", question, "--kb", str(demo_kb_dir),
                                       "--panel", "extractive"])
    assert summary.exit_code == 0, summary.output
    lines = summary.output.strip().splitlines()
    assert lines[0].startswith(("Answer:", "Refused:")) and len(lines) <= 12
    assert any(line.strip().startswith("Ring 1:") for line in lines)
    assert "Retrieval Scorer" not in summary.output
    full = CliRunner().invoke(cli, ["ask", question, "--kb", str(demo_kb_dir),
                                    "--panel", "extractive", "--trace"])
    assert full.exit_code == 0, full.output
    assert "Ring 2 (Retrieval Scorer)" in full.output and len(full.output.splitlines()) > 20


def test_any_model_is_the_reader_in_one_line(tmp_path: Path) -> None:
    """The reader is the first panel member: a registry model, a .gguf path, or an inline
    backend table (Ollama, an OpenAI-compatible endpoint) in the same list."""
    config = tmp_path / "reader.toml"
    config.write_text('[panel]\nmembers = [{ kind = "ollama", model = "qwen2.5:7b" }, '
                      '"gemma3-270m", "extractive"]\n')
    settings = load_settings(config)
    assert settings.panel[0] == {"kind": "ollama", "model": "qwen2.5:7b"}
    assert CliRunner().invoke(cli, ["config", "check", str(config)]).exit_code == 0
    shown = CliRunner().invoke(cli, ["config", "show", "--config", str(config)])
    assert shown.exit_code == 0 and "qwen2.5:7b" in shown.output


def test_a_misspelt_backend_table_is_refused_by_check(tmp_path: Path) -> None:
    for text in ('[panel]\nmembers = [{ kind = "olama", model = "x" }]\n',
                 '[[panel.remote]]\nkind = "openai"\nmodel = "m"\nbase_ulr = "http://x"\n'):
        config = tmp_path / "bad.toml"
        config.write_text(text)
        result = CliRunner().invoke(cli, ["config", "check", str(config)])
        assert isinstance(result.exception, InputError)  # the entry point exits 2 on it
        assert "'kind'" in str(result.exception) or "'base_ulr'" in str(result.exception)


def test_ask_help_names_the_default_backend_the_settings_use() -> None:
    """The help cannot read the settings (``--help`` must not import pydantic), so this
    checks that what it says is what an ask without ``--backend`` runs with."""
    shown = CliRunner().invoke(cli, ["ask", "--help"], terminal_width=200)
    assert shown.exit_code == 0
    flat = " ".join(shown.output.split())
    assert f"{Settings().pipeline.backend} unless set" in flat and "else dense" not in flat
